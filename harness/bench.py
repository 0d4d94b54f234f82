"""`make bench`: build, boot and matrix figures for this machine. Prints, never asserts.

  kernel build   cold (fresh object tree; recorded when it happened, or measured
                 with --cold), one sr.c edit, and a switch between variants
  per-VM         boot-to-verdict of an 8-drive guest: start, READY, one
                 command, clean power-off (median of --boots runs)
  matrix         wall time of the VM part of the pytest matrix (-n auto)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from . import kconfig, kernel, paths, qemu, source
from .vm import VM, boot_spec


def measure_incremental(series: str) -> tuple[float, float]:
    """(sr.c edit rebuild, unpatched<->srpart switch) in seconds."""
    src = source.extract(series)
    kernel.build(series, "srpart", quiet=True)
    srfile = src.tree / "drivers/scsi/sr.c"
    stamp = kernel.artifact_dir(series, "srpart") / "stamp"
    os.utime(srfile)
    stamp.unlink()                       # force a make run over a touched sr.c
    t = time.monotonic()
    kernel.build(series, "srpart", quiet=True)
    edit = time.monotonic() - t
    t = time.monotonic()
    for v in ("unpatched", "srpart"):
        (kernel.artifact_dir(series, v) / "stamp").unlink(missing_ok=True)
        kernel.build(series, v, quiet=True)
    switch = (time.monotonic() - t) / 2
    return edit, switch


def measure_cold(series: str) -> float:
    """A full build into a scratch object tree (about 4-5 min on 2 cores)."""
    src = source.extract(series)
    source.checkout(src, series)
    obj = paths.BUILD / "obj-bench"
    shutil.rmtree(obj, ignore_errors=True)
    kconfig.configure(src.tree, obj, kernel.requested_config())
    t = time.monotonic()
    kernel.make_bzimage(src.tree, obj, os.cpu_count() or 1, paths.LOGS / "build-bench-cold.log",
                        f"{series} cold (bench)")
    secs = time.monotonic() - t
    shutil.rmtree(obj, ignore_errors=True)
    return secs


def recorded_cold(series: str) -> float | None:
    f = paths.KERNELS / series / "timings.json"
    rows = json.loads(f.read_text()) if f.exists() else []
    cold = [r["seconds"] for r in rows if r.get("cold")]
    return cold[-1] if cold else None


def measure_vm(series: str, boots: int) -> list[tuple[float, float]]:
    from fixtures import catalog

    spec = boot_spec(series, "srpart", [i.path for i in catalog.drive_images(8)],
                     ["sr_mod.partscan=1"])
    out = []
    for i in range(boots):
        t = time.monotonic()
        vm = VM(spec, f"bench-{i}").start()
        vm.check("cat /proc/partitions")
        vm.stop()
        out.append((vm.boot_seconds or 0.0, time.monotonic() - t))
    return out


def measure_matrix() -> float:
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "auto",
                    "--dist", "loadgroup", "-m", "vm", "pytest"], cwd=paths.ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--boots", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="also measure a cold build now")
    ap.add_argument("--skip-matrix", action="store_true")
    args = ap.parse_args(argv)
    print(f"srpart bench: {os.cpu_count()} cores, accel {qemu.choose_accel()}, kernel {args.kernel}")
    cold = measure_cold(args.kernel) if args.cold else recorded_cold(args.kernel)
    print(f"kernel build, cold (fresh object tree):  "
          f"{'%.0f s' % cold if cold else 'not recorded (run with --cold)'}"
          f"{'' if args.cold or not cold else ' (recorded)'}")
    edit, switch = measure_incremental(args.kernel)
    print(f"kernel build, sr.c touched:              {edit:.1f} s")
    print(f"kernel build, variant switch:            {switch:.1f} s (unpatched <-> srpart)")
    runs = measure_vm(args.kernel, args.boots)
    ready = statistics.median(r[0] for r in runs)
    total = statistics.median(r[1] for r in runs)
    print(f"per VM, 8 drives, boot to READY:         {ready:.2f} s (median of {len(runs)})")
    print(f"per VM, 8 drives, boot to verdict:       {total:.2f} s (median of {len(runs)}; "
          f"min {min(r[1] for r in runs):.2f}, max {max(r[1] for r in runs):.2f})")
    from . import bench_media
    for line in bench_media.report(args.kernel):
        print(line)
    if not args.skip_matrix:
        print(f"matrix wall time (VM tests, -n auto):    {measure_matrix():.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
