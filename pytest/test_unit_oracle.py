"""The host-side oracle, on recorded util-linux output and on freshly made images (no VM)."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from harness import oracle
from harness.errors import SrpartError

DATA = Path(__file__).parent / "data"


def test_parse_recorded_fdisk_2048_listing():
    image = Path("build/fixtures/srpart_d0_mbr2048.iso")
    unit, rows = oracle.parse_fdisk_list((DATA / "fdisk-2048.txt").read_text(), image)
    assert unit == 2048
    assert rows == [(1, 512, 1024), (2, 1536, 2048)]


def _mbr_image(path: Path, entries: list[tuple[int, int]], total_blocks: int, unit: int) -> None:
    """An image of total_blocks 2048-byte blocks with a hand-packed MBR counting `unit` bytes."""
    mbr = bytearray(512)
    for i, (start, size) in enumerate(entries):
        mbr[446 + 16 * i: 446 + 16 * (i + 1)] = struct.pack("<BBBBBBBBII", 0, 0, 0, 0, 0x83, 0, 0, 0,
                                                             start, size)
    mbr[510:512] = b"\x55\xaa"
    path.write_bytes(bytes(mbr) + bytes(total_blocks * 2048 - 512))


def test_mbr_native_scales_2048_units_to_512_sectors(tmp_path):
    img = tmp_path / "m.img"
    _mbr_image(img, [(512, 100), (700, 50)], 1024, 2048)
    assert oracle.mbr_native(img, 2048) == [oracle.Part(1, 2048, 400), oracle.Part(2, 2800, 200)]


def test_sfdisk_reads_512_unit_tables(tmp_path):
    img = tmp_path / "m.img"
    _mbr_image(img, [(2048, 4096)], 4096, 512)
    assert oracle.sfdisk_json(img) == [oracle.Part(1, 2048, 4096)]


def test_partition_beyond_the_image_is_an_oracle_error(tmp_path):
    img = tmp_path / "m.img"
    _mbr_image(img, [(512, 4000)], 1024, 2048)      # ends at block 4512 of 1024
    with pytest.raises(SrpartError, match="beyond the image"):
        oracle.expected("mbr2048", img)


def test_unknown_table_kind():
    with pytest.raises(SrpartError, match="no oracle"):
        oracle.expected("zip", Path("/dev/null"))
