"""The AIX findings (issue 14): reproducers and fix, in `make check`.

AIX is off in Debian and so in the plain test kernels; only the debug
kernels have it. As for sysv68, the reproducer runs the kernel's own
block/partitions/aix.c (pristine, and with the series applied) compiled for
the host under ASan/UBSan (harness/hostparse.py, whose read_part_sector()
gives every 4 KiB page its own heap block, as the page cache gives the
kernel one page), and the guest side is the `aix` kind of `make fuzz` on
the debug kernels.
"""
from __future__ import annotations

import pytest

from conftest import KERNELS
from fixtures import fuzz
from harness import hostparse, oracle, paths

PINNED = paths.BUILD / "fuzz" / "pinned"

# pinned image -> what the pristine aix.c's report says
PINNED_READS = [
    pytest.param(fuzz.aix_lvd_past_the_page, ("in aix_partition", "14 bytes to the right of 4096-byte region"),
                 id="lv-descriptors"),
    pytest.param(fuzz.aix_name_past_the_buffer,
                 ("in __interceptor_snprintf", "in aix_partition", "0 bytes to the right of 16384-byte region"),
                 id="lv-name"),
]


@pytest.mark.host
@pytest.mark.parametrize("image, where", PINNED_READS)
@pytest.mark.parametrize("k", KERNELS)
def test_pristine_aix_reads_past_its_buffer(k, image, where):
    """Without patch 0004, the descriptors are read past the page one sector was
    mapped from, and the last LV's name past the name buffer."""
    run = hostparse.run(hostparse.build(k, None, "aix"), image(PINNED))
    assert run.sanitizer.startswith("ERROR: AddressSanitizer: heap-buffer-overflow"), \
        f"the reproducer no longer reproduces:\n{run.stderr[-2000:]}"
    for text in where:
        assert text in run.stderr, run.stderr[-2000:]


@pytest.mark.host
@pytest.mark.parametrize("image, where", PINNED_READS)
@pytest.mark.parametrize("k", KERNELS)
def test_patched_aix_reads_only_what_it_holds(k, image, where):
    run = hostparse.run(hostparse.build(k, k, "aix"), image(PINNED))
    assert (run.rc, run.sanitizer) == (0, ""), run.stderr[-2000:]
    assert run.result == 0 and run.parts == []       # no LV is a run of its PPs
    assert run.line.startswith(" AIX LVM header version 1 found"), run.line


# PP size (log2 of bytes) -> the pristine aix.c's UBSan report
PP_SHIFTS = [
    pytest.param(31, "runtime error: left shift of 1 by 31 places cannot be represented in type 'int'",
                 id="2^31"),
    pytest.param(32, "runtime error: shift exponent 32 is too large for 32-bit type 'int'", id="2^32"),
    pytest.param(0xFFFF, "runtime error: shift exponent 65535 is too large for 32-bit type 'int'",
                 id="2^65535"),
]


@pytest.mark.host
@pytest.mark.parametrize("pp_log2, report", PP_SHIFTS)
@pytest.mark.parametrize("k", KERNELS)
def test_pristine_aix_shifts_by_the_disks_pp_size(k, pp_log2, report):
    """Without patch 0005, the PP size is `1 << pp_size` in an int, pp_size
    from the disk: undefined from 31 on."""
    run = hostparse.run(hostparse.build(k, None, "aix"), fuzz.aix_pp_size(PINNED, pp_log2))
    assert run.sanitizer == report, f"the reproducer no longer reproduces:\n{run.stderr[-2000:]}"


@pytest.mark.host
@pytest.mark.parametrize("pp_log2", [0, 8, 9, 31, 32, 0xFFFF])
@pytest.mark.parametrize("k", KERNELS)
def test_patched_aix_takes_pp_sizes_from_a_sector_to_2_gib(k, pp_log2):
    """With it, 2^9 to 2^31 bytes read as the oracle says (the layout as AIX
    writes it, only the PP size changed); smaller and larger PPs give no
    partition and a line that names the size."""
    img = fuzz.aix_pp_size(PINNED, pp_log2)
    run = hostparse.run(hostparse.build(k, k, "aix"), img)
    assert (run.rc, run.sanitizer) == (0, ""), run.stderr[-2000:]
    want = oracle.aix(img)
    assert run.oracle_parts() == want
    if 9 <= pp_log2 <= 31:
        assert len(want) == 3 and run.result == 1
        assert run.line.startswith(" AIX LVM header version 1 found"), run.line
    else:
        assert want == [] and run.parts == []
        assert run.line.startswith(f" unsupported AIX PP size 2^{pp_log2} found"), run.line


@pytest.mark.host
@pytest.mark.parametrize("series", [False, True], ids=["pristine", "series"])
@pytest.mark.parametrize("k", KERNELS)
def test_a_plain_aix_volume_group_reads_the_same_with_and_without_the_fix(k, series):
    img = fuzz.aix_plain(PINNED)
    run = hostparse.run(hostparse.build(k, k if series else None, "aix"), img)
    assert (run.rc, run.sanitizer) == (0, ""), run.stderr[-2000:]
    want = oracle.aix(img)
    assert len(want) == 3, "three LVs, each one run of PPs"
    assert run.result == 1
    assert run.oracle_parts() == want


@pytest.mark.host
@pytest.mark.parametrize("k", KERNELS)
def test_the_aix_fuzz_kind_finds_the_reads_in_the_pristine_file_only(k):
    """The aix kind, every mutation ten times (fixtures/fuzz.py), through the host build:
    the generator reaches both reads in the pristine aix.c, and the series'
    aix.c parses every image without a report."""
    count = 10 * len(fuzz.MUTATIONS)
    pristine = hostparse.fuzz(k, None, "aix", 20261206, count)
    assert pristine.reports, "the aix kind no longer reaches the reads patch 0004 fixes"
    series = hostparse.fuzz(k, k, "aix", 20261206, count)
    assert series.reports == [], series.reports[:3]
