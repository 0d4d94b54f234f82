"""Boot malformed media and check the kernel's invariants (`make fuzz`, issue 6 WIP).

    /usr/bin/python3 -m harness.fuzz_run [--seed S] [--count N] [--variant srpart-debug]

Images come from fixtures/fuzz.py (seeded; the seed is printed and accepted
back). Eight drives per VM, sr_mod.partscan=1, each drive opened the way
udev does. A run fails on any bad pattern in the kernel log (panic, BUG,
WARNING, Oops, KASAN, UBSAN, ...), on a hang, and when a partition lies
outside its medium, is not 2048-aligned, or a whole disk is not at 11,K.
Failing images are copied to build/fuzz/failed/ with their seed and index.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import guest, paths
from .console import GuestError
from .errors import SrpartError
from .vm import VM, boot_spec

PER_VM = 8
DISKS_CMD = "for d in /sys/block/sr*; do echo ${d##*/} $(cat $d/dev) $(cat $d/size); done"


@dataclass
class Outcome:
    images: int = 0
    vms: int = 0
    partitions: int = 0
    failures: list[str] = None
    seconds: float = 0.0


def check_batch(vm: VM, n: int) -> tuple[int, list[str]]:
    """The invariants for drives sr0..sr<n-1>; returns (partitions seen, problems)."""
    problems = []
    # a sanitizer kernel probes slowly: the guest's init may have stopped waiting
    vm.check(guest.wait_cmd(f"[ $(ls -d /sys/block/sr* | wc -l) -ge {n} ]", 120), timeout=150)
    vm.check(" ".join(["srprobe"] + [f"/dev/sr{k}" for k in range(n)]) + " || true")
    sizes = {}
    for line in vm.check(DISKS_CMD).splitlines():
        name, dev, size = line.split()
        sizes[name] = int(size)
        if dev != f"11:{name[2:]}":
            problems.append(f"{name} is {dev}, not 11:{name[2:]}")
    if len(sizes) != n:
        problems.append(f"{len(sizes)} sr disks, {n} drives")
    parts = guest.parse_sys_partitions(vm.check(guest.PARTITIONS_CMD))
    for p in parts:
        disk = p.name.split("p")[0]
        if p.start % 4 or p.size % 4:
            problems.append(f"{p.name}: start {p.start} size {p.size} not 2048-aligned")
        if p.start + p.size > sizes.get(disk, 0):
            problems.append(f"{p.name}: {p.start}+{p.size} beyond the medium ({sizes.get(disk)})")
        if p.major != 259:
            problems.append(f"{p.name} is {p.major}:{p.minor}, not on the extended major")
    return len(parts), problems


def run(seed: int, count: int, series: str, variant: str, keep: Path) -> Outcome:
    from fixtures import fuzz

    out = Outcome(failures=[])
    t0 = time.monotonic()
    cases = fuzz.generate(seed, count, paths.BUILD / "fuzz" / str(seed))
    for b in range(0, len(cases), PER_VM):
        batch = cases[b:b + PER_VM]
        spec = boot_spec(series, variant, [c.path for c in batch], ["sr_mod.partscan=1"])
        name = f"fuzz-{seed}-{b // PER_VM}"
        problems: list[str]
        try:
            with VM(spec, name) as vm:
                seen, problems = check_batch(vm, len(batch))
                out.partitions += seen
        except (GuestError, SrpartError) as e:
            problems = [str(e).splitlines()[0]]
        out.vms += 1
        out.images += len(batch)
        if problems:
            keep.mkdir(parents=True, exist_ok=True)
            for c in batch:
                shutil.copy2(c.path, keep / c.path.name)
            out.failures.append(f"seed {seed}, cases {batch[0].index}-{batch[-1].index} "
                                f"(VM {name}, log build/logs/{name}.log): " + "; ".join(problems))
    out.seconds = time.monotonic() - t0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.fuzz_run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--variant", default="srpart-debug")
    args = ap.parse_args(argv)
    print(f"srpart fuzz: seed {args.seed}, {args.count} images, {args.kernel} {args.variant} "
          f"(reproduce: --seed {args.seed} --count {args.count})", flush=True)
    try:
        o = run(args.seed, args.count, args.kernel, args.variant, paths.BUILD / "fuzz" / "failed")
    except SrpartError as e:
        print(f"srpart: error: {e}", file=sys.stderr)
        return 2
    print(f"srpart fuzz: {o.images} images in {o.vms} VMs, {o.partitions} partitions checked, "
          f"{len(o.failures)} failing VMs, {o.seconds:.0f} s "
          f"({o.seconds / max(o.images, 1):.2f} s per image)")
    for f in o.failures:
        print(f"  FAIL {f}")
    return 1 if o.failures else 0


if __name__ == "__main__":
    sys.exit(main())
