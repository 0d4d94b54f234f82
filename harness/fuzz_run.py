"""Boot malformed media and check the kernel's invariants (`make fuzz`, issue 6).

    /usr/bin/python3 -m harness.fuzz_run [--seed S] [--count N] [--rounds R]
                                         [--variant srpart-debug] [--block 2048|512|4096]

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
With --block 512 or 4096 the images are scsi-hd disks instead, SD_PER_VM
to a VM, booted once under the unpatched kernel and once under the variant
(harness/fuzz_check.py says what must hold); the debug kernels' extra
parsers (fuzz.DEBUG_KINDS) are checked there without the comparison.
Failing images are copied to build/fuzz/failed/ (their names carry seed and
index; `fuzz.case(seed, index, dir)` rebuilds one alone).
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from . import gcov, guest, paths
from .cache import key_of
from . import kernel as kernels
from .console import GuestError
from .errors import SrpartError
from .fuzz_check import (PER_VM, ROUNDS, SD_PER_VM, Outcome, VmResult, fuzz_vm,
                         sd_problems)
from .qemu import Drive
from .vm import VM, boot_spec


def gcov_dir(kernel: str, variant: str) -> Path | None:
    """Where this build's per-VM coverage goes (None: the variant has no gcov). Keyed by
    the kernel artifact's stamp: .gcda files of another build do not merge."""
    if not kernels.variant(variant).gcov:
        return None
    stamp = kernels.artifact_dir(kernel, variant) / "stamp"
    return paths.BUILD / "fuzz" / "gcov" / kernel / key_of(stamp.read_text())[:12]


def collect_gcov(vm: VM, where: Path | None, name: str) -> None:
    if where is not None:
        gcov.save(where / "runs" / name, gcov.parse_collected(vm.check(gcov.COLLECT_CMD,
                                                                       timeout=600)))


def kinds_for(variant: str, kinds: str = "all") -> tuple[str, ...]:
    """The fuzz kinds for `variant`: "all" adds the parsers only the debug kernels
    have (fuzz.DEBUG_KINDS) when the variant is a debug one; "debian" never does;
    a comma-separated list of kinds (e.g. "ldm") is taken as it is, to give one
    parser more cases than its share of a mixed run."""
    from fixtures import fuzz

    if kinds not in ("all", "debian"):
        named = tuple(kinds.split(","))
        unknown = [k for k in named if k not in fuzz.WRITERS]
        if unknown:
            raise SrpartError(f"unknown fuzz kinds {kinds!r}: choose all, debian or a "
                              f"comma-separated list of {', '.join(fuzz.WRITERS)}")
        return named
    debug = kernels.variant(variant).fragment and kinds == "all"
    return fuzz.KINDS + (fuzz.DEBUG_KINDS if debug else ())


def run_sd(seed: int, count: int, kernel: str, variant: str, keep: Path, block: int,
           kinds: str = "all", first: int = 0) -> Outcome:
    """scsi-hd disks of `block` bytes: the variant against the unpatched kernel."""
    from fixtures import fuzz

    out = Outcome()
    t0 = time.monotonic()
    cases = fuzz.generate(seed, count, paths.BUILD / "fuzz" / str(seed), kinds_for(variant, kinds),
                          first)
    for i in range(0, len(cases), SD_PER_VM):
        mine = cases[i:i + SD_PER_VM]
        drives = [Drive(c.path, "scsi-hd", block) for c in mine]
        views, problems = {}, []
        for v in ("unpatched", variant):
            name = f"fuzz-sd{block}-{kernel}-{v}-{seed}-{out.vms}"
            try:
                with VM(boot_spec(kernel, v, drives, []), name) as vm:
                    views[v] = guest.parse_sd(vm.check(guest.SD_CMD, timeout=120))
                    if v == variant and kernels.variant(variant).fragment:
                        present, leaks = guest.parse_kmemleak(
                            vm.check(guest.kmemleak_cmd(), timeout=300))
                        out.scans += present
                        out.leaks += len(leaks)
                        problems += [f"kmemleak: {len(leaks)} leaks"] if leaks else []
                    if v == variant:
                        collect_gcov(vm, gcov_dir(kernel, variant), name)
            except (GuestError, SrpartError) as e:
                problems.append(f"{v}: {str(e).splitlines()[0]} (log build/logs/{name}.log)")
        out.vms += 2
        if len(views) == 2:
            debug_only = {c.kind for c in mine} & set(fuzz.DEBUG_KINDS)
            problems += sd_problems(views["unpatched"], views[variant], block,
                                    compare=not debug_only)
            out.partitions += sum(len(d.parts) for d in views[variant].values())
        if problems:
            keep.mkdir(parents=True, exist_ok=True)
            for c in mine:
                shutil.copy2(c.path, keep / c.path.name)
            out.failures.append(f"seed {seed}, cases {mine[0].index}-{mine[-1].index} on "
                                f"scsi-hd {block}: " + "; ".join(problems))
        out.images = i + len(mine)
        print(f"  VMs {out.vms - 1}-{out.vms}: cases {mine[0].index}-{mine[-1].index}, "
              f"{len(problems)} problems", flush=True)
    out.seconds = time.monotonic() - t0
    return out


def run(seed: int, count: int, kernel: str, variant: str, keep: Path,
        rounds: int = ROUNDS, kinds: str = "all", first: int = 0) -> Outcome:
    from fixtures import fuzz

    out = Outcome()
    t0 = time.monotonic()
    cases = fuzz.generate(seed, count, paths.BUILD / "fuzz" / str(seed), kinds_for(variant, kinds),
                          first)
    i = 0
    while i < len(cases):
        mine = cases[i:i + PER_VM * rounds]
        probed = mine[:PER_VM]
        name = f"fuzz-{kernel}-{variant}-{seed}-{out.vms}"
        # every other VM boots with `gpt` (efi.c's force_gpt): a GPT without a
        # protective MBR, and the backup header when the primary is bad, are read too
        spec = boot_spec(kernel, variant, [c.path for c in probed],
                         ["sr_mod.partscan=1"] + (["gpt"] if out.vms % 2 else []), qmp=True)
        try:
            with VM(spec, name) as vm:
                res = fuzz_vm(vm, mine)
                collect_gcov(vm, gcov_dir(kernel, variant), name)
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
    ap.add_argument("--block", type=int, choices=(2048, 512, 4096), default=2048,
                    help="2048: scsi-cd drives (sr); 512, 4096: scsi-hd disks against unpatched")
    ap.add_argument("--kinds", default="all",
                    help="all: with the debug kernels' extra parsers (sysv68, aix); debian: "
                         "without; or a comma-separated list of kinds (fixtures/fuzz.py)")
    ap.add_argument("--first", type=int, default=0,
                    help="start at this case of the seed: rerun one batch of an earlier run")
    args = ap.parse_args(argv)
    print(f"srpart fuzz: kinds {args.kinds}, seed {args.seed}, {args.count} images, "
          f"{args.kernel} {args.variant}, {args.block}-byte blocks (reproduce: --seed {args.seed} --count {args.count} "
          f"--rounds {args.rounds} --block {args.block} --kinds {args.kinds} --first {args.first})",
          flush=True)
    kernels.build(args.kernel, args.variant)
    keep = paths.BUILD / "fuzz" / "failed"
    if args.block == 2048:
        o = run(args.seed, args.count, args.kernel, args.variant, keep, args.rounds, args.kinds,
                args.first)
    else:
        kernels.build(args.kernel, "unpatched")
        o = run_sd(args.seed, args.count, args.kernel, args.variant, keep, args.block, args.kinds,
                   args.first)
    print(f"srpart fuzz: {o.images} images in {o.vms} VMs, {o.partitions} partitions checked, "
          f"{len(o.failures)} failures, kmemleak scans {o.scans} (leaks {o.leaks}), "
          f"{o.seconds:.0f} s "
          f"({o.seconds / max(o.images, 1):.2f} s per image)")
    for f in o.failures:
        print(f"  FAIL {f}")
    where = gcov_dir(args.kernel, args.variant)
    if where is not None:
        write_coverage(args.kernel, args.variant, where)
    return 1 if o.failures else 0


def write_coverage(kernel: str, variant: str, where: Path) -> None:
    """Merge every VM's counters of this build (all block sizes, all seeds) and report."""
    from .source import extract

    merged = gcov.merge(sorted((where / "runs").iterdir()), where / "merged")
    obj = paths.OBJ / (kernel + kernels.variant(variant).obj)
    cov = gcov.report(merged, obj, extract(kernel).tree)
    text = gcov.render(cov)
    (where / "coverage.txt").write_text(text)
    runs = len(list((where / "runs").iterdir()))
    print(f"srpart fuzz: coverage of block/partitions over {runs} VMs "
          f"({where / 'coverage.txt'}):\n{text}", end="")


if __name__ == "__main__":
    from harness import entry
    entry.run(main)
