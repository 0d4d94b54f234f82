"""CONFIG_BLK_DEV_SR_PARTSCAN=y: without sr_mod.partscan= the discs are scanned.

The srpart-partscan-y kernel differs from srpart in that option only (only
sr.o changes). Absent and =1 give the oracle's partitions on every drive;
=0 gives what the unpatched kernel shows (test_partscan_off.py, 1-8 drives).
"""
from __future__ import annotations

import pytest

from fixtures import catalog
from harness import guest, oracle

pytestmark = pytest.mark.vm


@pytest.mark.parametrize("cmdline", [[], ["sr_mod.partscan=1"]], ids=["absent", "partscan=1"])
def test_the_config_option_turns_the_default_on(boot, cmdline):
    images = catalog.drive_images(3)
    name = f"partscan-y-{'absent' if not cmdline else 'on'}"
    with boot("srpart-partscan-y", [i.path for i in images], cmdline, name) as vm:
        assert vm.check("cat /sys/module/sr_mod/parameters/partscan").strip() == "Y"
        sysparts = guest.parse_sys_partitions(vm.check(guest.PARTITIONS_CMD))
    assert all(p.major == 259 for p in sysparts)
    for k, img in enumerate(images):
        want = oracle.triples_of(img)
        assert want, f"fixture {img.kind} has no partition to show"
        assert guest.drive_partitions(sysparts, k) == want, f"sr{k} ({img.kind})"
