"""Malformed media, a bounded subset of `make fuzz` (issue 6).

48 damaged images (seed 20261203: every table kind, the first mutations)
in 3 VMs of 8 drives: the first 8 images are parsed at probe, the next 8
after a media swap over QMP, as `make fuzz` does. Plus the reproducer of
the GPT size wrap patch 0007 fixes (seed 1, case 37). Invariants: no bad
pattern in the kernel log (the harness fails the VM), every partition
inside its medium and 2048-aligned, on the extended major, whole disks at
11,K. The full run, under the sanitizer kernel with a kmemleak scan, is
`make fuzz`.
"""
from __future__ import annotations

import pytest

from fixtures import fuzz
from harness import fuzz_run, paths

pytestmark = pytest.mark.vm

SEED, ROUNDS = 20261203, 2
PER_VM = fuzz_run.PER_VM * ROUNDS
COUNT = 3 * PER_VM
BATCHES = [pytest.param(b, id=f"batch{b}", marks=pytest.mark.xdist_group(f"fuzz-{b}"))
           for b in range(COUNT // PER_VM)]


@pytest.mark.parametrize("batch", BATCHES)
def test_malformed_media_keep_the_invariants(boot, batch):
    cases = [fuzz.case(SEED, i, paths.BUILD / "fuzz" / str(SEED))
             for i in range(batch * PER_VM, (batch + 1) * PER_VM)]
    first = cases[:fuzz_run.PER_VM]
    with boot("srpart", [c.path for c in first], ["sr_mod.partscan=1"], f"fuzz-{batch}",
              qmp=True) as vm:
        res = fuzz_run.fuzz_vm(vm, cases)
    assert not res.failures, [f"seed {SEED}, cases {b[0].index}-{b[-1].index}: {p}"
                              for b, p in res.failures]
    assert res.processed == len(cases)


def test_gpt_entry_ending_before_its_start_is_ignored(boot):
    """Seed 1, case 37: before patch 0007 this made sr0p3 nearly 2^64 sectors long."""
    c = fuzz.case(1, 37, paths.BUILD / "fuzz" / "1")
    assert (c.kind, c.mutation) == ("gpt2048", "near-2^64")
    with boot("srpart", [c.path], ["sr_mod.partscan=1"], "fuzz-gpt-wrap") as vm:
        _, problems = fuzz_run.check_batch(vm, 1)
    assert not problems
