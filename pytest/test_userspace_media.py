"""Media change and eject under Debian's udev: the links follow the disc (issue 13).

Nothing in the guest pokes the drive: the kernel polls it every 2 s because
60-block.rules sets block.events_dfl_poll_msecs, udev handles the change
event of srN and the partitions the kernel adds and removes. The time from
the QMP command until the links are right is measured, not asserted: it goes
to build/logs/udev-media.tsv, which make userspace-report reads.
"""
from __future__ import annotations

import time

import pytest

from fixtures import catalog
from harness import link_oracle, paths
from harness.udev_view import wait_links

pytestmark = [pytest.mark.vm, pytest.mark.xdist_group("udev-media")]

WAIT_S = 30.0


def _want(img) -> dict[str, set[str]]:
    return link_oracle.owners(link_oracle.devices(img, 0), discs_win=True)


def _record(kernel: str, what: str, seconds: float) -> None:
    paths.LOGS.mkdir(parents=True, exist_ok=True)
    with open(paths.LOGS / "udev-media.tsv", "a") as fh:
        fh.write(f"{kernel}\t{what}\t{seconds:.2f}\n")


@pytest.mark.parametrize("build", ["srpart", "srpart-module"])
def test_media_change_moves_the_links_and_eject_removes_them(boot, kernel, build):
    first, second = catalog.first("mbr2048"), catalog.first("gpt2048")
    with boot(build, [first.path], ["sr_mod.partscan=1"], f"udev-media-{build}", qmp=True,
              userspace="udev-srpart") as vm:
        want = _want(first)
        _, got = wait_links(vm, want, WAIT_S)
        assert set(got) == set(want), f"at boot: {sorted(got)} != oracle {sorted(want)}"

        t0 = time.monotonic()
        vm.qmp.change_medium("cd0", second.path, force=True)
        want = _want(second)
        seconds, got = wait_links(vm, want, WAIT_S)
        assert set(got) == set(want), (f"{seconds:.1f} s after the change: {sorted(got)} != "
                                       f"oracle {sorted(want)}")
        _record(kernel, f"{build} change", time.monotonic() - t0)

        t0 = time.monotonic()
        vm.qmp.change_medium("cd0", None)
        seconds, got = wait_links(vm, {}, WAIT_S)
        assert got == {}, f"{seconds:.1f} s after the eject: {sorted(got)}"
        _record(kernel, f"{build} eject", time.monotonic() - t0)
