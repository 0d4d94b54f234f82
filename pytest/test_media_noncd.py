"""Disks that are not CDs: what the series changes for them, and nothing else (issues 3, 11).

Every image kind, attached as a scsi-hd (sd never sets GD_512_TABLES), is
booted under the unpatched kernel and the series. With 512-byte blocks (the
everyday case) the result must be identical. With 2048- and 4096-byte
blocks (MO drives, 4Kn disks) the series applies one documented rule to
every disk, the rule BLKPG already applies to partitions added from user
space: a partition whose start is not a multiple of the logical block size
is not created (one line says so), and the others lose any partial last
block. So the expected view is the unpatched kernel's, put through that
rule on the host; the 512-byte MBR/GPT readings must not appear on sd at
all. Disks are keyed by SCSI target, as sd names them in probe order.
"""
from __future__ import annotations

import re

import pytest

from fixtures import catalog
from harness import guest, oracle, qemu

pytestmark = [pytest.mark.vm, pytest.mark.xdist_group("media-noncd")]

KINDS = catalog.MIXED + catalog.REST + catalog.PARSERS

SKIP = re.compile(r"^p(\d+) start (\d+) is not a multiple of the (\d+)-byte block size, skipped$")


def _view(boot, variant: str, cmdline: list[str], block: int):
    """(partitions, partition lines, skip lines): partitions as (target, partno, start,
    size); partition lines as (target, text); skip lines as (target, partno, start)."""
    images = catalog.kind_images(KINDS)
    with boot(variant, [qemu.Drive(i.path, "scsi-hd", block) for i in images], cmdline,
              f"noncd-{block}-{variant}") as vm:
        disks = guest.parse_sd(vm.check(guest.SD_CMD))
        dmesg = vm.check("dmesg")
    names = {d.name: t for t, d in disks.items()}
    parts = [(t, *p) for t, d in disks.items() for p in d.parts]
    lines, skips = [], []
    for line in dmesg.splitlines():
        m = re.search(r"\b(sd[a-z]+): (.*)$", line)
        if not m or m.group(1) not in names:
            continue
        target, text = names[m.group(1)], m.group(2)
        if re.match(r"(sd[a-z]+\d+|<|>|\[\w+\]| )+$", text):
            lines.append((target, re.sub(r"sd[a-z]+", "", text)))
        elif SKIP.match(text):
            n, start, lbs = map(int, SKIP.match(text).groups())
            assert lbs == block, line
            skips.append((target, n, start))
    assert len(names) == len(KINDS), f"{len(names)} sd disks, {len(KINDS)} images"
    return sorted(parts), sorted(lines), sorted(skips)


def _aligned(parts: list[tuple], block: int) -> tuple[list[tuple], list[tuple]]:
    """The unpatched view through the alignment rule, computed on the host."""
    keep, skipped = [], []
    for target, n, start, size in parts:
        layout = oracle.on_device([oracle.Part(n, start, size)], block)
        keep += [(target, p.number, p.start, p.size) for p in layout.parts]
        skipped += [(target, p.number, p.start) for p in layout.skipped if p.start % (block // 512)]
    return sorted(keep), sorted(skipped)


@pytest.mark.parametrize("block", [512, 2048, 4096])
def test_scsi_hd_disks_partition_as_unpatched_but_aligned(boot, block):
    before, before_lines, before_skips = _view(boot, "unpatched", [], block)
    after, after_lines, after_skips = _view(boot, "srpart", ["sr_mod.partscan=1"], block)
    assert before, "no partitions on any scsi-hd: the comparison would prove nothing"
    assert before_skips == []
    want, want_skips = _aligned(before, block)
    if block == 512:
        assert want == before and want_skips == []
    assert after == want
    assert after_skips == want_skips
    assert after_lines == before_lines, "the partition lines changed on sd"
