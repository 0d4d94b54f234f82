"""`make bench`: what srpart costs, in figures for this machine. Prints, never asserts.

  kernel build   cold (fresh object tree; recorded when it happened, or measured
                 with --cold), one sr.c edit, and a switch between variants
  per-VM         boot-to-verdict of an 8-drive guest: start, READY, one
                 command, clean power-off (median of --boots runs)
  media change   partition visibility latency after a swap (bench_media)
  read           srNpM vs srN vs `losetup -o` over srN, same bytes (bench_read)
  memory         meminfo with partscan on vs off, 8 drives (bench_memory)
  matrix         wall time of the VM part of the pytest matrix (-n auto)

With --doc FILE (make bench: docs/performance.md) the figures are also
written there with the command, the machine and the revision.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from . import docstamp, kconfig, paths, qemu, source
from . import kernel as kernels
from .vm import VM, boot_spec


def measure_incremental(kernel: str) -> tuple[float, float]:
    """(sr.c edit rebuild, unpatched<->srpart switch) in seconds."""
    src = source.extract(kernel)
    stamp = kernels.artifact_dir(kernel, "srpart") / "stamp"
    stamp.unlink(missing_ok=True)        # the object tree may hold another variant:
    kernels.build(kernel, "srpart", quiet=True)   # bring it to srpart first
    srfile = src.tree / "drivers/scsi/sr.c"
    os.utime(srfile)
    stamp.unlink()                       # force a make run over a touched sr.c
    t = time.monotonic()
    kernels.build(kernel, "srpart", quiet=True)
    edit = time.monotonic() - t
    t = time.monotonic()
    for v in ("unpatched", "srpart"):
        (kernels.artifact_dir(kernel, v) / "stamp").unlink(missing_ok=True)
        kernels.build(kernel, v, quiet=True)
    switch = (time.monotonic() - t) / 2
    return edit, switch


def measure_cold(kernel: str) -> float:
    """A full build into a scratch object tree (about 4-5 min on 2 cores)."""
    src = source.extract(kernel)
    source.checkout(src, kernel)
    obj = paths.BUILD / "obj-bench"
    shutil.rmtree(obj, ignore_errors=True)
    kconfig.configure(src.tree, obj, kernels.requested_config())
    t = time.monotonic()
    kernels.make_bzimage(src.tree, obj, os.cpu_count() or 1, paths.LOGS / "build-bench-cold.log",
                        f"{kernel} cold (bench)")
    secs = time.monotonic() - t
    shutil.rmtree(obj, ignore_errors=True)
    return secs


def recorded_cold(kernel: str, debug: bool = False) -> float | None:
    """The last recorded cold build of a test kernel (or of the debug kernel)."""
    f = paths.KERNELS / kernel / "timings.json"
    rows = json.loads(f.read_text()) if f.exists() else []
    cold = [r["seconds"] for r in rows if r.get("cold") and
            (kernels.VARIANTS.get(r.get("variant", "")) or kernels.VARIANTS["srpart"]).obj
            .endswith("-debug") == debug]
    return cold[-1] if cold else None


@dataclass(frozen=True)
class VMPhases:
    """One boot from QEMU start to QEMU exit, in seconds, split where the guest's
    own clocks allow: `firmware` is QEMU's start, the firmware and the kernel's
    decompression (until the kernel's clock starts: the host time of the command
    minus the guest's /proc/uptime then); `kernel` until printk's "Run /init";
    `init` the guest init until READY (drives probed); `command` from READY to the
    command's verdict (one round trip of the command channel); `poweroff`
    `reboot -f` until QEMU has exited."""
    firmware: float
    kernel: float
    init: float
    command: float
    poweroff: float

    @property
    def ready(self) -> float:
        return self.firmware + self.kernel + self.init

    @property
    def total(self) -> float:
        return self.ready + self.command + self.poweroff


RUN_INIT = re.compile(r"^\[\s*(\d+\.\d+)\] Run /init as init process", re.M)


def phases(ready: float, cmd_start: float, cmd_end: float, total: float, uptime: float,
           kernel_log: str) -> VMPhases:
    """VMPhases from host times (seconds since QEMU start), the guest's uptime read
    at the start of the command and the kernel log."""
    m = RUN_INIT.search(kernel_log)
    if not m:
        raise ValueError("no 'Run /init as init process' in the kernel log")
    kernel_start = max(cmd_start - uptime, 0.0)
    to_init = float(m.group(1))
    return VMPhases(firmware=kernel_start, kernel=to_init, init=ready - kernel_start - to_init,
                    command=cmd_end - ready, poweroff=total - cmd_end)


def measure_vm(kernel: str, boots: int, userspace: str = "busybox", variant: str = "srpart",
               extra: tuple[str, ...] = ()) -> list[VMPhases]:
    from fixtures import catalog

    spec = boot_spec(kernel, variant, [i.path for i in catalog.drive_images(8)],
                     [*extra, "sr_mod.partscan=1"], userspace=userspace)
    out = []
    for i in range(boots):
        t = time.monotonic()
        vm = VM(spec, f"bench-{variant}-{userspace}-{i}").start()
        c0 = time.monotonic() - t
        up = float(vm.check("cut -d' ' -f1 /proc/uptime; cat /proc/partitions >/dev/null")
                   .split()[0])
        c1 = time.monotonic() - t
        vm.stop()
        out.append(phases(vm.boot_seconds or 0.0, c0, c1, time.monotonic() - t, up,
                          vm.log.read_text(errors="replace")))
    return out


def phase_line(runs: list[VMPhases]) -> str:
    med = {f: statistics.median(getattr(r, f) for r in runs)
           for f in ("firmware", "kernel", "init", "command", "poweroff")}
    return ("QEMU start, firmware and decompression {firmware:.2f} s, kernel to init {kernel:.2f} s, "
            "init to READY {init:.2f} s, one command {command:.2f} s, power-off {poweroff:.2f} s"
            .format(**med))


MATRIX_JUNIT = paths.LOGS / "bench-matrix-junit.xml"


def measure_matrix() -> float:
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "auto",
                    "--dist", "loadgroup", "-m", "vm", f"--junitxml={MATRIX_JUNIT}", "pytest"],
                   cwd=paths.ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def machine() -> str:
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                  if ln.startswith("model name")), "unknown CPU")
    mem = next((int(ln.split()[1]) for ln in open("/proc/meminfo")
                if ln.startswith("MemTotal")), 0)
    q = subprocess.run([qemu.QEMU, "--version"], capture_output=True, text=True).stdout
    return (f"{os.cpu_count()} cores ({model}), {mem / 2**20:.0f} GiB, QEMU "
            f"{(q.split() or ['?', '?', '?', '?'])[3]}, accel {qemu.choose_accel()}")


# Figures of whole runs (cold and warm `make check`, before and after a change
# to the rig), recorded by hand from the runs they name; `make bench` keeps them
# in the document after the figures it measures itself.
RECORDED = Path("docs/performance/rig-speed.md")


def write_doc(out: Path, kernel: str, command: str, lines: list[str]) -> None:
    src = source.extract(kernel)
    extra = "\n" + (paths.ROOT / RECORDED).read_text()
    out.write_text(DOC.format(command=command, machine=machine(), revision=paths.project_revision(),
                              version=source.makefile_version(src.tree),
                              date=datetime.date.today().isoformat(),
                              figures="\n".join(f"- {ln}" for ln in lines))
                   + extra + docstamp.line([kernel]))


DOC = """# Performance

Generated by `{command}` on {date} (srpart {revision}, kernel {version}).
Machine: {machine}. The guests run under TCG: absolute times and MB/s are
properties of this machine and of QEMU's emulation, not of real drives;
the ratios, measured side by side in one run, are the figures that carry
over.

{figures}

How each figure is taken (details in the docstrings of harness/bench*.py):

- **Kernel build**: the cold build is recorded by `srpart build` when an
  object tree is first built; the sr.c figure touches drivers/scsi/sr.c
  and rebuilds; the variant switch flips the series between unpatched
  and srpart in one object tree (kbuild tracks config symbols per file).
- **Per VM**: one 8-drive guest from QEMU start to the command channel's
  READY marker, then one command and a clean `reboot -f`. The phases: the
  kernel's clock starts at the host time of the command minus the guest's
  /proc/uptime (before it: QEMU, firmware, decompression); printk's
  "Run /init" ends the kernel's part; READY (every drive probed and opened)
  the init's; then the command's round trip and QEMU's exit. Under TCG the
  guest clock wanders by a few tens of ms, so a phase is a median of boots.
- **Media change**: QMP `blockdev-change-medium` until sysfs shows the new
  disc's first partition at the host oracle's start.
- **Read**: a 64 MiB partition of pseudo-random data, O_DIRECT, 1 MiB
  requests; srN and srNpM (or srN and the loop device) alternate request by
  request over the same bytes, so both see the same moment of the host;
  each round yields the median request time per device, and a ratio is the
  median over 15 rounds of the per-round ratio (range in brackets). The
  first MiB of each device is hashed first to prove they read the same
  bytes. The guest boots with `tsc=reliable`: under TCG the clocksource
  watchdog otherwise rejects the TSC and the guest clock ticks in 4 ms
  steps (refined-jiffies), coarser than one request (the first version of
  this benchmark swung by 20% because of it). `losetup -r -o` is what a
  user does without srpart (the test kernel has the loop driver for this);
  busybox's losetup cannot turn on the loop driver's direct I/O, so the loop
  device reads through srN's page cache. The 512-byte `losetup -P` variant
  reads through the same loop path and is not measured separately.
- **Memory**: MemFree/Slab/SUnreclaim from /proc/meminfo after the drives
  were opened and the caches dropped; the difference is per boot pair and
  includes boot-to-boot noise of a few hundred kB.
- **Matrix**: the VM tests of the pytest matrix, both kernels, `-n auto`.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--boots", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="also measure a cold build now")
    ap.add_argument("--skip-matrix", action="store_true")
    ap.add_argument("--doc", type=Path, help="also write the figures to this Markdown file")
    args = ap.parse_args(argv)
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    print(f"srpart bench: {machine()}, kernel {args.kernel}", flush=True)
    cold = measure_cold(args.kernel) if args.cold else recorded_cold(args.kernel)
    say(f"kernel build, cold (fresh object tree): "
        f"{'%.0f s' % cold if cold else 'not recorded (run with --cold)'}"
        f"{'' if args.cold or not cold else ' (recorded)'}")
    dcold = recorded_cold(args.kernel, debug=True)
    if dcold:
        say(f"kernel build, cold, debug kernel (KASAN, lockdep, kmemleak...): {dcold:.0f} s (recorded)")
    edit, switch = measure_incremental(args.kernel)
    say(f"kernel build, sr.c touched: {edit:.1f} s")
    say(f"kernel build, variant switch (unpatched <-> srpart): {switch:.1f} s")
    runs = measure_vm(args.kernel, args.boots)
    ready = statistics.median(r.ready for r in runs)
    total = statistics.median(r.total for r in runs)
    say(f"per VM, 8 drives, boot to READY: {ready:.2f} s (median of {len(runs)})")
    say(f"per VM, 8 drives, boot to verdict: {total:.2f} s (median of {len(runs)}; "
        f"min {min(r.total for r in runs):.2f}, max {max(r.total for r in runs):.2f})")
    say(f"per VM, 8 drives, phases (medians): {phase_line(runs)}")
    runs = measure_vm(args.kernel, args.boots, userspace="udev")
    say(f"per VM, 8 drives, Debian's udev userspace (udevd, trigger, settle), boot to READY: "
        f"{statistics.median(r.ready for r in runs):.2f} s, to verdict "
        f"{statistics.median(r.total for r in runs):.2f} s (median of {len(runs)}); "
        f"{phase_line(runs)}")
    from . import dkms
    for k in dkms.KERNELS:
        abi = dkms.abis()[k]
        say(f"srpart-dkms: dkms build of sr_mod for Debian's {abi}: "
            f"{dkms.measure_build(abi):.1f} s")
        runs = measure_vm(k, args.boots, variant="debian-dkms",
                          extra=tuple(dkms.guest_cmdline(k)))
        say(f"per VM, 8 drives, Debian's own {abi} with the DKMS sr_mod (modules loaded by "
            f"init), boot to READY: {statistics.median(r.ready for r in runs):.2f} s, to verdict "
            f"{statistics.median(r.total for r in runs):.2f} s (median of {len(runs)}); "
            f"{phase_line(runs)}")
    from . import bench_media, bench_memory, bench_read
    for mod in (bench_media, bench_read, bench_memory):
        for line in mod.report(args.kernel):
            say(line)
    if not args.skip_matrix:
        say(f"matrix wall time (VM tests, both kernels, -n auto): {measure_matrix():.0f} s")
        added = dkms.junit_seconds(MATRIX_JUNIT)
        say(f"srpart-dkms's share of it: {added or 0:.0f} s of test time (pytest/test_dkms.py, "
            f"both kernels, summed over workers), plus `make dkms` before it: "
            f"{dkms.recorded_make_seconds() or 0:.0f} s when it last ran (downloads included)")
    if args.doc:
        write_doc(args.doc, args.kernel, f"make bench KERNEL={args.kernel}", lines)
        print(f"srpart bench: wrote {args.doc}")
    return 0


if __name__ == "__main__":
    from harness import entry
    entry.run(main)
