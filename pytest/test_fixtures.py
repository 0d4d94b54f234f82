"""Fixture generators against the oracle and the image bytes (no VM).

These build the images under build/fixtures with xorriso, mke2fs and
mformat: they are `host` tests, run by make check, not by make unit."""
from __future__ import annotations

import re
import struct
import subprocess

import pytest

from fixtures import catalog, sgi_direct, sun_direct
from fixtures.common import be_words
from harness import oracle

pytestmark = pytest.mark.host

KINDS = sorted(catalog.KINDS)


def _img(kind):
    return catalog.first(kind)


@pytest.mark.parametrize("kind", KINDS)
def test_images_are_whole_2048_blocks_with_their_label(kind):
    img = _img(kind)
    data = img.path.read_bytes()
    assert len(data) % 2048 == 0
    assert data[32768 + 1:32768 + 6] == b"CD001"
    assert data[32768 + 40:32768 + 72].decode().rstrip() == img.volume_label


@pytest.mark.parametrize("kind", KINDS)
def test_data_partitions_are_aligned_and_hold_a_file_system(kind):
    img = _img(kind)
    # a kind with no data partition would pass without checking anything
    assert bool(img.data) == (kind not in catalog.NO_DATA), \
        f"{kind}: {len(img.data)} data partitions, catalog.NO_DATA says otherwise"
    layout = oracle.expected(img.table, img.path, 512)     # every entry, as a disk has it
    parts = {p.number: p for p in layout.parts}
    data = img.path.read_bytes()
    for d in img.data:
        p = parts[d.number]
        assert p.start % 4 == 0 and p.size % 4 == 0, f"p{d.number} not 2048-aligned"
        fs = data[p.start * 512:(p.start + p.size) * 512]
        if d.fstype.startswith("ext"):
            assert fs[1024 + 56:1024 + 58] == b"\x53\xef", f"p{d.number}: no ext superblock"
            assert 1024 << int.from_bytes(fs[1024 + 24:1024 + 28], "little") == 2048
        elif d.fstype == "hfsplus":
            assert fs[1024:1026] == b"H+", f"p{d.number}: no HFS+ volume header"
        elif d.fstype == "vfat":
            assert fs[510:512] == b"\x55\xaa" and fs[43:54].decode().strip() == d.label
        else:
            pytest.fail(f"unknown fstype {d.fstype}")


def test_sets_cover_every_kind_once():
    assert sorted(catalog.MIXED + catalog.REST + catalog.PARSERS) == KINDS
    assert len(catalog.MIXED) == 8


def test_drive_images_are_distinct():
    imgs = catalog.drive_images(8)
    assert len({i.volume_label for i in imgs}) == 8
    assert len({i.path for i in imgs}) == 8


def test_sun_label_checksum_and_magic():
    raw = _img("sun-direct").path.read_bytes()[:512]
    x = 0
    for w in be_words(raw, "H"):
        x ^= w
    assert x == 0 and raw[508:510] == b"\xda\xbe"
    assert struct.unpack(">I", raw[188:192])[0] == sun_direct.VTOC_SANITY


def test_sgi_label_sums_to_zero():
    raw = _img("sgi-direct").path.read_bytes()[:512]
    assert sum(be_words(raw, "I")) & 0xFFFFFFFF == 0
    assert struct.unpack(">I", raw[:4])[0] == sgi_direct.SGI_MAGIC


def test_fdisk_lists_the_direct_labels():
    """util-linux, not our writer, decides that the labels are valid."""
    for kind, label in (("sun-direct", "sun"), ("sgi-direct", "sgi")):
        out = subprocess.run(["fdisk", "-l", str(_img(kind).path)], text=True,
                             capture_output=True, check=True).stdout
        assert f"Disklabel type: {label}" in out


@pytest.mark.parametrize("kind", ["apm-xorriso", "hfsplus-xorriso"])
def test_apm_oracle_agrees_with_xorriso_report(kind):
    """Our APM parser against xorriso's -report_system_area (which omits the map entry)."""
    img = _img(kind)
    out = subprocess.run(["xorriso", "-indev", str(img.path), "-report_system_area", "plain"],
                         text=True, capture_output=True, check=True).stdout
    bs = int(re.search(r"^APM block size\s*:\s*(\d+)", out, re.M).group(1))
    rep = [(int(n) + 1, int(s) * bs // 512, int(c) * bs // 512) for n, s, c in
           re.findall(r"^APM start and size :\s+(\d+)\s+(\d+)\s+(\d+)", out, re.M)]
    ours = [(p.number, p.start, p.size) for p in oracle.apm(img.path)]
    assert ours[0][0] == 1 and ours[1:] == rep


def test_apm_images_reach_the_mac_parser():
    """No MBR signature: msdos.c runs before mac.c and would claim the disc."""
    for kind in ("apm-xorriso", "hfsplus-xorriso"):
        raw = _img(kind).path.read_bytes()[:512]
        assert raw[:2] == b"ER" and raw[510:512] != b"\x55\xaa"


def test_bench_disc_has_one_64_mib_partition_at_1_mib(tmp_path):
    from fixtures import bench_image
    from harness import oracle

    img = bench_image.build(tmp_path / "read.img")
    parts = oracle.expected(img.table, img.path).parts
    per_block = 2048 // 512            # the oracle counts 512-byte sectors
    assert [(p.number, p.start, p.size) for p in parts] == \
        [(1, bench_image.START * per_block, bench_image.BLOCKS * per_block)]
    with open(img.path, "rb") as fh:
        fh.seek(bench_image.START * 2048)
        a = fh.read(1 << 20)
        b = fh.read(1 << 20)
    assert a != b and a[8:] == b[8:] and a.count(0) < len(a) // 100


@pytest.mark.parametrize("kind", KINDS)
def test_fstype_table_matches_the_images(kind):
    """catalog.FSTYPES (what the media tests parametrize over) says what the images hold."""
    img = catalog.first(kind)
    have = {d.fstype for d in img.data}
    assert have <= set(catalog.FSTYPES.get(kind, ("ext2", "ext4")))
    assert ("vfat" in have) == catalog.image_kind_has(kind, "vfat")


@pytest.mark.parametrize("kind", catalog.MIXED + catalog.REST)
def test_udev_properties_the_catalog_declares_hold(kind):
    """catalog.WHOLE_DISK_SLICE, COVERING and MAC_HYBRID say which udev tests a disc
    set can feed; the host oracle (sfdisk, blkid) must find exactly those.
    (Seen failing with "sun-xorriso" moved into WHOLE_DISK_SLICE.)"""
    from harness import link_oracle

    img = _img(kind)
    devs = link_oracle.devices(img, 0, True)
    disc, parts = devs[0], devs[1:]
    found = {"WHOLE_DISK_SLICE": any(d.whole_disk for d in parts),
             "COVERING": any(link_oracle.covering(disc, p) for p in parts),
             "MAC_HYBRID": any(p.table == "apm" and p.fs.get("ID_FS_TYPE") == "hfsplus"
                               for p in parts) and disc.fs.get("ID_FS_TYPE") == "iso9660"}
    declared = {name: kind in getattr(catalog, name) for name in found}
    assert found == declared
