"""The 1-8 drive matrix with sr_mod.partscan=1: one boot per drive count.

Drive K holds a distinct image (label SRPART_D<K>_<KIND>). Expected
partitions come from the host-side oracle (util-linux reading the image
bytes), never from the guest.
"""
from __future__ import annotations

import re

import pytest

from fixtures import catalog
from harness import guest, oracle

# What the tests read must be as quiet as the boot (conftest.kernel_log_slice).
pytestmark = [pytest.mark.vm, pytest.mark.quiet_kernel(*guest.MEDIA_NOISE)]

DRIVES = [pytest.param(n, id=f"{n}drive{'s' if n > 1 else ''}",
                       marks=pytest.mark.xdist_group(f"partscan-on-{n}")) for n in range(1, 9)]


@pytest.fixture(scope="module", params=DRIVES)
def on(request, partscan_on):
    """A guest booted with n drives and partscan on, shared by this module's tests.
    Leaving the `with` fails on panic/Oops/BUG/WARNING in the log, or no clean power-off."""
    n = request.param
    images = catalog.drive_images(n)
    with partscan_on(images, f"matrix-on-{n}") as vm:
        yield n, images, vm


def test_partscan_parameter_is_on(on):
    _, _, vm = on
    assert vm.check("cat /sys/module/sr_mod/parameters/partscan").strip() == "Y"


def test_whole_disks_keep_major_11(on):
    n, _, vm = on
    rows = guest.parse_proc_partitions(vm.check("cat /proc/partitions"))
    on_11 = sorted((r.name, r.minor) for r in rows if r.major == 11)
    assert on_11 == [(f"sr{k}", k) for k in range(n)]


def test_each_drive_holds_its_own_image(on):
    n, images, vm = on
    for k in range(n):
        label = vm.check(guest.volume_label_cmd(f"/dev/sr{k}")).strip()
        assert label == images[k].volume_label, f"sr{k}"


def test_partitions_use_extended_devt_and_match_oracle(on):
    n, images, vm = on
    proc = guest.parse_proc_partitions(vm.check("cat /proc/partitions"))
    parts = [r for r in proc if r.name.startswith("sr") and "p" in r.name]
    assert parts, "no sr partitions in /proc/partitions"
    for r in parts:
        assert r.major == 259, f"{r.name} is {r.major}:{r.minor}, not on the extended major"
        assert re.fullmatch(r"sr\d+p\d+", r.name), r.name
    sysparts = guest.parse_sys_partitions(vm.check(guest.PARTITIONS_CMD))
    assert sorted(p.name for p in sysparts) == sorted(r.name for r in parts)
    for k in range(n):
        want = oracle.triples_of(images[k])
        got = sorted((int(p.name.split("p")[1]), p.start, p.size)
                     for p in sysparts if p.name.startswith(f"sr{k}p"))
        assert got == want, f"sr{k} ({images[k].table}): guest {got} != oracle {want}"
    minors = [(p.major, p.minor) for p in sysparts]
    assert len(set(minors)) == len(minors), "two partitions share a dev_t"


def test_scd1_reaches_the_second_drive(on):
    n, images, vm = on
    vm.check("mknod /tmp/scd1 b 11 1")
    r = vm.run(guest.volume_label_cmd("/tmp/scd1") + " && echo")
    if n == 1:
        # no second drive: 11:1 must not lead anywhere (in the 2004 scheme it was sr0p1)
        assert r.output.strip() == "", f"11:1 reads {r.output.strip()!r} with one drive"
        opened = vm.run("dd if=/tmp/scd1 of=/dev/null bs=2048 count=1")
        assert opened.status != 0 and "No such device" in opened.output
    else:
        assert r.status == 0 and r.output.strip() == images[1].volume_label


def test_data_partitions_mount_and_read(on):
    n, images, vm = on
    # catalog.DRIVE_KINDS hold data partitions (test_fixtures checks each
    # kind against catalog.NO_DATA): a set without one would read nothing
    assert any(images[k].data for k in range(n)), "no data partition on these drives"
    for k in range(n):
        for part in images[k].data:
            dev = f"/dev/sr{k}p{part.number}"
            out = vm.check(f"mkdir -p /mnt/x && mount -t {part.fstype} -o ro {dev} /mnt/x && "
                           f"sha256sum /mnt/x/{part.file}; rc=$?; umount /mnt/x; exit $rc")
            assert out.split()[0] == part.sha256, f"{dev}: {out!r}"
