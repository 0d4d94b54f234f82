"""Host-side oracle: where a partition table says partitions are.

Computed from the image bytes by util-linux, which shares no code with the
kernel's parsers: fdisk and sfdisk (libfdisk) for MBR, GPT, Sun and SGI;
partx (libblkid) for Apple Partition Maps, which libfdisk does not read,
cross-checked against a reader of our own written from the on-disk format
(a disagreement is an error). All results are in 512-byte sectors, as the
kernel reports them in /sys/block/<disk>/<part>/{start,size}.
"""
from __future__ import annotations

import json
import re
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

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


def parse_fdisk_list(text: str, image: Path) -> tuple[int, list[tuple[int, int, int, str]]]:
    """`fdisk -l -o Device,Start,Sectors[,Id]` -> (unit bytes, [(number, start, sectors, id)])."""
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
            rows.append((_number(f[0], image), int(f[1]), int(f[2]), f[3] if len(f) > 3 else ""))
    return unit, rows


MBR_EXTENDED = {"5", "f", "85"}      # DOS, Win95 LBA and Linux extended


def _extended_stub(part: Part, mbr_type: str, block: int) -> Part:
    """Linux shows an MBR extended partition as a stub of one logical block."""
    if mbr_type.lower() in MBR_EXTENDED:
        return Part(part.number, part.start, min(part.size, block // 512))
    return part


def native(image: Path, block: int, label: str) -> list[Part]:
    """An MBR ("dos") or GPT whose entries count `block`-byte sectors (fdisk -b <block>)."""
    cols = "Device,Start,Sectors,Id" if label == "dos" else "Device,Start,Sectors"
    text = _run(["fdisk", "-b", str(block), "-l", "-t", label, "-o", cols, str(image)])
    if not re.search(rf"^Disklabel type: {label}$", text, re.M):
        raise SrpartError(f"fdisk -b {block} finds no {label} label in {image}")
    unit, rows = parse_fdisk_list(text, image)
    if unit != block:
        raise SrpartError(f"fdisk used {unit}-byte units for {image}, asked for {block}")
    k = block // 512
    return sorted(_extended_stub(Part(n, s * k, c * k), t, block) for n, s, c, t in rows)


def sfdisk_json(image: Path, label: str, block: int = 2048) -> list[Part]:
    """A label libfdisk reads in 512-byte sectors: Sun, SGI, 512-unit MBR/GPT."""
    data = json.loads(_run(["sfdisk", "--json", "--label", label, str(image)]))["partitiontable"]
    if data.get("label") != label:
        raise SrpartError(f"sfdisk finds a {data.get('label')} label in {image}, not {label}")
    if data.get("sectorsize", 512) != 512:
        raise SrpartError(f"sfdisk reports {data['sectorsize']}-byte sectors for {image}")
    return sorted(_extended_stub(Part(_number(p["node"], image), int(p["start"]), int(p["size"])),
                                 p.get("type", "") if label == "dos" else "", block)
                  for p in data.get("partitions", []))


APM_DRIVER_MAGIC = b"ER"
APM_ENTRY_MAGIC = b"PM"


def apm(image: Path) -> list[Part]:
    """Apple Partition Map: our own reading of Inside Macintosh's Driver
    Descriptor Map (block 0: 'ER', block size) and partition map entries
    (block 1..N: 'PM', map entry count, first block, block count). Entry i of
    the map is partition i, the map itself being entry 1."""
    with open(image, "rb") as fh:
        ddm = fh.read(512)
        if ddm[:2] != APM_DRIVER_MAGIC:
            raise SrpartError(f"{image}: no Apple driver descriptor map ('ER') in block 0")
        bs = struct.unpack(">H", ddm[2:4])[0]
        if bs < 512 or bs % 512:
            raise SrpartError(f"{image}: APM block size {bs} is not a multiple of 512")
        parts, count, i = [], 1, 1
        while i <= count:
            fh.seek(i * bs)
            e = fh.read(16)
            if e[:2] != APM_ENTRY_MAGIC:
                break
            count, start, blocks = struct.unpack(">III", e[4:16])
            if blocks:
                parts.append(Part(i, start * bs // 512, blocks * bs // 512))
            i += 1
    return parts


def apm_partx(image: Path) -> list[Part]:
    """libblkid's reading of an APM (partx -t mac), in 512-byte sectors. It lists
    zero-length entries too; Linux adds no partition for them, so neither do we."""
    text = _run(["partx", "-g", "-r", "-t", "mac", "-o", "NR,START,SECTORS", str(image)])
    rows = [tuple(map(int, line.split())) for line in text.splitlines() if line.strip()]
    return sorted(Part(n, s, c) for n, s, c in rows if c)


def apm_checked(image: Path) -> list[Part]:
    """partx's APM layout, when the project's own reader agrees with it."""
    theirs, ours = apm_partx(image), apm(image)
    if theirs != ours:
        raise SrpartError(f"{image}: libblkid (partx) reads the APM as {theirs}, "
                          f"srpart's reader as {ours}")
    return theirs


ORACLES: dict[str, Callable[[Path], list[Part]]] = {
    "mbr2048": lambda img: native(img, 2048, "dos"),
    "gpt2048": lambda img: native(img, 2048, "gpt"),
    "mbr512": lambda img: sfdisk_json(img, "dos"),
    "gpt512": lambda img: sfdisk_json(img, "gpt"),
    "sun": lambda img: sfdisk_json(img, "sun"),
    "sgi": lambda img: sfdisk_json(img, "sgi"),
    "apm": apm_checked,
}

# The line the series prints after a disc's partition line (whose format it
# leaves alone) when it read the table in 512-byte units: " srN: <note>".
UNIT_NOTE = {"mbr512": "MBR in 512-byte sectors", "gpt512": "GPT in 512-byte sectors"}


@dataclass(frozen=True)
class Layout:
    """What the kernel should make of a table on a device with `block`-byte blocks."""
    parts: list[Part]        # the partitions it creates
    skipped: list[Part]      # entries it must leave out, start not block-aligned


def on_device(parts: list[Part], block: int = 2048) -> Layout:
    """sr reads whole blocks only: an entry starting inside a block is left
    out; the others lose any partial last block."""
    k = block // 512
    keep, skipped = [], []
    for p in parts:
        size = p.size - p.size % k
        if p.start % k or not size:
            skipped.append(p)
        else:
            keep.append(Part(p.number, p.start, size))
    return Layout(keep, skipped)


def expected(table: str, image: Path, block: int = 2048) -> Layout:
    """The partitions the kernel should show for `image` on a `block`-byte optical device."""
    try:
        fn = ORACLES[table]
    except KeyError:
        raise SrpartError(f"no oracle for table kind {table!r}") from None
    return on_device(clip_to_disk(fn(image), image.stat().st_size // 512), block)


def triples(table: str, image: Path, block: int = 2048) -> list[tuple[int, int, int]]:
    """expected() as (number, start, size) in 512-byte sectors, the form the guest parsers give."""
    return [(p.number, p.start, p.size) for p in expected(table, image, block).parts]


def triples_of(img) -> list[tuple[int, int, int]]:
    """triples() of a fixture image (anything with .table and .path)."""
    return triples(img.table, img.path)


def clip_to_disk(parts: list[Part], disk: int) -> list[Part]:
    """Upstream's end-of-disk rule (blk_add_partition): an entry that starts
    beyond the disk is left out, one that extends beyond it is truncated."""
    return [Part(p.number, p.start, min(p.size, disk - p.start)) for p in parts if p.start < disk]
