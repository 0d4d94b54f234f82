"""The malformed-media generator (no VM): deterministic, complete, well-formed images."""
from __future__ import annotations

import hashlib

import pytest

from fixtures import fuzz


def _digest(cases):
    return [hashlib.sha256(c.path.read_bytes()).hexdigest() for c in cases]


def test_same_seed_same_bytes_and_cases_stand_alone(tmp_path):
    a = fuzz.generate(7, 9, tmp_path / "a")
    b = fuzz.generate(7, 9, tmp_path / "b")
    assert _digest(a) == _digest(b)
    alone = fuzz.case(7, 8, tmp_path / "c")
    assert _digest([alone]) == _digest(a[8:])


def test_a_slice_of_a_run_is_the_same_cases(tmp_path):
    """fuzz_run --first: one batch of an earlier run, rebuilt alone."""
    whole = fuzz.generate(7, 9, tmp_path / "a")
    part = fuzz.generate(7, 3, tmp_path / "b", first=5)
    assert [c.index for c in part] == [5, 6, 7]
    assert _digest(part) == _digest(whole[5:8])


def test_other_seed_other_bytes(tmp_path):
    assert _digest(fuzz.generate(7, 7, tmp_path / "a")) != _digest(fuzz.generate(8, 7, tmp_path / "b"))


def test_every_kind_meets_every_mutation(tmp_path):
    cases = fuzz.generate(1, len(fuzz.KINDS) * len(fuzz.MUTATIONS), tmp_path)
    assert {(c.kind, c.mutation) for c in cases} == {(k, m) for k in fuzz.KINDS
                                                     for m in fuzz.MUTATIONS}
    for c in cases:
        assert c.size % 2048 == 0 and c.path.stat().st_size == c.size


def test_the_check_subset_covers_every_kind_and_mutation():
    import test_fuzz
    pairs = {fuzz.pair(i) for i in range(test_fuzz.COUNT)}
    assert pairs == {(k, m) for k in fuzz.KINDS for m in fuzz.MUTATIONS}


def test_debug_kinds_are_generated_only_when_asked(tmp_path):
    plain = fuzz.generate(3, len(fuzz.KINDS), tmp_path / "a")
    every = fuzz.KINDS + fuzz.DEBUG_KINDS
    debug = fuzz.generate(3, len(every), tmp_path / "b", every)
    assert not {c.kind for c in plain} & set(fuzz.DEBUG_KINDS)
    assert {c.kind for c in debug} == set(fuzz.KINDS + fuzz.DEBUG_KINDS)


def _sd(parts, size=1000, target="0:0:0:0"):
    from harness.guest import SdDisk
    return {target: SdDisk(target, size, tuple(parts))}


def test_sd_expectation_drops_only_what_the_fixes_name():
    from harness.fuzz_check import sd_problems
    before = _sd([(1, 8, 100), (2, 9, 100), (3, 900, 2**64 - 4)])
    # 512-byte blocks: only the wrapped entry goes
    assert sd_problems(before, _sd([(1, 8, 100), (2, 9, 100)]), 512) == []
    # 4096-byte blocks: the misaligned one goes too, the others lose a partial block
    assert sd_problems(before, _sd([(1, 8, 96)]), 4096) == []
    assert sd_problems(before, _sd([(1, 8, 100)]), 4096) != []      # partial block kept
    assert sd_problems(before, _sd([(1, 8, 100), (2, 9, 100), (4, 0, 8)]), 512) != []


def test_sd_problems_name_partitions_beyond_the_disk_even_without_comparison():
    from harness.fuzz_check import sd_problems
    got = sd_problems(_sd([]), _sd([(1, 900, 200)]), 512, compare=False)
    assert got == ["0:0:0:0 p1: 900+200 beyond the medium (1000)"]


def test_parse_sd_keys_disks_by_target():
    from harness.guest import parse_sd
    got = parse_sd("disk 0:0:1:0 sda 2048\npart 0:0:1:0 1 8 16\ndisk 0:0:0:0 sdb 64\n")
    assert got["0:0:1:0"].parts == ((1, 8, 16),) and got["0:0:0:0"].parts == ()
    assert got["0:0:0:0"].size == 64
    assert (got["0:0:1:0"].name, got["0:0:0:0"].name) == ("sda", "sdb")


def test_fuzz_kinds_are_an_argument_not_a_global():
    from harness import fuzz_run
    from harness.errors import SrpartError

    assert fuzz_run.kinds_for("srpart") == fuzz.KINDS
    assert fuzz_run.kinds_for("srpart", "all") == fuzz.KINDS          # plain kernel: no sysv68
    assert fuzz_run.kinds_for("srpart-debug", "all") == fuzz.KINDS + fuzz.DEBUG_KINDS
    assert fuzz_run.kinds_for("srpart-debug", "debian") == fuzz.KINDS
    assert fuzz_run.kinds_for("srpart-debug", "ldm") == ("ldm",)
    assert fuzz_run.kinds_for("srpart", "ldm,aix") == ("ldm", "aix")
    for bad in ("sysv69", "ldm,", ""):
        with pytest.raises(SrpartError, match="unknown fuzz kinds"):
            fuzz_run.kinds_for("srpart-debug", bad)


def test_the_ldm_kind_writes_every_record_form(tmp_path):
    """ldm.c parses version-4 disk group and disk records and optional fields the
    record flags add (ldm_direct.FORMS); the ldm kind must write each of them, or
    those paths go unfuzzed (host coverage of ldm.c: 82.8% without them, 92.7%)."""
    from fixtures import ldm_direct as L

    seen: set[tuple[int, int]] = set()
    for i in range(20 * len(fuzz.MUTATIONS)):
        c = fuzz.case(3, i, tmp_path, ("ldm",))
        data = c.path.read_bytes()
        at = data.find(b"VBLK")
        while at >= 0:
            if at + 0x18 <= len(data):
                seen.add((data[at + 0x13], data[at + 0x12]))
            at = data.find(b"VBLK", at + 1)
        c.path.unlink()
    types = {t for t, _ in seen}
    assert {L.VBLK_DGR4, L.VBLK_DSK4} <= types
    for vtype, flag in ((L.VBLK_DGR3, L.FLAG_DGR_IDS), (L.VBLK_DGR4, L.FLAG_DGR_IDS),
                        (L.VBLK_CMP3, L.FLAG_COMP_STRIPE), (L.VBLK_PRT3, L.FLAG_PART_INDEX),
                        (L.VBLK_VOL5, L.FLAG_VOLU_ID1), (L.VBLK_VOL5, L.FLAG_VOLU_ID2),
                        (L.VBLK_VOL5, L.FLAG_VOLU_SIZE), (L.VBLK_VOL5, L.FLAG_VOLU_DRIVE)):
        assert any(t == vtype and f & flag for t, f in seen), (hex(vtype), hex(flag))


def test_most_aix_cases_pass_the_gate_msdos_c_keeps(tmp_path):
    """aix.c is reached only through msdos.c's aix_magic_present(): IPL magic at
    sector 0, "_LVM" at sector 7, no Linux/Solaris/extended MBR slot. Until
    2026-12-06 the aix kind wrote no IPL magic, so the debug kernels never ran
    aix.c on it (0/93 lines in the guest) while the host build, which calls
    aix_partition() directly, reached every line."""
    from harness import oracle

    gated = 0
    cases = [fuzz.case(5, i, tmp_path, ("aix",)) for i in range(4 * len(fuzz.MUTATIONS))]
    for c in cases:
        d = c.path.read_bytes()
        if not oracle.not_aix(d[0:512], d[7 * 512:8 * 512]):
            gated += 1
    assert gated >= 0.8 * len(cases), f"{gated} of {len(cases)} aix cases reach aix.c"
    assert gated < len(cases), "no aix case exercises the gate itself"


def _rewrite_aix_plain(outdir):
    for _ in range(60):
        fuzz.aix_plain(outdir)


def test_a_pinned_image_is_never_seen_half_written(tmp_path):
    """xdist workers rewrite the same pinned image while others read it (CI:
    test_aix read aix-plain.img with its LVM record not yet written)."""
    import multiprocessing
    import struct

    img = fuzz.aix_plain(tmp_path)
    writers = [multiprocessing.Process(target=_rewrite_aix_plain, args=(tmp_path,))
               for _ in range(2)]
    for w in writers:
        w.start()
    torn = reads = 0
    while any(w.is_alive() for w in writers):
        with open(img, "rb") as fh:
            fh.seek(fuzz.AIX_LVM_REC * 512)
            rec = fh.read(512)
        reads += 1
        torn += len(rec) < 512 or struct.unpack_from(">H", rec, 60)[0] != 1
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert torn == 0, f"{torn} of {reads} reads saw a half-written image"
