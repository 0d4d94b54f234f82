"""Fixture generators against the oracle and the image bytes (no VM)."""
from __future__ import annotations

import pytest

from fixtures import catalog
from harness import oracle


@pytest.mark.parametrize("kind", catalog.DRIVE_KINDS)
def test_images_are_whole_2048_blocks_with_their_label(kind):
    img = catalog.image(kind, catalog.drive_label(0, kind))
    data = img.path.read_bytes()
    assert len(data) % 2048 == 0
    assert data[32768 + 1:32768 + 6] == b"CD001"
    assert data[32768 + 40:32768 + 72].decode().rstrip() == img.volume_label


@pytest.mark.parametrize("kind", catalog.DRIVE_KINDS)
def test_data_partitions_are_2048_aligned_ext_with_their_file(kind):
    img = catalog.image(kind, catalog.drive_label(0, kind))
    parts = {p.number: p for p in oracle.expected(img.table, img.path)}
    data = img.path.read_bytes()
    for d in img.data:
        p = parts[d.number]
        assert p.start % 4 == 0 and p.size % 4 == 0, f"p{d.number} not 2048-aligned"
        sb = data[p.start * 512 + 1024: p.start * 512 + 2048]
        assert sb[56:58] == b"\x53\xef", f"p{d.number}: no ext2/4 superblock at the oracle's start"
        assert 1024 << int.from_bytes(sb[24:28], "little") == 2048, "ext block size is not 2048"
        assert d.content.encode() in data[p.start * 512:(p.start + p.size) * 512]


def test_drive_images_are_distinct():
    imgs = catalog.drive_images(8)
    assert len({i.volume_label for i in imgs}) == 8
    assert len({i.path for i in imgs}) == 8
