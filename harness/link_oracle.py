"""Host-side oracle for what udev should make of a disc: /dev/disk links.

From the image bytes only, never from a guest: the partitions the kernel
creates come from harness/oracle.py (fdisk, sfdisk, partx); what each of
them holds from `blkid -p -o udev` at that offset (util-linux on the host);
partition UUIDs and GPT names from the table (sfdisk --json, fdisk -b 2048).
The rules that turn those into links are 60-persistent-storage.rules' own
(by-uuid, by-label, by-partuuid, by-partlabel), written here once more.
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import oracle
from .errors import SrpartError

# Slices the kernel flags as spanning the whole disc carry a `whole_disk`
# attribute, and 60-persistent-storage.rules:13 gives them nothing: Sun's
# tag 5 ("Whole disk", SUN_WHOLE_DISK in sun.c)
WHOLE_DISK_TYPES = {"sun": "5"}
# (sgi.c flags no slice: an SGI volume, type 6, is an ordinary partition to
# the kernel and to udev, and one that starts at 0 covers the disc)
LINK_KINDS = ("by-label", "by-uuid", "by-partuuid", "by-partlabel")


@dataclass(frozen=True)
class Device:
    name: str                     # sr0, sr0p2
    start: int = 0                # 512-byte sectors into the disc
    size: int = 0
    fs: dict[str, str] = field(default_factory=dict)   # ID_FS_* found there
    part_uuid: str = ""
    part_name: str = ""           # GPT only
    part_type: str = ""           # lsblk's PARTTYPE: 0x83, a GPT type GUID
    whole_disk: bool = False
    table: str = ""               # harness/oracle.py's table kind of the disc
    truncated: bool = False       # its entry runs past the end of the disc

    @property
    def partition(self) -> bool:
        return "p" in self.name

    def links(self) -> list[str]:
        """The by-* links 60-persistent-storage.rules:133-142 give this device."""
        if self.whole_disk:
            return []
        out = []
        if self.fs.get("ID_FS_USAGE") in ("filesystem", "other", "crypto"):
            if self.fs.get("ID_FS_UUID_ENC"):
                out.append(f"by-uuid/{self.fs['ID_FS_UUID_ENC']}")
            if self.fs.get("ID_FS_LABEL_ENC"):
                out.append(f"by-label/{self.fs['ID_FS_LABEL_ENC']}")
        if self.part_uuid:
            out.append(f"by-partuuid/{self.part_uuid}")
        if self.part_name:
            out.append(f"by-partlabel/{self.part_name}")
        return out


def blkid(image: Path, offset: int = 0, size: int | None = None) -> dict[str, str]:
    """`blkid -p -o udev` of the bytes at offset (ID_FS_* only); {} when it finds nothing."""
    cmd = ["blkid", "-p", "-o", "udev", "-O", str(offset)]
    if size is not None:
        cmd += ["-S", str(size)]
    r = subprocess.run(cmd + [str(image)], capture_output=True, text=True)
    if r.returncode == 2:        # nothing found
        return {}
    if r.returncode != 0:
        raise SrpartError(f"{' '.join(cmd)} {image}: {r.stderr.strip() or r.returncode}")
    props = dict(ln.split("=", 1) for ln in r.stdout.splitlines() if "=" in ln)
    return {k: v for k, v in props.items() if k.startswith("ID_FS_")}


def table_ids(table: str, image: Path) -> dict[int, tuple[str, str, str]]:
    """Partition number -> (uuid, gpt name, type) as libblkid names them."""
    if table == "gpt2048":
        text = subprocess.run(["fdisk", "-b", "2048", "-l", "-o", "Device,Type-UUID,UUID,Name",
                               str(image)], capture_output=True, text=True, check=True).stdout
        out = {}
        for ln in text.splitlines():
            m = re.match(re.escape(str(image)) + r"(\d+)\s+(\S+)\s+(\S+)\s*(.*)$", ln)
            if m:
                out[int(m[1])] = (m[3].lower(), m[4].strip(), m[2].lower())
        return out
    if table in ("sun", "sgi", "apm"):
        return {}
    r = subprocess.run(["sfdisk", "--json", str(image)], capture_output=True, text=True)
    if r.returncode != 0:
        return {}
    t = json.loads(r.stdout)["partitiontable"]
    out = {}
    for p in t.get("partitions", []):
        n = int(re.search(r"(\d+)$", p["node"])[1])
        if t["label"] == "gpt":
            out[n] = (p["uuid"].lower(), p.get("name", ""), p["type"].lower())
        elif t["label"] == "dos":
            disk_id = int(t["id"], 16)
            # libblkid: no disk identifier, no partition UUID
            out[n] = (f"{disk_id:08x}-{n:02x}" if disk_id else "", "", f"0x{p['type']}")
    return out


def whole_disk_slices(table: str, image: Path) -> set[int]:
    want = WHOLE_DISK_TYPES.get(table)
    if not want:
        return set()
    t = json.loads(subprocess.run(["sfdisk", "--json", "--label", table, str(image)],
                                  capture_output=True, text=True, check=True).stdout)
    return {int(re.search(r"(\d+)$", p["node"])[1]) for p in t["partitiontable"]["partitions"]
            if p.get("type") == want}


def devices(img, k: int, partitions: bool = True) -> list[Device]:
    """srK and (with partitions) its srKpN, for fixture image `img` (.path, .table)."""
    disc = Device(f"sr{k}", 0, img.path.stat().st_size // 512, blkid(img.path), table=img.table)
    if not partitions:
        return [disc]
    ids = table_ids(img.table, img.path)
    whole = whole_disk_slices(img.table, img.path)
    raw = {p.number: p for p in oracle.ORACLES[img.table](img.path)}
    out = [disc]
    for n, start, size in oracle.triples_of(img):
        uuid, name, ptype = ids.get(n, ("", "", ""))
        over = n in raw and raw[n].start + raw[n].size > disc.size
        out.append(Device(f"sr{k}p{n}", start, size, blkid(img.path, start * 512, size * 512),
                          uuid, name, ptype, n in whole, img.table, over))
    return out


def covering(disc: Device, part: Device) -> bool:
    """A partition that starts at the disc's first sector and finds the disc's own volume."""
    return (part.start == 0 and bool(part.fs.get("ID_FS_UUID"))
            and part.fs.get("ID_FS_UUID") == disc.fs.get("ID_FS_UUID"))


def yields(disc: Device, part: Device) -> bool:
    """With the project's rules a partition leaves a link it shares with its disc to
    the disc: one covering it, or the HFS/HFS+ view of a Mac hybrid, whose volume
    name is the ISO 9660 volume's (xorriso -hfsplus names both alike)."""
    return covering(disc, part) or (part.table == "apm" and
                                    part.fs.get("ID_FS_TYPE") in ("hfs", "hfsplus"))


def claims(devs: list[Device]) -> dict[str, set[str]]:
    """Link ("by-label/X") -> every device the rules give it to."""
    out: dict[str, set[str]] = {}
    for d in devs:
        for link in d.links():
            out.setdefault(link, set()).add(d.name)
    return out


def owners(devs: list[Device], discs_win: bool) -> dict[str, set[str]]:
    """Link -> the devices it may point to. Two claimants of equal priority race
    (udev keeps one); with patches/udev/61-srpart-partitions.rules (discs_win)
    a disc beats the covering partition that holds its own volume."""
    out = claims(devs)
    if discs_win:
        by_name = {d.name: d for d in devs}
        for link, who in out.items():
            discs = {w for w in who if not by_name[w].partition}
            if discs and all(by_name[w].partition is False or
                             any(yields(by_name[d], by_name[w]) for d in discs) for w in who):
                out[link] = discs
    return out


# What Debian 12's stock rules (udev 252, util-linux 2.38) may leave out,
# and why; patches/udev/61-srpart-partitions.rules gives all of it.
STOCK_GAPS = {
    "unit512": "libblkid reads an MBR or GPT in the device's 2048-byte sectors only: "
               "a table in 512-byte units (every isohybrid image) tells it no partition "
               "entry, so no ID_PART_ENTRY_* (by-partuuid, by-partlabel, PARTTYPE)",
    "truncated": "libblkid drops a table entry that runs past the end of the device, "
                 "which the kernel truncates (blk_add_partition): no ID_PART_ENTRY_*",
    "mac": "libblkid's low-level probe of a 2048-byte device with an Apple Partition Map "
           "reports the map and not the ISO 9660 volume (udisks2 #725)",
}


def stock_gap(d: Device, what: str) -> str | None:
    """The STOCK_GAPS key when stock rules may lack `what` ("by-partuuid/…", "parttype")."""
    if d.partition and d.table in ("mbr512", "gpt512") and \
            what.startswith(("by-partuuid/", "by-partlabel/", "parttype")):
        return "unit512"
    if d.partition and d.truncated and what.startswith(("by-partuuid/", "by-partlabel/",
                                                        "parttype")):
        return "truncated"
    if not d.partition and d.table == "apm" and what.startswith(("by-label/", "by-uuid/",
                                                                 "fstype", "label")):
        return "mac"
    return None


def mountable(d: Device) -> bool:
    """A labelled file system the guest kernel mounts from a 2048-byte device: not a
    FAT with 512-byte logical sectors (fat_fill_super: "logical sector size too
    small for device"), which every ESP image has."""
    fs = d.fs.get("ID_FS_TYPE")
    if not d.fs.get("ID_FS_LABEL") or fs not in ("ext2", "ext4", "vfat", "hfsplus", "iso9660"):
        return False
    return fs != "vfat" or int(d.fs.get("ID_FS_BLOCK_SIZE", "512")) >= 2048
