"""The malformed-media generator (no VM): deterministic, complete, well-formed images."""
from __future__ import annotations

import hashlib

from fixtures import fuzz


def _digest(cases):
    return [hashlib.sha256(c.path.read_bytes()).hexdigest() for c in cases]


def test_same_seed_same_bytes_and_cases_stand_alone(tmp_path):
    a = fuzz.generate(7, 9, tmp_path / "a")
    b = fuzz.generate(7, 9, tmp_path / "b")
    assert _digest(a) == _digest(b)
    alone = fuzz.case(7, 8, tmp_path / "c")
    assert _digest([alone]) == _digest(a[8:])


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
