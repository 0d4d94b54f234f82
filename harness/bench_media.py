"""Partition visibility latency after a media change (part of `make bench`).

The host swaps the medium of one drive over QMP (blockdev-change-medium,
alternating a Sun-labelled and an MBR image) and times how long it takes
until /sys/block/sr0/sr0p1 shows the new medium's first partition (its
start, from the host oracle):

  poll  the kernel's own media polling (block.events_dfl_poll_msecs) sends a
        DISK_MEDIA_CHANGE uevent; a udev stand-in (bin/srhotplug as the
        kernel's uevent helper: the test kernel has no netlink) opens the
        drive, which rescans
  open  no polling: an application opens /dev/sr0 right after the change

Times include the serial round trip to the guest (a few ms under TCG).
"""
from __future__ import annotations

import statistics
import time

from . import guest, oracle
from .vm import VM, boot_spec

POLL_MS = 500


def _first_start(img) -> int:
    return oracle.expected(img.table, img.path).parts[0].start


def measure(kernel: str, swaps: int = 6) -> dict[str, list[float]]:
    from fixtures import catalog

    imgs = [catalog.first(k) for k in ("sun-xorriso", "mbr2048")]
    assert _first_start(imgs[0]) != _first_start(imgs[1])
    out: dict[str, list[float]] = {}
    for mode, extra in (("poll", [f"block.events_dfl_poll_msecs={POLL_MS}"]), ("open", [])):
        spec = boot_spec(kernel, "srpart", [imgs[0].path], ["sr_mod.partscan=1", *extra], qmp=True)
        times = []
        with VM(spec, f"bench-media-{mode}") as vm:
            if mode == "poll":
                vm.check("echo /bin/srhotplug > /sys/kernel/uevent_helper")
            for i in range(swaps):
                img = imgs[(i + 1) % 2]
                want = _first_start(img)
                cond = f'[ "$(cat /sys/block/sr0/sr0p1/start 2>/dev/null)" = {want} ]'
                t = time.monotonic()
                vm.qmp.change_medium("cd0", img.path)
                if mode == "open":
                    vm.check("srprobe /dev/sr0")
                vm.check(guest.wait_cmd(cond, 30), timeout=40)
                times.append(time.monotonic() - t)
        out[mode] = times
    return out


def report(kernel: str) -> list[str]:
    r = measure(kernel)
    lines = []
    for mode, label in (("poll", f"kernel polling every {POLL_MS} ms + udev-style open"),
                        ("open", "no polling, open right after the change")):
        t = r[mode]
        lines.append(f"media change -> partitions, {label}: {statistics.median(t) * 1000:.0f} ms "
                     f"(median of {len(t)}; min {min(t) * 1000:.0f}, max {max(t) * 1000:.0f})")
    return lines
