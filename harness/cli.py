"""srpart command line: build kernels, make fixtures, boot CD images.

    ./srpart boot --kernel 6.1 --cd a.iso --cd b.iso [--partscan on|off|absent] [-- COMMAND]
    ./srpart boot --userspace udev --cd a.iso      (Debian's udev: lsblk and /dev/disk links)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import entry, guest, images, initramfs, kernel, packages, source, userspace
from .errors import SrpartError
from .vm import VM, boot_spec

PARTSCAN_ARGS = {"on": ["sr_mod.partscan=1"], "off": ["sr_mod.partscan=0"], "absent": []}


def partscan_cmdline(value: str) -> list[str]:
    try:
        return list(PARTSCAN_ARGS[value])
    except KeyError:
        raise SrpartError(f"--partscan must be one of {', '.join(PARTSCAN_ARGS)}") from None


def cmd_deps(args: argparse.Namespace) -> int:
    packages.require()
    print("srpart: all Debian packages present")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    variants = (kernel.available(args.kernel) if args.variant == "all" else
                kernel.tested(args.kernel) if args.variant == "tested" else (args.variant,))
    for v in variants:
        k = kernel.build(args.kernel, v)
        how = f"built in {k.built_seconds:.1f} s" if k.built_seconds is not None else "up to date"
        print(f"srpart: {k.kernel} {k.variant} ({k.version}): {k.bzimage} ({how})")
    print(f"srpart: initramfs {initramfs.build()}")
    return 0


def cmd_fixtures(args: argparse.Namespace) -> int:
    from fixtures import catalog

    for img in catalog.drive_images(args.drives) + catalog.kind_images(catalog.MIXED + catalog.REST):
        print(f"{img.path}  {img.kind}  {img.table}  {img.volume_label}")
    return 0


def cmd_boot(args: argparse.Namespace) -> int:
    if not args.cd:
        raise SrpartError("no --cd IMAGE given: the guest would have no CD drive "
                          "(give one --cd per drive)")
    cds = [Path(c) for c in args.cd]
    for c in cds:
        for w in images.check_cd_image(c):
            print(f"srpart: warning: {w}", file=sys.stderr)
    source.tarball_for(args.kernel)
    packages.require(["qemu-system-x86", "busybox-static"])
    kernel.build(args.kernel, args.variant)
    us = userspace.userspace(args.userspace)
    spec = boot_spec(args.kernel, args.variant, cds, partscan_cmdline(args.partscan), args.accel,
                     userspace=us.name)
    command = (" ".join(args.command) if args.command else
               guest.UDEV_DEFAULT_CMD if us.udev else guest.DEFAULT_CMD)
    with VM(spec, f"boot-{args.kernel}-{args.variant}-{us.name}") as vm:
        r = vm.run(command, timeout=args.timeout)
        sys.stdout.write(r.output)
    return r.status


def cmd_demo(args: argparse.Namespace) -> int:
    from fixtures import catalog

    imgs = catalog.drive_images(2)
    version = kernel.build(args.kernel, "srpart").version
    spec = boot_spec(args.kernel, "srpart", [i.path for i in imgs], partscan_cmdline("on"), args.accel)
    first = imgs[0].data[0]
    steps = [
        ("cat /proc/partitions", "/proc/partitions in the guest (sr_mod.partscan=1):"),
        (guest.PARTITIONS_CMD,
         "partitions (name major:minor start size, 512-byte sectors):"),
        (f"mkdir -p /mnt/p && mount -t {first.fstype} -o ro /dev/sr0p{first.number} /mnt/p && "
         f"cat /mnt/p/{first.file} && umount /mnt/p",
         f"content of {first.file} read from /dev/sr0p{first.number}:"),
    ]
    with VM(spec, f"demo-{args.kernel}") as vm:
        print(f"srpart: booted {version} with {', '.join(i.path.name for i in imgs)} "
              f"in {vm.boot_seconds:.1f} s")
        for command, title in steps:
            print(f"\n== {title}")
            print(vm.check(command).rstrip("\n"))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="srpart", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("deps", help="check the Debian packages (make deps installs them)")
    d.set_defaults(func=cmd_deps)

    b = sub.add_parser("build", help="build test kernels and the initramfs")
    b.add_argument("--kernel", default="6.1")
    b.add_argument("--variant", default="all", choices=[*kernel.VARIANTS, "all", "tested"],
                   help="all: every variant but srpart-debug; tested: those the pytest matrix "
                        "boots (make kernels)")
    b.set_defaults(func=cmd_build)

    f = sub.add_parser("fixtures", help="generate the partitioned CD images (matrix and every kind)")
    f.add_argument("--drives", type=int, default=8)
    f.set_defaults(func=cmd_fixtures)

    bo = sub.add_parser("boot", help="boot a kernel with your CD images and run a command")
    bo.add_argument("--kernel", default="6.1")
    bo.add_argument("--variant", default="srpart", choices=kernel.VARIANTS)
    bo.add_argument("--cd", action="append", default=[], metavar="IMAGE")
    bo.add_argument("--partscan", default="on", choices=list(PARTSCAN_ARGS))
    bo.add_argument("--accel", choices=["auto", "kvm", "tcg"])
    bo.add_argument("--userspace", default="busybox", choices=list(userspace.USERSPACES),
                    help="busybox (fast), udev (Debian 12's udev and stock rules, util-linux) "
                         "or udev-srpart (plus patches/udev/61-srpart-partitions.rules)")
    bo.add_argument("--timeout", type=float, default=60)
    bo.add_argument("command", nargs=argparse.REMAINDER,
                    help="after --: run this in the guest (default: partitions)")
    bo.set_defaults(func=cmd_boot)

    de = sub.add_parser("demo", help="boot two partitioned fixture CDs and read sr0p1")
    de.add_argument("--kernel", default="6.1")
    de.add_argument("--accel", choices=["auto", "kvm", "tcg"])
    de.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "command", None) and args.command[:1] == ["--"]:
        args.command = args.command[1:]
    return entry.call(lambda: args.func(args))
