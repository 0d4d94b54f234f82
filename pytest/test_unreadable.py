"""Unreadable media with partition scanning on (issue 11).

A damaged disc, or an audio CD as a data read sees it, fails every read of its
first blocks: QEMU's blkdebug fails each read that touches one of them. A
zero-length medium has no blocks at all. Opening such a drive reads nothing on
the unpatched kernel; with sr_mod.partscan=1 the partition scan would read the
first blocks, and every failed read is logged. So, for the same boot and the
same opens: no partition, no more kernel log lines than the unpatched kernel
prints, no hang (every guest command has a timeout), and the next medium in the
same drive is scanned as usual.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from fixtures import catalog
from harness import guest, oracle, qemu
from harness.vm import VM

pytestmark = [pytest.mark.vm, pytest.mark.xdist_group("unreadable")]  # one unpatched reference per kernel

MARK = "srpart-unreadable-opens"
ON = ["sr_mod.partscan=1"]


def _drives(tmp_path: Path) -> list[qemu.Drive]:
    bad = qemu.Drive(catalog.first("mbr2048").path.resolve(), read_errors=qemu.FIRST_BLOCKS)
    empty = tmp_path / "zero-length.iso"
    empty.write_bytes(b"")
    return [bad, qemu.Drive(empty)]


def _noise(lines: list[str]) -> list[str]:
    return [ln for ln in lines if any(n in ln for n in guest.MEDIA_NOISE)]


# What the opens may print that concerns the drives; a mouse probe or a
# clocksource switch landing in the same second (a loaded machine, TCG) does not
STORAGE = re.compile(r"\bsr\d|\bscsi\b|\bsr \d|I/O error|Buffer I/O|blk_|partition|cdrom|"
                     r"Sense|medium|EOD", re.I)


def _storage(lines: list[str]) -> list[str]:
    return [ln for ln in lines if STORAGE.search(ln)]


def _more(lines: list[str], ref: list[str]) -> list[str]:
    """The lines of `lines` the reference did not print (as many times), timestamps
    aside: the same line is the same message, a count would let one replace another."""
    def text(ln: str) -> str:
        return re.sub(r"^\[\s*[\d.]+\]\s*", "", ln)
    return sorted((Counter(map(text, lines)) - Counter(map(text, ref))).elements())


def _partscan_attr(vm: VM, kernel: str) -> str | None:
    """/sys/block/srN/partscan of both drives: the attribute exists from 6.10 on
    (and must then be readable), 6.1 has none (and must not)."""
    r = vm.run("cat /sys/block/sr0/partscan /sys/block/sr1/partscan")
    has = tuple(map(int, kernel.split(".")[:2])) >= (6, 10)
    assert (r.status == 0) == has, f"/sys/block/srN/partscan on {kernel}: {r.output!r}"
    return " ".join(r.output.split()) if has else None


def _boot_and_open(vm: VM) -> tuple[list[str], list[str]]:
    """(the boot's media noise, every kernel line about the drives the opens printed)."""
    boot = _noise(vm.check("dmesg").splitlines())
    vm.check(f"echo {MARK} > /dev/kmsg")
    # the opens succeed on every kernel (the medium is there, only unreadable;
    # a zero-length one is an empty medium, not an absent one)
    for _ in range(3):
        vm.check("srprobe /dev/sr0 /dev/sr1")             # udev's O_NONBLOCK opens
    vm.check(": < /dev/sr0")                              # blocking opens
    vm.check(": < /dev/sr1")
    log = vm.check("dmesg").splitlines()
    at = max(i for i, ln in enumerate(log) if MARK in ln)
    return boot, _storage(log[at + 1:])


@pytest.fixture(scope="session")
def unpatched_noise(boot, tmp_path_factory) -> tuple[list[str], list[str]]:
    """What the unpatched kernel logs for the same drives: once per kernel, not per sr build."""
    with boot("unpatched", _drives(tmp_path_factory.mktemp("unreadable")), [],
              "unreadable-unpatched") as ref:
        return _boot_and_open(ref)


def test_unreadable_media_are_not_scanned_and_stay_quiet(lvm, tmp_path, unpatched_noise, kernel):
    ref_boot, ref_opens = unpatched_noise

    vm = lvm(_drives(tmp_path), ON)
    boot, opens = _boot_and_open(vm)
    assert guest.drive_partitions_of(vm, 0) == [] and guest.drive_partitions_of(vm, 1) == []
    assert not _more(boot, ref_boot), f"the boot logged {_more(boot, ref_boot)} beyond unpatched's"
    assert not _more(opens, ref_opens), \
        f"the opens logged {_more(opens, ref_opens)} beyond unpatched's"
    # the attribute says the drives are scanned, whatever medium they hold: sr skips
    # the scan of an unreadable medium per medium (GD_SKIP_PART_SCAN), it does not
    # turn scanning off (v3 did, and BLKRRPART then failed: bug B)
    want = None if kernel == "6.1" else "1 1"
    assert _partscan_attr(vm, kernel) == want

    # the next medium in the same drives is scanned as usual
    good = [catalog.first("mbr2048"), catalog.first("gpt512-xorriso")]
    for k, img in enumerate(good):
        vm.qmp.change_medium(f"cd{k}", img.path)
        vm.check(f"srprobe /dev/sr{k}")
        assert guest.drive_partitions_of(vm, k) == oracle.triples_of(img), f"sr{k} after {img.kind}"
    assert _partscan_attr(vm, kernel) == want
