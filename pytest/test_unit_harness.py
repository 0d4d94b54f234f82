"""QEMU command line, accelerator choice, Kconfig validation, guest parsers, cpio (no VM)."""
from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import pytest

from harness import guest, initramfs, kconfig, paths, qemu, vm
from harness.errors import SrpartError

DATA = Path(__file__).parent / "data"


def argv_of(**kw) -> list[str]:
    base = dict(kernel=Path("/k"), initrd=Path("/i"))
    base.update(kw)
    return qemu.QemuConfig(**base).argv()


def test_qemu_one_scsi_cd_per_image_in_order():
    a = argv_of(drives=[qemu.Drive(Path("/a.iso")), qemu.Drive(Path("/b.iso"))])
    devs = [a[i + 1] for i, x in enumerate(a) if x == "-device" and "serial" not in a[i + 1]]
    assert devs[0] == "virtio-scsi-pci,id=scsi0"
    assert devs[1].startswith("scsi-cd,") and "scsi-id=0" in devs[1] and "drive=drive0" in devs[1]
    assert devs[2].startswith("scsi-cd,") and "scsi-id=1" in devs[2] and "drive=drive1" in devs[2]
    assert "filename=/a.iso" in " ".join(a) and "filename=/b.iso" in " ".join(a)


def test_qemu_machine_console_and_no_reboot():
    a = argv_of(cmdline=["sr_mod.partscan=1"], kernel_log=Path("/l"))
    assert a[a.index("-machine") + 1] == "q35,accel=tcg"
    assert "-no-reboot" in a and "-cpu" not in a
    assert "file:/l" in a and a.count("-serial") == 1      # ttyS0 only: the kernel log
    port = [x for x in a if x.startswith("virtserialport,")]
    assert port == [f"virtserialport,bus=vser0.0,chardev=cmd0,name={qemu.CMD_PORT}"]
    assert "stdio,id=cmd0,signal=off" in a
    append = a[a.index("-append") + 1].split()
    assert append[:2] == ["console=ttyS0", "panic=-1"]
    assert "srpart.drives=0" in append and "srpart.disks=0" in append
    assert f"srpart.cmd_port={qemu.CMD_PORT}" in append
    assert append[-1] == "sr_mod.partscan=1"
    # the TCG speed-ups, then the caller's parameters
    assert qemu.FAST_BOOT and append[-1 - len(qemu.FAST_BOOT):-1] == qemu.FAST_BOOT


def test_qemu_empty_drive_has_no_medium():
    a = argv_of(drives=[qemu.Drive(None)])
    assert "-blockdev" not in a
    assert any(x.startswith("scsi-cd,") and "drive=" not in x for x in a)


def test_qmp_socket_fits_a_unix_socket_from_any_checkout(tmp_path, monkeypatch):
    # CI clones to a longer path than a developer's checkout; a socket under
    # build/run/ named after the test went over sun_path's 108 bytes there.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setattr(paths, "BUILD", deep)
    monkeypatch.setattr(paths, "LOGS", deep / "logs")
    monkeypatch.setattr(qemu, "require_qemu", lambda: None)
    seen: list[list[str]] = []

    class Spawned(Exception):
        pass

    def spawn(cmd, args, **kw):
        seen.append([cmd, *args])
        raise Spawned()

    import pexpect
    monkeypatch.setattr(pexpect, "spawn", spawn)
    spec = vm.BootSpec(Path("/k"), Path("/i"), qmp=True)
    machine = vm.VM(spec, "life-" + "x" * 200)
    with pytest.raises(Spawned):
        machine.start()
    argv = seen[0]
    sock = argv[argv.index("-qmp") + 1].removeprefix("unix:").split(",")[0]
    assert len(sock.encode()) < 108, sock
    assert not Path(sock).parent.exists(), "a failed start leaves its socket directory behind"


def test_a_vm_name_that_is_running_is_refused(tmp_path, monkeypatch):
    # a second VM of the same name would delete the first's kernel log
    monkeypatch.setattr(paths, "LOGS", tmp_path / "logs")
    monkeypatch.setattr(qemu, "require_qemu", lambda: None)
    spec = vm.BootSpec(Path("/k"), Path("/i"))
    seen: list[str] = []

    class Spawned(Exception):
        pass

    def spawn(cmd, args, **kw):
        # the first VM is starting: a second of the same name must be refused
        if not seen:
            seen.append("first")
            with pytest.raises(SrpartError, match="already running"):
                vm.VM(spec, "same").start()
            seen.append("refused")
        raise Spawned()

    import pexpect
    monkeypatch.setattr(pexpect, "spawn", spawn)
    with pytest.raises(Spawned):
        vm.VM(spec, "same").start()
    assert seen == ["first", "refused"]
    with pytest.raises(Spawned):          # the name is free again once the first is gone
        vm.VM(spec, "same").start()


def test_qmp_refuses_a_path_too_long_for_a_socket_in_one_line():
    from harness.qmp import QMP, QmpError
    with pytest.raises(QmpError, match="at most 107"):
        QMP(Path("/" + "p" * 200))


def test_kvm_only_with_vmx_or_svm(tmp_path):
    dev = tmp_path / "kvm"
    dev.write_text("")
    assert not qemu.kvm_usable("flags\t: fpu sse2 hypervisor\n", str(dev))
    assert qemu.kvm_usable("flags\t: fpu vmx sse2\n", str(dev))
    assert not qemu.kvm_usable("flags\t: fpu vmx sse2\n", str(tmp_path / "missing"))


def test_accel_can_be_forced(monkeypatch):
    monkeypatch.setenv("SRPART_ACCEL", "tcg")
    assert qemu.choose_accel() == "tcg"
    assert qemu.choose_accel("kvm") == "kvm"
    with pytest.raises(SrpartError):
        qemu.choose_accel("hvf")


def test_kconfig_names_every_lost_option(tmp_path):
    want = kconfig.Kconfig.parse("CONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\nCONFIG_D=m\n")
    dot = tmp_path / ".config"
    dot.write_text("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_D=y\n")
    with pytest.raises(SrpartError) as e:
        kconfig.validate_config(want, dot)
    msg = str(e.value)
    assert "CONFIG_B=y (got n)" in msg and "CONFIG_D=m (got y)" in msg
    assert "CONFIG_A" not in msg and "CONFIG_C" not in msg   # absent satisfies "is not set"


def test_parse_recorded_guest_output():
    proc = guest.parse_proc_partitions((DATA / "proc-partitions-2drives.txt").read_text())
    assert [(r.major, r.minor, r.name) for r in proc][:2] == [(11, 0, "sr0"), (259, 0, "sr0p1")]
    assert len(proc) == 7
    sysp = guest.parse_sys_partitions((DATA / "sys-partitions-2drives.txt").read_text())
    assert sysp[2] == guest.SysPartition("sr1p1", 259, 2, 0, 13912)


def test_cpio_is_readable_by_cpio(tmp_path):
    c = initramfs.Cpio()
    for e in initramfs.entries(b"BB", {"srprobe": b"PROBE", "srctl": b"CTL"}, b"#!/bin/sh\n"):
        c.add(e)
    (tmp_path / "i.cpio").write_bytes(c.finish())
    listing = subprocess.run(["cpio", "-itv", "-F", str(tmp_path / "i.cpio")], capture_output=True,
                             text=True, check=True).stdout
    assert "init" in listing and "bin/busybox" in listing
    assert any(ln.startswith("crw") and "dev/console" in ln for ln in listing.splitlines())


@pytest.mark.host
def test_initramfs_has_init_and_helpers():
    data = gzip.decompress(initramfs.build().read_bytes())
    for name in (b"init\0", b"bin/busybox\0", b"bin/srprobe\0", b"bin/srctl\0", b"dev/console\0"):
        assert name in data


def test_the_debug_kernel_tests_what_the_plain_one_does_plus_sanitizers():
    """Properties, not a restatement of Kconfig.with_options: the sanitizers are
    on; nothing the plain kernel builds is off (the debug kernel exercises the
    same code). (Seen failing with
    CONFIG_EFI_PARTITION=n added to Kconfig.debug.fragment.)"""
    from harness import kernel

    base = kernel.requested_config("srpart").options
    debug = kernel.requested_config("srpart-debug").options
    for opt in ("CONFIG_KASAN", "CONFIG_UBSAN", "CONFIG_PROVE_LOCKING", "CONFIG_DEBUG_KMEMLEAK"):
        assert debug.get(opt) == "y", opt
    lost = sorted(k for k, v in base.items() if v in ("y", "m") and debug.get(k) not in ("y", "m"))
    assert lost == [], "the debug kernel drops what the plain one builds"


def test_kmemleak_report_parses_into_one_block_per_object():
    present, leaks = guest.parse_kmemleak((DATA / "kmemleak-two.txt").read_text())
    assert present and len(leaks) == 2
    assert "efi_partition" in leaks[0] and "add_partition" not in leaks[0]
    assert leaks[1].startswith("unreferenced object 0xffff888004e1c180 (size 32)")


def test_kmemleak_clean_and_absent_are_told_apart():
    assert guest.parse_kmemleak("") == (True, [])
    assert guest.parse_kmemleak("kmemleak: absent\n") == (False, [])


def test_meminfo_fields_in_kb():
    from harness import bench_memory

    text = "MemTotal:  175644 kB\nMemFree:   137636 kB\nSlab:  5120 kB\nSUnreclaim:  3072 kB\n"
    assert bench_memory._meminfo(text) == {"MemFree": 137636, "Slab": 5120, "SUnreclaim": 3072}


def test_the_variant_table_says_what_make_kernels_builds():
    """Properties of VARIANTS rather than its contents restated: what the matrix
    boots is what `make kernels` builds, each from a series that exists, the
    pristine tree among them (the reference every comparison needs); report-
    and demand-built variants are available but not tested."""
    from harness import kernel, paths

    for k in ("6.1", "6.12"):
        tested, available = kernel.tested(k), kernel.available(k)
        assert tested and set(tested) <= set(available)
        assert tested == [n for n in kernel.VARIANTS if n in tested], "not in build order"
        for n in tested:
            v = kernel.variant(n)
            assert v.built_by == "kernels"
            assert v.patches is None or (paths.PATCHES / v.patch_dir(k)).is_dir(), (k, n)
            assert kernel.build_command(k, n) == f"make kernels KERNELS={k}"
        assert any(kernel.variant(n).patches is None for n in tested), "no pristine reference"
        assert any(kernel.variant(n).modules for n in tested), "no sr_mod.ko variant"
        for n in set(available) - set(tested):
            assert kernel.variant(n).built_by != "kernels"
    assert kernel.build_command("6.1", "srpart-debug") == \
        "./srpart build --kernel 6.1 --variant srpart-debug"
    assert "srpart-debug" not in kernel.available("6.1")
    with pytest.raises(kernel.SrpartError, match="unknown kernel variant 'srpart-y'"):
        kernel.variant("srpart-y")


def test_a_stamp_is_fresh_only_with_its_key_and_its_outputs(tmp_path):
    from harness.cache import Stamp, key_of

    out = tmp_path / "out.img"
    s = Stamp(tmp_path / "d" / "stamp", key_of("input", "config"))
    assert not s.fresh(out)
    out.write_text("x")
    s.write()
    assert s.fresh(out) and not s.fresh(out, tmp_path / "missing")
    assert not Stamp(s.path, key_of("input", "other config")).fresh(out)
    s.drop()
    assert not s.fresh(out) and not s.exists()


def test_disk_listing_parses_name_dev_and_size():
    from harness import guest

    assert guest.parse_disks("sr0 11:0 7168\nsr1 11:1 13912\n\n") == [
        guest.Disk("sr0", "11:0", 7168), guest.Disk("sr1", "11:1", 13912)]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private mount namespace")
def test_udevsock_hands_over_a_listening_socket_with_passcred(tmp_path):
    """The guest's udevd gets its control socket from udevsock, made as systemd's
    systemd-udevd-control.socket makes it (see udevsock.c for the race it
    removes). Run on the host in a private mount namespace with a tmpfs /run;
    PROGRAM is a python script that reports what it was handed. (Seen failing
    with setsockopt(SO_PASSCRED) removed from udevsock.c: passcred 0.)"""
    exe = tmp_path / "udevsock"
    initramfs.build_helper("udevsock", exe)
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, socket, sys\n"
        "s = socket.socket(fileno=3)\n"
        "print(os.environ['LISTEN_FDS'], os.environ['LISTEN_PID'] == str(os.getpid()),\n"
        "      s.family == socket.AF_UNIX, s.type == socket.SOCK_SEQPACKET, s.getsockname(),\n"
        "      s.getsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED),\n"
        "      s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))\n"
        "s.detach()\n")
    r = subprocess.run(["unshare", "--mount", "sh", "-c",
                        f"mount -t tmpfs tmpfs /run && exec {exe} /usr/bin/python3 {probe}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "True", "True", "True", "/run/udev/control", "1", "1"]
