"""Host-side oracle: where a partition table says partitions are.

Computed from the image bytes by util-linux, which shares no code with the
kernel's parsers. All results are in 512-byte sectors, as the kernel
reports them in /sys/block/<disk>/<part>/{start,size}.
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import SrpartError


@dataclass(frozen=True, order=True)
class Part:
    number: int
    start: int     # 512-byte sectors
    size: int      # 512-byte sectors


def _run(cmd: list[str]) -> str:
    r = subprocess.run(cmd, text=True, capture_output=True)
    if r.returncode != 0:
        raise SrpartError(f"{' '.join(cmd)}: {(r.stderr.strip().splitlines() or ['failed'])[-1]}")
    return r.stdout


def _number(node: str, image: Path) -> int:
    m = re.fullmatch(re.escape(str(image)) + r"p?(\d+)", node)
    if not m:
        raise SrpartError(f"unexpected partition node {node!r} for {image}")
    return int(m.group(1))


def parse_fdisk_list(text: str, image: Path) -> tuple[int, list[tuple[int, int, int]]]:
    """`fdisk -l -o Device,Start,Sectors` -> (unit bytes, [(number, start, sectors)])."""
    m = re.search(r"^Units: sectors of \d+ \* (\d+) = \d+ bytes", text, re.M)
    if not m:
        raise SrpartError(f"fdisk printed no unit line for {image}")
    unit = int(m.group(1))
    rows = []
    in_table = False
    for line in text.splitlines():
        if line.startswith("Device"):
            in_table = True
            continue
        if in_table and line.strip():
            f = line.split()
            rows.append((_number(f[0], image), int(f[1]), int(f[2])))
    return unit, rows


def mbr_native(image: Path, block: int) -> list[Part]:
    """An MBR whose entries count `block`-byte sectors (fdisk -b <block>)."""
    unit, rows = parse_fdisk_list(
        _run(["fdisk", "-b", str(block), "-l", "-o", "Device,Start,Sectors", str(image)]), image)
    if unit != block:
        raise SrpartError(f"fdisk used {unit}-byte units for {image}, asked for {block}")
    k = block // 512
    return sorted(Part(n, s * k, c * k) for n, s, c in rows)


def sfdisk_json(image: Path) -> list[Part]:
    """Any label libfdisk reads in 512-byte sectors (Sun, SGI, 512-unit MBR/GPT)."""
    data = json.loads(_run(["sfdisk", "--json", str(image)]))["partitiontable"]
    if data.get("sectorsize", 512) != 512:
        raise SrpartError(f"sfdisk reports {data['sectorsize']}-byte sectors for {image}")
    return sorted(Part(_number(p["node"], image), int(p["start"]), int(p["size"]))
                  for p in data.get("partitions", []))


ORACLES = {
    "mbr2048": lambda img: mbr_native(img, 2048),
    "sun": sfdisk_json,
}


def expected(table: str, image: Path) -> list[Part]:
    """The partitions the kernel should show for `image` on a 2048-byte device."""
    try:
        fn = ORACLES[table]
    except KeyError:
        raise SrpartError(f"no oracle for table kind {table!r}") from None
    parts = fn(image)
    disk = image.stat().st_size // 512
    for p in parts:
        if p.start + p.size > disk:
            raise SrpartError(f"{image}: oracle partition {p} extends beyond the image ({disk} sectors)")
    return parts
