"""The host-side oracle, on recorded util-linux output and on freshly made images (no VM)."""
from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from harness import oracle
from harness.errors import SrpartError

DATA = Path(__file__).parent / "data"


def test_parse_recorded_fdisk_2048_listing():
    image = Path("build/fixtures/srpart_d0_mbr2048.iso")
    unit, rows = oracle.parse_fdisk_list((DATA / "fdisk-2048.txt").read_text(), image)
    assert unit == 2048
    assert rows == [(1, 512, 1024, ""), (2, 1536, 2048, "")]


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
    assert oracle.native(img, 2048, "dos") == [oracle.Part(1, 2048, 400), oracle.Part(2, 2800, 200)]


def test_sfdisk_reads_512_unit_tables(tmp_path):
    img = tmp_path / "m.img"
    _mbr_image(img, [(2048, 4096)], 4096, 512)
    assert oracle.sfdisk_json(img, "dos") == [oracle.Part(1, 2048, 4096)]


def test_sfdisk_refuses_the_wrong_label(tmp_path):
    img = tmp_path / "m.img"
    _mbr_image(img, [(2048, 4096)], 4096, 512)
    with pytest.raises(SrpartError):
        oracle.sfdisk_json(img, "sun")


def test_on_device_skips_misaligned_starts_and_rounds_sizes_down():
    parts = [oracle.Part(1, 0, 3304), oracle.Part(2, 1, 9923), oracle.Part(3, 8, 3),
             oracle.Part(4, 16, 10)]
    layout = oracle.on_device(parts, 2048)
    assert layout.parts == [oracle.Part(1, 0, 3304), oracle.Part(4, 16, 8)]
    assert layout.skipped == [oracle.Part(2, 1, 9923), oracle.Part(3, 8, 3)]


def _apm_image(path, block, entries):
    """A hand-made APM: DDM in block 0, then one 'PM' entry per (start, count)."""
    data = bytearray(block * (len(entries) + 2))
    data[0:4] = b"ER" + struct.pack(">H", block)
    for i, (start, count) in enumerate(entries, 1):
        struct.pack_into(">2sHIII", data, i * block, b"PM", 0, len(entries), start, count)
    path.write_bytes(bytes(data))


def test_apm_reads_entries_in_the_maps_block_size(tmp_path):
    img = tmp_path / "a.img"
    _apm_image(img, 2048, [(1, 3), (4, 0), (5, 2)])
    assert oracle.apm(img) == [oracle.Part(1, 4, 12), oracle.Part(3, 20, 8)]
    _apm_image(img, 512, [(1, 3), (4, 2)])
    assert oracle.apm(img) == [oracle.Part(1, 1, 3), oracle.Part(2, 4, 2)]


@pytest.mark.parametrize("block, entries", [(2048, [(1, 3), (4, 0), (5, 2)]),
                                            (512, [(1, 3), (4, 2)]), (4096, [(1, 2), (3, 7)])])
def test_partx_reads_the_apm_as_our_reader_does(tmp_path, block, entries):
    img = tmp_path / "a.img"
    _apm_image(img, block, entries)
    assert oracle.partx(img, "mac") == oracle.apm(img) == oracle.apm_checked(img)


def test_a_reader_disagreement_is_an_error(tmp_path, monkeypatch):
    img = tmp_path / "a.img"
    _apm_image(img, 2048, [(1, 3), (5, 2)])
    monkeypatch.setattr(oracle, "apm", lambda image: [oracle.Part(1, 4, 12)])
    with pytest.raises(SrpartError, match=r"libblkid \(partx\) reads the APM as"):
        oracle.apm_checked(img)


def test_apm_without_driver_map_is_an_error(tmp_path):
    img = tmp_path / "a.img"
    img.write_bytes(bytes(4096))
    with pytest.raises(SrpartError, match="driver descriptor"):
        oracle.apm(img)


def test_mbr_extended_partition_is_a_one_block_stub(tmp_path):
    img = tmp_path / "e.img"
    img.write_bytes(bytes(8 * 1024 * 1024))
    subprocess.run(["sfdisk", "-q", "--no-reread", "--no-tell-kernel", str(img)], text=True,
                   input="label: dos\nstart=2048, size=8192, type=5\nstart=4096, size=2048, type=83\n",
                   check=True, capture_output=True)
    assert oracle.sfdisk_json(img, "dos") == [oracle.Part(1, 2048, 4), oracle.Part(5, 4096, 2048)]


def test_partitions_beyond_the_image_follow_upstreams_eod_rule(tmp_path):
    """An entry that extends beyond the disc is truncated to it, one that starts
    beyond it is left out (blk_add_partition), computed without the kernel."""
    img = tmp_path / "m.img"
    _mbr_image(img, [(512, 4000), (2000, 10)], 1024, 2048)    # a disc of 1024 blocks
    assert oracle.expected("mbr2048", img).parts == [oracle.Part(1, 2048, 4096 - 2048)]


def test_unknown_table_kind():
    with pytest.raises(SrpartError, match="no oracle"):
        oracle.expected("zip", Path("/dev/null"))
