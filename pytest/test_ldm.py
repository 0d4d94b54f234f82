"""The LDM finding (issue 14): reproducer and fix, in `make check`.

ldm_parse_vblk() copied a VBLK's name before checking it lies inside the
VBLK. LDM is one of Debian's parsers, so the plain kernels have it, but
without KASAN an over-read changes nothing a guest can show: the bad VBLK
is rejected either way. The reproducer therefore runs the kernel's own
block/partitions/ldm.c (pristine, and with the series applied) compiled for
the host under ASan/UBSan (harness/hostparse.py), as test_sysv68.py does,
and the guest side is `make fuzz` on the debug kernels.

ldm_frag_commit() parsed a fragmented VBLK over bytes ldm_frag_add() never
wrote (patch 0003). That is no out-of-bounds read, so ASan does not report
it: the test changes what the allocator leaves in them (ASan's fill byte)
and wants the same answer both times.
"""
from __future__ import annotations

import pytest

from conftest import KERNELS
from fixtures import catalog, fuzz, ldm_direct
from harness import hostparse, oracle, paths

PINNED = paths.BUILD / "fuzz" / "pinned"


# pinned image -> the function the pristine ldm.c over-reads in
PINNED_READS = [pytest.param(fuzz.ldm_name_past_the_page, "ldm_get_vstr", id="name"),
                pytest.param(fuzz.ldm_dsk4_guid_past_the_page, "ldm_parse_dsk4", id="dsk4-guid")]


@pytest.mark.host
@pytest.mark.parametrize("image, where", PINNED_READS)
@pytest.mark.parametrize("k", KERNELS)
def test_pristine_ldm_reads_past_the_page(k, image, where):
    """Without patch 0002 the page's last VBLK has its name (or a DSK4's GUID) read
    from after the page."""
    run = hostparse.run(hostparse.build(k, None, "ldm"), image(PINNED))
    assert run.sanitizer.startswith("ERROR: AddressSanitizer: heap-buffer-overflow"), \
        f"the reproducer no longer reproduces:\n{run.stderr[-2000:]}"
    assert f"in {where}" in run.stderr and "in ldm_parse_vblk" in run.stderr
    assert "0 bytes to the right of 4096-byte region" in run.stderr


@pytest.mark.host
@pytest.mark.parametrize("image", [fuzz.ldm_name_past_the_page, fuzz.ldm_dsk4_guid_past_the_page],
                         ids=["name", "dsk4-guid"])
@pytest.mark.parametrize("k", KERNELS)
def test_patched_ldm_refuses_the_vblk_without_reading_past_it(k, image):
    run = hostparse.run(hostparse.build(k, k, "ldm"), image(PINNED))
    assert (run.rc, run.sanitizer) == (0, ""), run.stderr[-2000:]
    assert run.result == -1 and run.parts == []          # a corrupt database: no partitions
    assert "VBLK header is corrupt" in run.stderr


@pytest.mark.host
@pytest.mark.parametrize("series", [False, True], ids=["pristine", "series"])
@pytest.mark.parametrize("k", KERNELS)
def test_the_ldm_fixture_reads_as_ldmtool_says_with_and_without_the_fix(k, series):
    img = catalog.kind_images(("ldm-direct",))[0]
    run = hostparse.run(hostparse.build(k, k if series else None, "ldm"), img.path)
    assert (run.rc, run.sanitizer) == (0, ""), run.stderr[-2000:]
    assert run.result == 1
    assert run.oracle_parts() == oracle.ldm(img.path)


@pytest.mark.host
@pytest.mark.parametrize("k", KERNELS)
def test_patched_ldm_parses_a_fragmented_vblk_only_as_far_as_it_was_copied(k, tmp_path):
    """A disk group VBLK in four records whose ids lie in the 48 bytes at the end
    of the reassembly buffer that no record fills (ldm_direct.fragmented_dgr3)
    is rejected whatever the allocator left there: its record size runs past
    what was copied. Seen failing without patch 0003 (pristine ldm.c and the
    series less 0003, both kernels): with ASan's fill byte 0 the VBLK was
    accepted (result 1, the partition), with 190 rejected (result -1). The
    same group written whole inside the copied bytes still gives the partition."""
    binary = hostparse.build(k, k, "ldm")
    crafted = ldm_direct.fragmented_dgr3(tmp_path / "ldm-fragmented-dgr3.img")
    intact = ldm_direct.fragmented_dgr3(tmp_path / "ldm-fragmented-dgr3-intact.img", intact=True)
    part = ldm_direct.FRAGMENTED_PART
    want = [hostparse.HostPart(1, ldm_direct.LOGICAL_DISK_START + part.start, part.size)]
    runs = {}
    for fill in (0, 190):
        env = {"ASAN_OPTIONS": f"{hostparse.ENV['ASAN_OPTIONS']}:malloc_fill_byte={fill}"}
        runs[fill] = hostparse.run(binary, crafted, env=env)
        control = hostparse.run(binary, intact, env=env)
        for r in (runs[fill], control):
            assert (r.rc, r.sanitizer) == (0, ""), r.stderr[-2000:]
        assert (control.result, control.parts) == (1, want), control.stderr[-2000:]
    outcome = {fill: (r.result, r.parts) for fill, r in runs.items()}
    assert outcome[0] == outcome[190], f"the allocator's fill byte decides: {outcome}"
    assert outcome[0] == (-1, [])                      # a corrupt database: no partitions
    for r in runs.values():
        assert "VBLK header is corrupt" in r.stderr, r.stderr[-2000:]
