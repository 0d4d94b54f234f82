"""What `srpart boot --cd` accepts: a file a CD drive can meaningfully hold.

An image smaller than one 2048-byte block is an empty disc to the guest (a
drive with no capacity), so it is refused; a tail that is not a whole block
is unreadable there, and bytes with neither an ISO 9660 volume nor a table
signature are shown as a disc with no partitions: both boot, with a warning.
"""
from __future__ import annotations

from pathlib import Path

from .errors import SrpartError

BLOCK = 2048

# (what, byte offset, bytes): enough to tell an image from a random file
SIGNATURES = (
    ("ISO 9660", 32769, b"CD001"),
    ("MBR", 510, b"\x55\xaa"),
    ("GPT", 512, b"EFI PART"),
    ("GPT (2048-byte sectors)", 2048, b"EFI PART"),
    ("Apple Partition Map", 0, b"ER"),
    ("Sun disk label", 508, b"\xda\xbe"),
    ("SGI volume header", 0, b"\x0b\xe5\xa9\x41"),
    ("Amiga RDB", 0, b"RDSK"),
    ("BSD/OSF disklabel", 64, b"\x57\x45\x56\x82"),
    ("Ultrix table", 16312, b"\x57\x29\x03\x00"),
    ("Karma label", 510, b"\x56\xab"),
    ("sysV68 volume id", 248, b"MOTOROLA"),
    # Atari AHDI and Acorn ICS tables have no magic, only plausibility checks
)


def signatures(head: bytes) -> list[str]:
    return [what for what, off, magic in SIGNATURES if head[off:off + len(magic)] == magic]


def check_cd_image(path: Path) -> list[str]:
    """Raise SrpartError (one line) for a file no disc can be made of; return warnings."""
    if not path.exists():
        raise SrpartError(f"image not found: {path}")
    if not path.is_file():
        raise SrpartError(f"{path} is not a regular file: give a CD image")
    size = path.stat().st_size
    if size < BLOCK:
        raise SrpartError(f"{path} is {size} bytes, less than one {BLOCK}-byte CD block: "
                          "the guest would see a drive with an empty disc")
    warnings = []
    if size % BLOCK:
        warnings.append(f"{path} is {size} bytes, not a whole number of {BLOCK}-byte blocks: "
                        f"the guest reads {size // BLOCK} blocks, the last {size % BLOCK} bytes "
                        "are not on the disc")
    with open(path, "rb") as fh:
        head = fh.read(32769 + 5)
    if not signatures(head):
        warnings.append(f"{path} has no ISO 9660 volume and no partition table signature "
                        "(MBR, GPT, APM, Sun, SGI, Amiga, BSD/OSF, Ultrix, Karma, sysV68): "
                        "booting it as a disc with no known layout")
    return warnings
