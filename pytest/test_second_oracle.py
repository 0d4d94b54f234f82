"""A second, independent oracle for the tables only the project writes (issue 29).

fixtures/karma_direct.py and fixtures/acorn_ics.py write tables no tool on
the host writes, and harness/oracle.py's readers of them were written from
the same description as the writers: a misreading shared by both would pass
every guest test. The pristine kernel parser (block/partitions/karma.c,
acorn.c's ICS reader), compiled for the host by harness/hostparse.py, reads
each fixture image here, and its partitions must be the host oracle's,
entry by entry. With the series applied too: the series must not change
what these parsers find on these images.
"""
from __future__ import annotations

import pytest

from conftest import KERNELS
from fixtures import catalog
from harness import hostparse, oracle

# catalog kind -> hostparse parser (the kernel file that reads it)
KINDS = {"karma-direct": "karma", "acorn-ics": "acorn"}


@pytest.mark.host
@pytest.mark.parametrize("series", [False, True], ids=["pristine", "series"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k", KERNELS)
def test_the_kernel_parser_reads_the_fixture_as_the_oracle_does(k, kind, series):
    """(Seen failing with oracle.py's Karma reader one sector off.)"""
    img = catalog.first(kind)
    run = hostparse.run(hostparse.build(k, k if series else None, KINDS[kind]), img.path)
    assert (run.rc, run.sanitizer, run.result) == (0, "", 1), run.stderr[-2000:]
    want = oracle.ORACLES[img.table](img.path)
    assert want, f"the oracle finds no partition on {img.path.name}"
    assert run.oracle_parts() == want
