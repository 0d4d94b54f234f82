"""partscan off, or the parameter absent: exactly what the unpatched kernel shows.

For 1 to 8 drives, boot the unpatched kernel of each version (same tarball, same
config) and the srpart kernel with sr_mod.partscan=0 and with no parameter, sr
built in and as modules (sr_mod.ko loaded by init, as udev would), and compare
what user space sees.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from fixtures import catalog
from harness import guest

# Reading the discs must stay quiet, in each test's own kernel log slice.
pytestmark = [pytest.mark.vm, pytest.mark.quiet_kernel(*guest.MEDIA_NOISE)]

CONFIGS = {  # name -> (kernel variant, command line)
    "unpatched": ("unpatched", []),
    "partscan=0": ("srpart", ["sr_mod.partscan=0"]),
    "absent": ("srpart", []),
    # sr_mod.ko loaded by init as udev would, without and with partscan=0
    "module-absent": ("srpart-module", ["srpart.modprobe=sr_mod"]),
    "module-partscan=0": ("srpart-module", ["srpart.modprobe=sr_mod", "sr_mod.partscan=0"]),
}
OFF = [c for c in CONFIGS if c != "unpatched"]
DRIVES = [pytest.param(n, id=f"{n}drive{'s' if n > 1 else ''}",
                       marks=pytest.mark.xdist_group(f"partscan-off-{n}")) for n in range(1, 9)]
LS_DATE = re.compile(r"\s+[A-Z][a-z]{2}\s+\d+\s+(\d\d:\d\d|\d{4})\s+")


@dataclass(frozen=True)
class Snapshot:
    proc_partitions: str
    ls_dev: str            # ls -l /dev/sr*, with the node's date cut out
    sys_block: str         # ls /sys/block/sr*/
    param: str             # /sys/module/sr_mod/parameters/partscan, or "absent"


def snapshot(vm) -> Snapshot:
    ls = vm.check("ls -l /dev/sr*")
    param = vm.run("cat /sys/module/sr_mod/parameters/partscan")
    return Snapshot(
        proc_partitions=vm.check("cat /proc/partitions"),
        ls_dev="\n".join(LS_DATE.sub(" ", line) for line in ls.splitlines()),
        sys_block=vm.check("ls /sys/block/sr*/"),
        param=param.output.strip() if param.status == 0 else "absent",
    )


@pytest.fixture(scope="module", params=DRIVES)
def snaps(request, boot):
    n = request.param
    images = [i.path for i in catalog.drive_images(n)]
    out = {}
    for name, (variant, cmdline) in CONFIGS.items():
        vm = boot(variant, images, cmdline, f"off-{n}-{name.replace('=', '')}")
        with vm:
            out[name] = snapshot(vm)
    return n, out


def test_unpatched_kernel_shows_no_partitions(snaps):
    n, s = snaps
    rows = guest.parse_proc_partitions(s["unpatched"].proc_partitions)
    assert sorted((r.name, r.major, r.minor) for r in rows) == [(f"sr{k}", 11, k) for k in range(n)]
    assert s["unpatched"].param == "absent"


@pytest.mark.parametrize("config", OFF)
def test_no_partitions_when_off(snaps, config):
    n, s = snaps
    rows = guest.parse_proc_partitions(s[config].proc_partitions)
    assert [r for r in rows if r.major != 11 or "p" in r.name] == []
    assert s[config].param == "N"


@pytest.mark.parametrize("config", OFF)
def test_identical_to_unpatched(snaps, config):
    n, s = snaps
    assert s[config].proc_partitions == s["unpatched"].proc_partitions
    assert s[config].ls_dev == s["unpatched"].ls_dev
    assert s[config].sys_block == s["unpatched"].sys_block


@pytest.mark.xdist_group("partscan-off-control")
def test_negative_control_a_kernel_that_scans_is_not_identical(boot):
    """The comparison above must see a kernel that scans: the srpart kernel with
    sr_mod.partscan=1, read by the same snapshot(), differs from the unpatched
    kernel's in /proc/partitions, /dev and /sys/block."""
    images = [i.path for i in catalog.drive_images(2)]
    snaps = {}
    for name, (variant, cmdline) in {"unpatched": CONFIGS["unpatched"],
                                     "scanning": ("srpart", ["sr_mod.partscan=1"])}.items():
        with boot(variant, images, cmdline, f"off-control-{name}") as vm:
            snaps[name] = snapshot(vm)
    a, b = snaps["unpatched"], snaps["scanning"]
    assert b.param == "Y"
    assert (a.proc_partitions != b.proc_partitions, a.ls_dev != b.ls_dev,
            a.sys_block != b.sys_block) == (True, True, True)
