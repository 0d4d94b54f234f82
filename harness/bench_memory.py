"""Memory cost of partition scanning for 8 drives (part of `make bench`).

The srpart kernel boots with the matrix's eight partitioned discs, once
with sr_mod.partscan=0 and once with =1 (alternating, --boots times each).
After every drive was opened and the caches dropped, the guest's
/proc/meminfo is read; reported is the median difference on - off of
MemFree, Slab and SUnreclaim, and the number of partitions it bought.
"""
from __future__ import annotations

import statistics

from . import guest
from .vm import VM, boot_spec

FIELDS = ("MemFree", "Slab", "SUnreclaim")


def _meminfo(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in FIELDS:
            out[key] = int(rest.split()[0])          # kB
    return out


def measure(kernel: str, boots: int = 3) -> tuple[dict[str, list[int]], dict[str, int]]:
    from fixtures import catalog

    images = [i.path for i in catalog.drive_images(8)]
    got: dict[str, list[dict[str, int]]] = {"0": [], "1": []}
    parts: dict[str, int] = {}
    for i in range(boots):
        for v in ("0", "1"):
            with VM(boot_spec(kernel, "srpart", images, [f"sr_mod.partscan={v}"]),
                    f"bench-mem-{kernel}-{v}-{i}") as vm:
                parts[v] = len(guest.parse_sys_partitions(vm.check(guest.PARTITIONS_CMD)))
                got[v].append(_meminfo(vm.check(
                    "sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1; cat /proc/meminfo")))
    diff = {f: [on[f] - off[f] for on, off in zip(got["1"], got["0"])] for f in FIELDS}
    return diff, parts


def report(kernel: str) -> list[str]:
    diff, parts = measure(kernel)
    med = {f: statistics.median(v) for f, v in diff.items()}
    return [f"memory, 8 drives, partscan=1 minus partscan=0 ({parts.get('1', 0)} vs "
            f"{parts.get('0', 0)} partitions), median of {len(diff['Slab'])} boot pairs: "
            + ", ".join(f"{f} {med[f]:+.0f} kB" for f in FIELDS)]
