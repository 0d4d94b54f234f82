"""Disks that are not CDs are untouched by the series (issue 3).

Every image kind, attached as a scsi-hd (no cdrom_device_info), must give
exactly what the unpatched kernel gives: the same partitions at the same
offsets and the same partition lines. With 512-byte blocks that is the
everyday case; with 2048-byte blocks (as on some MO drives and 4Kn-style
disks) it shows that the 512-byte MBR/GPT readings and the alignment rule
are confined to optical media. Disks are keyed by SCSI target, as sd names
them in probe order.
"""
from __future__ import annotations

import re

import pytest

from fixtures import catalog

pytestmark = [pytest.mark.vm, pytest.mark.xdist_group("media-noncd")]

KINDS = catalog.MIXED + catalog.REST

# Per sd disk: "target name"; per partition: "target partno start size".
DISKS_CMD = ("for d in /sys/block/sd*; do t=$(readlink -f $d/device); t=${t##*/}; "
             "echo disk $t ${d##*/}; for p in $d/${d##*/}*; do [ -e $p/partition ] || continue; "
             "echo part $t $(cat $p/partition) $(cat $p/start) $(cat $p/size); done; done")


def _view(boot, variant: str, cmdline: list[str], block: int) -> tuple[list[tuple], list[tuple]]:
    images = catalog.kind_images(KINDS)
    with boot(variant, [i.path for i in images], cmdline, f"noncd-{block}-{variant}", "scsi-hd",
              block) as vm:
        out = vm.check(DISKS_CMD)
        dmesg = vm.check("dmesg")
    names, parts = {}, []
    for line in out.splitlines():
        f = line.split()
        if f[:1] == ["disk"]:
            names[f[2]] = f[1]
        elif f[:1] == ["part"]:
            parts.append((f[1], int(f[2]), int(f[3]), int(f[4])))
    lines = []     # partition lines and the block layer's complaints, per target
    for line in dmesg.splitlines():
        m = re.search(r"\b(sd[a-z]+): (.*)$", line)
        if m and m.group(1) in names and (
                re.match(r"(sd[a-z]+\d+|<|>|\[\w+\]| )+$", m.group(2)) or "EOD" in m.group(2)
                or "block size" in m.group(2)):
            lines.append((names[m.group(1)], re.sub(r"sd[a-z]+", "", m.group(2))))
    assert len(names) == len(KINDS), f"{len(names)} sd disks, {len(KINDS)} images"
    return sorted(parts), sorted(lines)


@pytest.mark.parametrize("block", [512, 2048])
def test_scsi_hd_disks_partition_as_unpatched(boot, block):
    before = _view(boot, "unpatched", [], block)
    after = _view(boot, "srpart", ["sr_mod.partscan=1"], block)
    assert before[0], "no partitions on any scsi-hd: the comparison would prove nothing"
    assert after == before
