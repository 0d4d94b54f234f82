"""Media-swap and hot-plug churn with partitions in use (`make stress`, issue 6).

    /usr/bin/python3 -m harness.stress_run [--kernel 6.1] [--variant srpart-debug]
                                           [--swaps 200] [--cycles 30]

swaps    one VM, one drive. Two guest readers run the whole time: one streams
         /dev/sr0 with dd, one mounts sr0p1 and streams its file and the
         partition device, unmounting between passes. The host changes the
         medium over QMP (forcing the locked tray open, as a user with a
         paper clip would) `--swaps` times, cycling through three discs with
         different tables (MBR, SGI, Sun), and after every swap waits until
         sr0's partitions are exactly the host oracle's for the new disc.
cycles   one VM: `--cycles` times hot-plug a drive holding an MBR disc, check
         it is sr1 at 11:1 with the oracle's partitions, mount sr1p1 and
         start a reader, unplug the drive under the mount, unmount.

Both end with the extended minors (major 259) in use compared with the set
at the start, after a pause with no partition on the churned drive (a
dropped partition frees its minor after an RCU grace period), and -- on a kernel with kmemleak (the srpart-debug variant) --
a leak scan. Any bad pattern in the kernel log (panic, BUG, WARNING, Oops,
KASAN, UBSAN, lockdep) fails the run. Prints its figures; pytest/test_stress.py
runs a short version of both on the plain kernels inside `make check`.
"""
from __future__ import annotations

import argparse

from . import kernel as kernels
from .console import GuestError
from .errors import SrpartError
from .churn import Churn, hotplug, swap_images, swaps
from .vm import VM, boot_spec


def run(kernel: str, variant: str, n_swaps: int, n_cycles: int) -> list[Churn]:
    from fixtures import catalog

    out = []
    first = swap_images()[0]
    plan = (("swaps", [first.path], lambda vm: swaps(vm, n_swaps)),
            ("hotplug", [catalog.first("sun-xorriso").path],
             lambda vm: hotplug(vm, n_cycles)))
    for name, images, job in plan:
        spec = boot_spec(kernel, variant, images, ["sr_mod.partscan=1"], qmp=True)
        spec.memory_mb = 512
        vm_name = f"stress-{kernel}-{variant}-{name}"
        try:
            with VM(spec, vm_name) as vm:
                c = job(vm)
        except (GuestError, SrpartError) as e:
            c = Churn(name, problems=[f"{str(e).splitlines()[0]} (log build/logs/{vm_name}.log)"])
        out.append(c)
        print(f"srpart stress: {c.line()}", flush=True)
        for p in c.problems:
            print(f"  FAIL {p}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.stress_run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--variant", default="srpart-debug")
    ap.add_argument("--swaps", type=int, default=200)
    ap.add_argument("--cycles", type=int, default=30)
    args = ap.parse_args(argv)
    print(f"srpart stress: {args.kernel} {args.variant}, {args.swaps} media swaps, "
          f"{args.cycles} hot-plug cycles", flush=True)
    kernels.build(args.kernel, args.variant)
    res = run(args.kernel, args.variant, args.swaps, args.cycles)
    return 1 if any(c.problems for c in res) else 0


if __name__ == "__main__":
    from harness import entry
    entry.run(main)
