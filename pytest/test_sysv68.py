"""The sysv68 finding (issue 14): reproducer and fix, in `make check`.

sysv68 is off in Debian and so in the plain test kernels; only the debug
kernels have it, and they are not part of `make check`. The reproducer
therefore runs the kernel's own block/partitions/sysv68.c, taken from the
extracted tree, compiled for the host under ASan/UBSan with a shim whose
read_part_sector() keeps the kernel's page semantics (harness/hostparse.py).
The pristine file must overflow on the pinned image (the reproducer still
reproduces), the series' file must not, and both must read a table as
sysV68 wrote it the same way, as our own reader (oracle.sysv68) does.
The guest-side reproducer is the same image in `make fuzz` on the debug
kernels, where KASAN reported the finding.
"""
from __future__ import annotations

import pytest

from conftest import KERNELS
from fixtures import fuzz
from harness import hostparse, oracle, paths

PINNED = paths.BUILD / "fuzz" / "pinned"


@pytest.mark.host
@pytest.mark.parametrize("k", KERNELS)
def test_pristine_sysv68_reads_past_the_page(k):
    """Without patch 0001 the walk leaves the 4 KiB page the table ends."""
    img = fuzz.sysv68_table_ends_a_page(PINNED)
    run = hostparse.run(hostparse.build(k, None), img)
    assert run.sanitizer.startswith("ERROR: AddressSanitizer: heap-buffer-overflow"), \
        f"the reproducer no longer reproduces:\n{run.stderr[-2000:]}"
    assert "in sysv68_partition" in run.stderr
    assert "0 bytes to the right of 4096-byte region" in run.stderr


@pytest.mark.host
@pytest.mark.parametrize("k", KERNELS)
def test_patched_sysv68_reads_only_the_table_sector(k):
    img = fuzz.sysv68_table_ends_a_page(PINNED)
    run = hostparse.run(hostparse.build(k, k), img)
    assert (run.rc, run.sanitizer) == (0, ""), run.stderr[-2000:]
    assert run.result == 1
    assert run.oracle_parts() == oracle.sysv68(img)
    assert run.line.startswith("sysV68: sr0(s64)"), run.line


@pytest.mark.host
@pytest.mark.parametrize("series", [False, True], ids=["pristine", "series"])
@pytest.mark.parametrize("k", KERNELS)
def test_a_plain_sysv68_table_reads_the_same_with_and_without_the_fix(k, series):
    img = fuzz.sysv68_plain(PINNED)
    run = hostparse.run(hostparse.build(k, k if series else None), img)
    assert (run.rc, run.sanitizer) == (0, ""), run.stderr[-2000:]
    want = oracle.sysv68(img)
    assert len(want) == 6, "six slices; the 16th entry, the whole disk, is no partition"
    assert run.oracle_parts() == want
