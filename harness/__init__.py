"""srpart test harness: kernel -> initramfs -> qemu -> console.

The data path, one module per job:
  source.py     extract the Debian tarball, apply patches/<ver>/ with git am
  kconfig.py    tinyconfig + Kconfig.fragment, validate_config()
  kernel.py     build bzImage variants in one shared object tree
  initramfs.py  busybox-static initramfs with guest-files/ (init, srprobe.c)
  qemu.py       the QEMU command line (one way to boot a VM)
  console.py    marker + exit-code protocol over the serial console
  vm.py         boot a kernel with CD images and hand out a console
  oracle.py     host-side partition oracle computed from image bytes
  guest.py      parsers for what the guest prints
"""
