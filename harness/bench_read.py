"""Sequential read throughput of a partition vs. its whole disc (part of `make bench`).

One VM, one drive holding fixtures/bench_image.py's disc (p1: 64 MiB of
pseudo-random data at 1 MiB). The same byte range is read three ways, with
O_DIRECT and 1 MiB requests (bin/srread), in rounds that rotate the order:

  srN      /dev/sr0 from p1's offset (the host oracle's start)
  srNpM    /dev/sr0p1 from 0 (what srpart adds)
  loop     /dev/loopK set up with `losetup -r -o OFFSET` over /dev/sr0: the
           user-space workaround without srpart

The first MiB of each is hashed first: the three must be the same bytes.
Reported: median MB/s of each, and the ratios srNpM/srN and loop/srN as
the median of the per-round ratios (reads of one round are back to back,
which cancels most of the drift a TCG guest on a shared host has), with
their range.
"""
from __future__ import annotations

import statistics

from . import oracle, paths
from .errors import SrpartError
from .vm import VM, boot_spec

ROUNDS = 15
PASSES = 8           # 8 x 64 MiB per measurement: about half a second each here


def bench_image():
    """Build (or reuse, while fixtures/bench_image.py is unchanged) the disc."""
    import hashlib
    import inspect

    from fixtures import bench_image
    from fixtures.common import FixtureImage

    out = paths.FIXTURES / "bench" / "read.img"
    stamp = out.with_suffix(".stamp")
    key = hashlib.sha256(inspect.getsource(bench_image).encode()).hexdigest()[:16]
    if not (out.exists() and stamp.exists() and stamp.read_text() == key):
        out.parent.mkdir(parents=True, exist_ok=True)
        bench_image.build(out)
        stamp.write_text(key)
    return FixtureImage(out, "", "mbr2048", "bench", [])


def measure(series: str, rounds: int = ROUNDS) -> dict[str, list[float]]:
    img = bench_image()
    p1 = oracle.expected(img.table, img.path).parts[0]
    offset, length = p1.start * 512, p1.size * 512
    spec = boot_spec(series, "srpart", [img.path], ["sr_mod.partscan=1"])
    with VM(spec, f"bench-read-{series}") as vm:
        loop = vm.check(f"L=$(losetup -f) && losetup -r -o {offset} $L /dev/sr0 && echo $L").strip()
        reads = {"srN": ("/dev/sr0", offset), "srNpM": ("/dev/sr0p1", 0), "loop": (loop, 0)}
        sums = {k: vm.check(f"dd if={dev} bs=1048576 skip={off // 1048576} count=1 2>/dev/null "
                            "| md5sum").split()[0] for k, (dev, off) in reads.items()}
        if len(set(sums.values())) != 1:
            raise SrpartError(f"bench: the three reads see different bytes: {sums}")
        out: dict[str, list[float]] = {k: [] for k in reads}
        order = list(reads)
        for r in range(rounds):
            for k in order[r % 3:] + order[:r % 3]:
                dev, off = reads[k]
                vm.check("echo 3 > /proc/sys/vm/drop_caches")
                n, ns = map(int, vm.check(f"srread {dev} {off} {length} {PASSES}",
                                              timeout=300).split())
                out[k].append(n / (ns / 1e9) / 1e6)
        vm.check(f"losetup -d {loop}")
    return out


def report(series: str) -> list[str]:
    r = measure(series)
    med = {k: statistics.median(v) for k, v in r.items()}

    def ratio(k: str) -> str:
        per = sorted(a / b for a, b in zip(r[k], r["srN"]))
        return (f"{statistics.median(per):.3f} (rounds {per[0]:.3f}-{per[-1]:.3f})")

    return [f"sequential read, {PASSES} x 64 MiB O_DIRECT, median of {len(r['srN'])} rounds: "
            f"srN {med['srN']:.0f} MB/s, srNpM {med['srNpM']:.0f} MB/s, "
            f"losetup -o {med['loop']:.0f} MB/s",
            f"read ratio srNpM/srN: {ratio('srNpM')} (goal >= 0.98); losetup -o/srN: {ratio('loop')}"]
