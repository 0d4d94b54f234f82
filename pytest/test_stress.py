"""Churn with partitions in use, a short version of `make stress` (issue 6).

On the plain srpart kernels: 15 forced media swaps on one drive while a
reader streams sr0 and another mounts sr0p1 and streams it, and 4
hot-plug cycles that unplug a drive under a mounted partition. After both:
the extended minors in use are the set from the start, every swap showed
exactly the oracle's partitions, and the kernel log has no bad pattern.
The full run (200 swaps, 30 cycles, sanitizer kernel, kmemleak scan) is
`make stress`.
"""
from __future__ import annotations

import pytest

from harness import churn

pytestmark = pytest.mark.vm

ON = ["sr_mod.partscan=1"]


def test_media_swaps_under_two_readers(boot):
    first = churn.swap_images()[0]
    with boot("srpart", [first.path], ON, "stress-swaps", qmp=True) as vm:
        c = churn.swaps(vm, 15)
    print(c.line())
    assert not c.problems, c.problems
    assert c.rounds == 15
    assert c.disk_reads > 0 and c.part_reads > 0, f"a reader never finished a pass: {c.line()}"
    assert c.minors_before and c.minors_after == c.minors_before


def test_hotplug_cycles_under_a_mount(boot):
    from fixtures import catalog

    sun = catalog.first("sun-xorriso")
    with boot("srpart", [sun.path], ON, "stress-hotplug", qmp=True) as vm:
        c = churn.hotplug(vm, 4)
    print(c.line())
    assert not c.problems, c.problems
    assert c.rounds == 4
    assert c.part_reads > 0, f"the reader on sr1p1 never finished a pass: {c.line()}"
    assert c.minors_before and c.minors_after == c.minors_before
