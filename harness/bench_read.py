"""Sequential read throughput of a partition vs. its whole disc (part of `make bench`).

One VM, one drive holding fixtures/bench_image.py's disc (p1: 64 MiB of
pseudo-random data at 1 MiB). The same byte range is read three ways, with
O_DIRECT and 1 MiB requests (bin/srread):

  srN      /dev/sr0 from p1's offset (the host oracle's start)
  srNpM    /dev/sr0p1 from 0 (what srpart adds)
  loop     /dev/loopK set up with `losetup -r -o OFFSET` over /dev/sr0: the
           user-space workaround without srpart

The first MiB of each is hashed first: the three must be the same bytes.
A TCG guest on a shared 2-core host reads a 64 MiB range in about 60 ms and
single reads swing by 20%, so the comparisons are interleaved: srread reads
1 MiB from srN, then the same MiB from srNpM (the other order on odd
chunks), timing each request, over PASSES passes; likewise srN against
loop. A host stall of tens of ms still moves a round's total time by 20%,
so each round yields the median time of one 1 MiB request per device.
Reported: MB/s from those medians (median over the rounds), and the
median (and range) over the rounds of the per-round ratios.
"""
from __future__ import annotations

import statistics

from .cache import Stamp, key_of
from . import oracle, paths
from .errors import SrpartError
from .vm import VM, boot_spec

ROUNDS = 15
PASSES = 8           # 8 x 64 MiB through each device per round
LOOP_PASSES = 2      # the loop device is about 8x slower
CHUNK = 1 << 20      # srread's request size


def bench_image():
    """Build (or reuse, while fixtures/bench_image.py is unchanged) the disc."""
    import inspect

    from fixtures import bench_image
    from fixtures.common import FixtureImage

    out = paths.FIXTURES / "bench" / "read.img"
    stamp = Stamp(out.with_suffix(".stamp"), key_of(inspect.getsource(bench_image)))
    if not stamp.fresh(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        bench_image.build(out)
        stamp.write()
    return FixtureImage(out, "", "mbr2048", "bench", [])


def measure(kernel: str, rounds: int = ROUNDS) -> dict[str, list[float]]:
    img = bench_image()
    p1 = oracle.expected(img.table, img.path).parts[0]
    offset, length = p1.start * 512, p1.size * 512
    # Under TCG the clocksource watchdog finds the TSC unstable and the guest
    # falls back to refined-jiffies: 4 ms resolution, against 0.5 ms per
    # 1 MiB request. tsc=reliable keeps the TSC (QEMU derives it from the
    # host clock), so CLOCK_MONOTONIC in the guest resolves nanoseconds.
    spec = boot_spec(kernel, "srpart", [img.path], ["sr_mod.partscan=1", "tsc=reliable"])
    # tsc=reliable only skips the watchdog: a boot whose PIT calibration failed
    # ("tsc: Unable to calibrate against PIT", a third of loaded boots, some
    # idle ones) has no TSC clocksource at all, and its request times are 0 or
    # 4 ms. Such a boot is not measured: the next one is, at most BOOTS. (The
    # first version of this check wanted "tsc" and refused five "tsc-early"
    # boots: the early TSC clocksource reads the same counter.)
    seen = []
    for _ in range(BOOTS):
        with VM(spec, f"bench-read-{kernel}") as vm:
            seen.append(vm.check(CLOCKSOURCE).strip())
            if seen[-1] in TSC:
                return _measure(vm, img, rounds, offset, length)
    raise SrpartError(f"bench: {BOOTS} boots of the read guest ran on {', '.join(seen)}, "
                      "never the TSC: request times are below those clocks' resolution")


CLOCKSOURCE = "cat /sys/devices/system/clocksource/clocksource0/current_clocksource"
# tsc-early until the refined calibration takes over: the same counter
TSC = ("tsc", "tsc-early")
BOOTS = 5


def _measure(vm, img, rounds: int, offset: int, length: int) -> dict[str, list[float]]:
    """The read rounds in a booted guest whose clocksource is the TSC."""
    loop = vm.check(f"L=$(losetup -f) && losetup -r -o {offset} $L /dev/sr0 && echo $L").strip()
    reads = {"srN": ("/dev/sr0", offset), "srNpM": ("/dev/sr0p1", 0), "loop": (loop, 0)}
    sums = {k: vm.check(f"dd if={dev} bs=1048576 skip={off // 1048576} count=1 2>/dev/null "
                        "| md5sum").split()[0] for k, (dev, off) in reads.items()}
    if len(set(sums.values())) != 1:
        raise SrpartError(f"bench: the three reads see different bytes: {sums}")
    out: dict[str, list[float]] = {"srN": [], "srNpM": [], "loop": [],
                                   "srNpM/srN": [], "loop/srN": []}
    disk = reads["srN"]
    for _ in range(rounds):
        for k, passes in (("srNpM", PASSES), ("loop", LOOP_PASSES)):
            dev, off = reads[k]
            vm.check("echo 3 > /proc/sys/vm/drop_caches")
            _, _, _, med_disk, med_k = map(int, vm.check(
                f"srread {disk[0]} {disk[1]} {dev} {off} {length} {passes}",
                timeout=300).split())
            if k == "srNpM":
                out["srN"].append(CHUNK / med_disk * 1e3)
            out[k].append(CHUNK / med_k * 1e3)
            out[f"{k}/srN"].append(med_disk / med_k)
    vm.check(f"losetup -d {loop}")
    return out


def report(kernel: str) -> list[str]:
    r = measure(kernel)
    med = {k: statistics.median(v) for k, v in r.items()}

    def ratio(k: str) -> str:
        per = sorted(r[k])
        return f"{statistics.median(per):.3f} (rounds {per[0]:.3f}-{per[-1]:.3f})"

    return [f"sequential read, O_DIRECT 1 MiB requests interleaved with srN, from the median "
            f"request time, median of {len(r['srN'])} rounds: srN {med['srN']:.0f} MB/s, "
            f"srNpM {med['srNpM']:.0f} MB/s, losetup -o {med['loop']:.0f} MB/s",
            f"read ratio srNpM/srN: {ratio('srNpM/srN')} (goal >= 0.98); "
            f"losetup -o/srN: {ratio('loop/srN')}"]
