"""The media expectations fail without the series' parser patches (issue 11).

patches/naive-<v>/ is the sr patch alone: sr stops setting GENHD_FL_NO_PART,
the parsers are upstream's. That is what v1 gave on every distribution kernel
(sr and cdrom as modules), where its parser patches asked disk_to_cdi(), NULL
in built-in block code, and so never ran. Booted with every fixture kind, the
oracle test_media.py checks against must fail there for each table written in
512-byte sectors (MBR or GPT, isohybrid style) or with an entry that starts
inside a 2048-byte block, and hold for every other kind,
which upstream's parsers already read right on 2048-byte media. So the media
tests can fail, and fail for the reason the parser patches exist.
"""
from __future__ import annotations

import pytest

from fixtures import catalog
from harness import guest, oracle

pytestmark = pytest.mark.vm

NEEDS_THE_SERIES = ("mbr512", "gpt512", "mbr512nested")    # 512-byte units on 2048-byte media


def _needs_the_series(img) -> bool:
    """A table in 512-byte units, or one with entries no 2048-byte device can
    read (upstream creates them; the series leaves them out)."""
    return img.table in NEEDS_THE_SERIES or bool(oracle.expected(img.table, img.path).skipped)


@pytest.mark.parametrize("kinds", [catalog.MIXED, catalog.REST, catalog.PARSERS],
                         ids=["mixed8", "rest", "parsers"])
def test_naive_kernel_misreads_exactly_the_512_unit_tables(boot, kinds):
    images = catalog.kind_images(kinds)
    with boot("sr-only", [i.path for i in images], ["sr_mod.partscan=1"],
              f"naive-{len(kinds)}-{kinds[0]}") as vm:
        sysparts = guest.parse_sys_partitions(vm.check(guest.PARTITIONS_CMD))
    wrong, right = [], []
    for k, img in enumerate(images):
        want = oracle.triples_of(img)
        got = guest.drive_partitions(sysparts, k)
        (right if got == want else wrong).append(img.kind)
    assert sorted(wrong) == sorted(i.kind for i in images if _needs_the_series(i)), \
        f"misread without the parser patches: {wrong}; read right: {right}"
