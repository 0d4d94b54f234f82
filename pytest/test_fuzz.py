"""Malformed media, a bounded subset of `make fuzz` (issue 6).

40 damaged images (seed 20261203: every table kind, the first mutations)
in 5 VMs, plus the reproducer of the GPT size wrap patch 0007 fixes
(seed 1, case 37). Invariants: no bad pattern in the kernel log (the
harness fails the VM), every partition inside its medium and 2048-aligned,
on the extended major, whole disks at 11,K. The full run, under the
sanitizer kernel, is `make fuzz`.
"""
from __future__ import annotations

import pytest

from fixtures import fuzz
from harness import fuzz_run, paths

pytestmark = pytest.mark.vm

SEED, COUNT = 20261203, 40
BATCHES = [pytest.param(b, id=f"batch{b}", marks=pytest.mark.xdist_group(f"fuzz-{b}"))
           for b in range(COUNT // fuzz_run.PER_VM)]


@pytest.mark.parametrize("batch", BATCHES)
def test_malformed_media_keep_the_invariants(boot, batch):
    cases = [fuzz.case(SEED, i, paths.BUILD / "fuzz" / str(SEED))
             for i in range(batch * fuzz_run.PER_VM, (batch + 1) * fuzz_run.PER_VM)]
    with boot("srpart", [c.path for c in cases], ["sr_mod.partscan=1"], f"fuzz-{batch}") as vm:
        _, problems = fuzz_run.check_batch(vm, len(cases))
    assert not problems, f"seed {SEED}, cases {cases[0].index}-{cases[-1].index}: {problems}"


def test_gpt_entry_ending_before_its_start_is_ignored(boot):
    """Seed 1, case 37: before patch 0007 this made sr0p3 nearly 2^64 sectors long."""
    c = fuzz.case(1, 37, paths.BUILD / "fuzz" / "1")
    assert (c.kind, c.mutation) == ("gpt2048", "near-2^64")
    with boot("srpart", [c.path], ["sr_mod.partscan=1"], "fuzz-gpt-wrap") as vm:
        _, problems = fuzz_run.check_batch(vm, 1)
    assert not problems
