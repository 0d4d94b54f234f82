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


def apm_checked(image: Path) -> list[Part]:
    """partx's APM layout, when the project's own reader agrees with it."""
    theirs, ours = partx(image, "mac"), apm(image)
    if theirs != ours:
        raise SrpartError(f"{image}: libblkid (partx) reads the APM as {theirs}, "
                          f"srpart's reader as {ours}")
    return theirs


def partx(image: Path, kind: str) -> list[Part]:
    """libblkid's reading of a `kind` table (partx -t <kind>), in 512-byte sectors;
    entries of size 0 dropped, as Linux adds no partition for them."""
    text = _run(["partx", "-g", "-r", "-t", kind, "-o", "NR,START,SECTORS", str(image)])
    rows = [tuple(map(int, line.split())) for line in text.splitlines() if line.strip()]
    if not rows:
        raise SrpartError(f"partx -t {kind} finds no partitions in {image}")
    return sorted(Part(n, s, c) for n, s, c in rows if c)


def parted(image: Path, label: str) -> list[Part]:
    """GNU parted's reading (parted -m unit s print), for labels libblkid does not read."""
    text = _run(["parted", "-s", "-m", str(image), "unit", "s", "print"])
    lines = [ln.rstrip(";") for ln in text.splitlines()]
    # parted names the device by its real path: a build/ that is a symlink changes it
    names = (str(image) + ":", str(image.resolve()) + ":")
    head = next((ln.split(":") for ln in lines if ln.startswith(names)), None)
    if not head or head[5] != label:
        raise SrpartError(f"parted finds no {label} label in {image}: {head}")
    out = []
    for ln in lines:
        f = ln.split(":")
        if f[0].isdigit():
            out.append(Part(int(f[0]), int(f[1].rstrip("s")), int(f[3].rstrip("s"))))
    return sorted(out)


AMIGA_RDB_LIMIT = 16            # the RDB is in one of the first 16 blocks


def amiga(image: Path) -> list[Part]:
    """Amiga Rigid Disk Block: our own reading of the RDB format (the AmigaOS
    devices/hardblocks.h layout). 'RDSK' in one of blocks 0..15 with a valid
    sum; its partition list is a chain of 'PART' blocks, each with a DosEnvec
    whose LowCyl..HighCyl count surfaces * blocks-per-track blocks of
    rdb_BlockBytes. Entry i of the chain is partition i."""
    def block(fh, n: int, size: int = 512) -> bytes:
        fh.seek(n * size)
        return fh.read(size)

    def summed(b: bytes) -> bool:
        longs = struct.unpack(">I", b[4:8])[0]
        return 0 < longs <= 128 and sum(struct.unpack(f">{longs}i", b[:4 * longs])) & 0xFFFFFFFF == 0

    with open(image, "rb") as fh:
        for n in range(AMIGA_RDB_LIMIT):
            rdb = block(fh, n)
            if rdb[:4] == b"RDSK" and summed(rdb):
                break
        else:
            raise SrpartError(f"{image}: no Amiga RDB in blocks 0-{AMIGA_RDB_LIMIT - 1}")
        bs = struct.unpack(">I", rdb[16:20])[0]
        if bs < 512 or bs % 512:
            raise SrpartError(f"{image}: RDB block size {bs} is not a multiple of 512")
        k = bs // 512
        parts, nxt, seen = [], struct.unpack(">I", rdb[28:32])[0], set()
        while nxt != 0xFFFFFFFF and nxt not in seen:
            seen.add(nxt)
            pb = block(fh, nxt, bs)
            if pb[:4] != b"PART" or not summed(pb):
                raise SrpartError(f"{image}: RDB partition block {nxt} is not a valid PART block")
            env = struct.unpack(">17I", pb[128:128 + 68])
            surfaces, per_track, low, high = env[3], env[5], env[9], env[10]
            start = low * surfaces * per_track * k
            parts.append(Part(len(parts) + 1, start, (high + 1 - low) * surfaces * per_track * k))
            nxt = struct.unpack(">I", pb[16:20])[0]
    return parts


def amiga_checked(image: Path) -> list[Part]:
    """Our RDB reading, when GNU parted's agrees with it (libblkid reads no RDB)."""
    theirs, ours = parted(image, "amiga"), amiga(image)
    if theirs != ours:
        raise SrpartError(f"{image}: parted reads the RDB as {theirs}, srpart's reader as {ours}")
    return ours


UNIXWARE_PARTITION = 0x63


def unixware(image: Path, parent: int) -> list[tuple[int, int]]:
    """(start, size) of the slices of a UnixWare disklabel in the MBR partition
    starting at sector `parent`: our reading of SCO's struct disklabel (sector
    29, d_magic 0xCA5E600D, VTOC magic 0x600DDEEE, 16 slices of tag, flags,
    absolute start, size; slice 0 is the whole partition, tag 0 unused).
    libblkid's prober looks at the wrong byte for the wrong magic."""
    with open(image, "rb") as fh:
        fh.seek((parent + 29) * 512)
        b = fh.read(512)
    if len(b) < 408 or struct.unpack_from("<I", b, 4)[0] != 0xCA5E600D or \
            struct.unpack_from("<I", b, 156)[0] != 0x600DDEEE:
        return []
    out = []
    for i in range(1, 16):
        tag, _, start, size = struct.unpack_from("<HHII", b, 216 + 12 * i)
        if tag:
            out.append((start, size))
    return out


def mbr_nested(image: Path) -> list[Part]:
    """A 512-unit MBR with nested tables in its primaries (no extended ones):
    libblkid's primaries and nested partitions, the UnixWare ones read by
    unixware(), numbered as Linux numbers them: nested after the primaries,
    in the order of the primary that holds them."""
    text = _run(["partx", "-g", "-r", "-t", "dos", "-o", "NR,START,SECTORS,TYPE", str(image)])
    rows = [(int(n), int(s), int(c), int(t, 16)) for n, s, c, t in
            (line.split() for line in text.splitlines() if line.strip())]
    primaries = [r for r in rows if r[0] <= 4]
    if any(t in (0x05, 0x0F, 0x85) for _, _, _, t in primaries):
        raise SrpartError(f"{image}: mbr_nested() reads no extended partitions")
    inner: dict[int, list[tuple[int, int]]] = {n: [] for n, *_ in primaries}
    for n, s, c, _ in rows:
        if n > 4:
            holder = [p for p, ps, pc, _ in primaries if ps <= s and s + c <= ps + pc]
            if len(holder) != 1:
                raise SrpartError(f"{image}: nested partition {n} lies in {holder or 'no'} primary")
            inner[holder[0]].append((s, c))
    for n, s, _, t in primaries:
        if t == UNIXWARE_PARTITION:
            inner[n] = unixware(image, s)
    out, nxt = [Part(n, s, c) for n, s, c, _ in primaries if c], 5
    for n in sorted(inner):
        for s, c in inner[n]:
            out.append(Part(nxt, s, c))
            nxt += 1
    return sorted(out)


def karma(image: Path) -> list[Part]:
    """Rio Karma: our reading of its disklabel (magic 0xAB56 at byte 510, two
    16-byte entries at byte 270: fstype 0x4d, start, size). No other reader exists
    on the host; pytest/test_second_oracle.py compares it with karma.c itself."""
    with open(image, "rb") as fh:
        b = fh.read(512)
    if struct.unpack_from("<H", b, 510)[0] != 0xAB56:
        raise SrpartError(f"{image}: no Karma magic at byte 510")
    out = []
    for i in range(2):
        _, fstype, start, size = struct.unpack_from("<IB3xII", b, 270 + 16 * i)
        if fstype == 0x4D and size:
            out.append(Part(i + 1, start, size))
    return out


def _ldmtool(*args: str) -> tuple[object, str]:
    r = subprocess.run(["ldmtool", *args], text=True, capture_output=True)
    if r.returncode != 0:
        raise SrpartError(f"ldmtool {' '.join(args)}: {r.stderr.strip() or 'failed'}")
    try:
        return json.loads(r.stdout), r.stderr
    except json.JSONDecodeError as e:
        raise SrpartError(f"ldmtool {' '.join(args)} printed no JSON ({e}): {r.stdout[:200]!r}") from e


def ldm(image: Path) -> list[Part]:
    """Windows LDM (dynamic disk) as libldm reads it (`ldmtool`, Debian's ldmtool),
    which shares no code with ldm.c or our writer. ldmtool reads an image file as a
    disk of 512-byte sectors. ldm.c makes one partition per partition VBLK of this
    disk (the disk VBLK whose GUID is the PRIVHEAD's: ldmtool calls it "present"),
    at logical_disk_start ("data-start") + start, numbered from 1 in order of
    start. ldmtool reaches partitions only through volumes; libldm refuses a
    database with a partition outside any volume, so none is missed. For
    well-formed databases only: ldmtool accepts some that ldm.c refuses."""
    img = str(image)
    groups, err = _ldmtool("scan", img)
    if "Error scanning" in err:        # scan reports what `-d` silently skips
        raise SrpartError(f"ldmtool scan {img}: {err.strip()}")
    if len(groups) != 1:
        raise SrpartError(f"{img}: one LDM disk group expected, ldmtool finds {groups}")
    g = groups[0]
    dg, _ = _ldmtool("-d", img, "show", "diskgroup", g)
    mine = {}
    for name in dg["disks"]:
        disk, _ = _ldmtool("-d", img, "show", "disk", g, name)
        if disk.get("present"):
            mine[name] = disk["data-start"]
    if len(mine) != 1:
        raise SrpartError(f"{img}: the image should be one disk of its group, ldmtool: {mine}")
    found = []
    for vname in dg["volumes"]:
        vol, _ = _ldmtool("-d", img, "show", "volume", g, vname)
        for pname in vol["partitions"]:
            p, _ = _ldmtool("-d", img, "show", "partition", g, pname)
            if p["disk"] in mine:
                found.append((mine[p["disk"]] + p["start"], p["size"]))
    return [Part(n, start, size) for n, (start, size) in enumerate(sorted(found), 1)]


SYSV68_SLICE = 8                # struct slice: nblocks, blkoff (big-endian u32 each)


def sysv68(image: Path) -> list[Part]:
    """Motorola sysV68: our reading of the volume id ("MOTOROLA" at byte 248) and
    the config block (slice table block at byte 384, entry count at 388). The
    last entry is the whole disk; the table is one 512-byte sector, so at most
    64 entries are in it whatever the count says. Slot i+1 is entry i, holes
    included; an entry with no blocks makes no partition."""
    with open(image, "rb") as fh:
        b = fh.read(512)
        if b[248:256] != b"MOTOROLA":
            raise SrpartError(f"{image}: no MOTOROLA volume id at byte 248")
        blk, count = struct.unpack_from(">IH", b, 384)
        fh.seek(blk * 512)
        table = fh.read(512)
    if len(table) < 512:
        raise SrpartError(f"{image}: slice table block {blk} is beyond the image")
    out = []
    for i in range(min(count - 1, 512 // SYSV68_SLICE)):
        nblocks, blkoff = struct.unpack_from(">II", table, SYSV68_SLICE * i)
        if nblocks:
            out.append(Part(i + 1, blkoff, nblocks))
    return out


# msdos.c: AIX_LABEL_MAGIC1..4 (the IPL record's "IBMA" in EBCDIC), and the slot
# types aix_magic_present() takes for a Linux, Solaris or extended partition
AIX_IPL_MAGIC = bytes((0xC9, 0xC2, 0xD4, 0xC1))
AIX_NOT_WITH = (0x82, 0xFD, 0x83, 0x8E, 0x05, 0x0F, 0x85)


def not_aix(sector0: bytes, sector7: bytes) -> str:
    """Why msdos.c's aix_magic_present() would not hand this disk to aix.c ("" if it would)."""
    if sector0[0:4] != AIX_IPL_MAGIC:
        return "no IPL record magic at sector 0"
    if sector7[0:4] != b"_LVM":
        return "no _LVM record at sector 7"
    if any(sector0[0x1BE + 16 * i + 4] in AIX_NOT_WITH for i in range(4)):
        return "an MBR slot has a Linux, Solaris or extended type (msdos.c reads it)"
    return ""


def aix(image: Path) -> list[Part]:
    """AIX LVM: our reading of a physical volume (the layout fixtures.fuzz.aix_image
    documents). An LV is a partition when its PPs are one run in the PV's PP map,
    LPs 1 to its LP count in order: it starts at the first one's sector, PPs of
    2^pp_size bytes counted from psn_part1. Slot i is LV i. A disk is AIX's only as
    msdos.c's aix_magic_present() decides: the IPL magic at sector 0, "_LVM" at
    sector 7, and no MBR slot of a Linux, Solaris or extended type. PPs of fewer
    than 2^9 or more than 2^31 bytes make no partitions (patch 0005; before it,
    less than a sector made every LV 0 sectors long, and more was undefined)."""
    with open(image, "rb") as fh:
        def read(sector: int, n: int) -> bytes:
            fh.seek(sector * 512)
            b = fh.read(n)
            if len(b) < n:
                raise SrpartError(f"{image}: AIX structure at sector {sector} is beyond the image")
            return b
        rec = read(7, 512)
        why = not_aix(read(0, 512), rec)
        if why:
            raise SrpartError(f"{image}: not an AIX disk: {why}")
        if struct.unpack_from(">H", rec, 60)[0] != 1:
            raise SrpartError(f"{image}: no AIX LVM record (version 1) at sector 7")
        vgda_len, vgda = struct.unpack_from(">II", rec, 24)
        pp_log2 = struct.unpack_from(">H", rec, 46)[0]
        if not 9 <= pp_log2 <= 31:      # less than a sector, or more than a u32 of bytes
            return []
        pp_sectors = (1 << pp_log2) // 512
        numlvs = struct.unpack_from(">H", read(vgda, 512), 24)[0]
        lvd = read(vgda + 1, 256 * 32)
        lps = {i + 1: struct.unpack_from(">H", lvd, 32 * i + 14)[0] for i in range(256)}
        pv = read(vgda + 17, 32 + 1016 * 32)
        count, psn = struct.unpack_from(">HxxI", pv, 16)
        ppes = [struct.unpack_from(">H4xH", pv, 32 + 32 * i) for i in range(min(count, 1016))]
    if not numlvs:
        return []
    out = []
    for lv, n in lps.items():
        if not n:
            continue
        runs = [i for i in range(len(ppes) - n + 1)
                if [ppes[i + k] for k in range(n)] == [(lv, k + 1) for k in range(n)]]
        if runs:
            out.append(Part(lv, psn + runs[0] * pp_sectors, n * pp_sectors))
    return out


def ics(image: Path) -> list[Part]:
    """Acorn ICS: our reading (sector 0: checksum at 508 = 0x50617274 + the sum
    of bytes 0-507; (start, signed size) pairs until a size of 0; a negative
    size whose first sector says "LinuxPart" starts one sector later).
    pytest/test_second_oracle.py compares it with acorn.c's ICS reader."""
    with open(image, "rb") as fh:
        b = fh.read(512)
        if struct.unpack_from("<I", b, 508)[0] != (0x50617274 + sum(b[:508])) & 0xFFFFFFFF:
            raise SrpartError(f"{image}: no valid ICS sector 0")
        out = []
        for i in range(63):
            start, size = struct.unpack_from("<Ii", b, 8 * i)
            if not size:
                break
            if size < 0:
                size = -size
                fh.seek(start * 512)
                if size > 1 and fh.read(9) == b"LinuxPart":
                    start, size = start + 1, size - 1
            out.append(Part(len(out) + 1, start, size))
    return out


ORACLES: dict[str, Callable[[Path], list[Part]]] = {
    "mbr2048": lambda img: native(img, 2048, "dos"),
    "gpt2048": lambda img: native(img, 2048, "gpt"),
    "mbr512": lambda img: sfdisk_json(img, "dos"),
    "gpt512": lambda img: sfdisk_json(img, "gpt"),
    "sun": lambda img: sfdisk_json(img, "sun"),
    "sgi": lambda img: sfdisk_json(img, "sgi"),
    "apm": apm_checked,
    "amiga": amiga_checked,
    "atari": lambda img: partx(img, "atari"),
    "osf": lambda img: partx(img, "bsd"),
    "mbr512nested": mbr_nested,
    "ultrix": lambda img: partx(img, "ultrix"),
    "karma": karma,
    "ics": ics,
    "ldm": ldm,
}

# The line the series prints after a disc's partition line (whose format it
# leaves alone) when it read the table in 512-byte units: " srN: <note>".
UNIT_NOTE = {"mbr512": "MBR in 512-byte sectors", "gpt512": "GPT in 512-byte sectors",
             "mbr512nested": "MBR in 512-byte sectors"}


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


# Tables a parser reads on 512-byte devices only, whatever they say: on any
# other device the kernel creates no partitions from them (table -> why).
ONLY_512 = {"atari": "atari.c returns at once unless the logical block size is 512 "
                     "(AHDI counts 512-byte sectors and no 2048-byte Atari media exist)"}


def expected(table: str, image: Path, block: int = 2048, disk_bytes: int | None = None) -> Layout:
    """The partitions the kernel should show for `image` on a `block`-byte optical device
    whose capacity is `disk_bytes` (the image's size unless given: a formatted DVD+RW
    reports far more than was written, a drive can report a block less)."""
    try:
        fn = ORACLES[table]
    except KeyError:
        raise SrpartError(f"no oracle for table kind {table!r}") from None
    if table in ONLY_512 and block != 512:
        fn(image)                       # still a valid table of its kind
        return Layout([], [])
    disk = image.stat().st_size if disk_bytes is None else disk_bytes
    return on_device(clip_to_disk(fn(image), disk // 512), block)


def triples(table: str, image: Path, block: int = 2048,
            disk_bytes: int | None = None) -> list[tuple[int, int, int]]:
    """expected() as (number, start, size) in 512-byte sectors, the form the guest parsers give."""
    return [(p.number, p.start, p.size) for p in expected(table, image, block, disk_bytes).parts]


def triples_of(img) -> list[tuple[int, int, int]]:
    """triples() of a fixture image (anything with .table and .path)."""
    return triples(img.table, img.path)


def clip_to_disk(parts: list[Part], disk: int) -> list[Part]:
    """Upstream's end-of-disk rule (blk_add_partition): an entry that starts
    beyond the disk is left out, one that extends beyond it is truncated."""
    return [Part(p.number, p.start, min(p.size, disk - p.start)) for p in parts if p.start < disk]
