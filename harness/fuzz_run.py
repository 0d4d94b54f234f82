"""Boot malformed media and check the kernel's invariants (`make fuzz`, issue 6).

    /usr/bin/python3 -m harness.fuzz_run [--seed S] [--count N] [--rounds R]
                                         [--variant srpart-debug]

Images come from fixtures/fuzz.py (seeded; the seed is printed and accepted
back). Each VM has eight drives, sr_mod.partscan=1: the first eight images
are parsed when sr probes the drives, then the host swaps the media over
QMP R-1 times (the rescan an open does after a media change), eight new
images per round. After every round each drive is opened the way udev does
and the invariants are checked. A run fails on any bad pattern in the
kernel log (panic, BUG, WARNING, Oops, KASAN, UBSAN, lockdep, ...), on a
hang, when a partition lies outside its medium, is not 2048-aligned or not
on the extended major, when a whole disk is not at 11,K, and -- on a kernel
with kmemleak -- on any leak found by a scan before the VM stops.
Failing images are copied to build/fuzz/failed/ (their names carry seed and
index; `fuzz.case(seed, index, dir)` rebuilds one alone).
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from . import paths
from . import kernel as kernels
from .console import GuestError
from .errors import SrpartError
from .fuzz_check import PER_VM, ROUNDS, Outcome, VmResult, fuzz_vm
from .vm import VM, boot_spec


def run(seed: int, count: int, kernel: str, variant: str, keep: Path,
        rounds: int = ROUNDS) -> Outcome:
    from fixtures import fuzz

    out = Outcome()
    t0 = time.monotonic()
    cases = fuzz.generate(seed, count, paths.BUILD / "fuzz" / str(seed))
    i = 0
    while i < len(cases):
        mine = cases[i:i + PER_VM * rounds]
        first = mine[:PER_VM]
        name = f"fuzz-{kernel}-{variant}-{seed}-{out.vms}"
        spec = boot_spec(kernel, variant, [c.path for c in first], ["sr_mod.partscan=1"],
                         qmp=True)
        try:
            with VM(spec, name) as vm:
                res = fuzz_vm(vm, mine)
        except (GuestError, SrpartError) as e:        # boot or power-off failed
            res = VmResult(failures=[(mine, [str(e).splitlines()[0]])])
        out.vms += 1
        out.partitions += res.partitions
        out.scans += res.kmemleak
        out.leaks += len(res.leaks)
        for batch, problems in res.failures:
            keep.mkdir(parents=True, exist_ok=True)
            for c in batch:
                shutil.copy2(c.path, keep / c.path.name)
            out.failures.append(f"seed {seed}, cases {batch[0].index}-{batch[-1].index} "
                                f"(VM {name}, log build/logs/{name}.log): " + "; ".join(problems))
        # a failing round is not retried; the VM's later rounds go to the next VM
        advance = res.processed
        for batch, _ in res.failures:
            advance = len(mine) if batch is mine else advance + len(batch)
        i += advance
        out.images = i
        leak = (f"{len(res.leaks)} leaks" if res.leaks else
                "clean" if res.kmemleak else "not scanned")
        print(f"  VM {name}: cases {mine[0].index}-{mine[0].index + advance - 1}, "
              f"{res.partitions} partitions, kmemleak {leak}, {len(res.failures)} failures",
              flush=True)
    out.seconds = time.monotonic() - t0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.fuzz_run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--variant", default="srpart-debug")
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help=f"images per drive per VM (default {ROUNDS}: one probe, then swaps)")
    args = ap.parse_args(argv)
    print(f"srpart fuzz: seed {args.seed}, {args.count} images, {args.kernel} {args.variant} "
          f"(reproduce: --seed {args.seed} --count {args.count} --rounds {args.rounds})", flush=True)
    kernels.build(args.kernel, args.variant)
    o = run(args.seed, args.count, args.kernel, args.variant, paths.BUILD / "fuzz" / "failed",
            args.rounds)
    print(f"srpart fuzz: {o.images} images in {o.vms} VMs, {o.partitions} partitions checked, "
          f"{len(o.failures)} failures, kmemleak scans {o.scans} (leaks {o.leaks}), "
          f"{o.seconds:.0f} s "
          f"({o.seconds / max(o.images, 1):.2f} s per image)")
    for f in o.failures:
        print(f"  FAIL {f}")
    return 1 if o.failures else 0


if __name__ == "__main__":
    from harness import entry
    entry.run(main)
