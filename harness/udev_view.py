"""What Debian's udev made of the sr drives in a running guest, and waiting for it.

One vocabulary for the tests (pytest/test_userspace*.py), the report
(harness/userspace_report.py) and `srpart boot --userspace udev`: the
commands live in harness/guest.py, this module only reads them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from . import guest, link_oracle, qemu

# the links the oracle predicts (by-path and by-id are checked by relation)
OWN = tuple(f"{k}/" for k in link_oracle.LINK_KINDS)


def drives(images) -> list[qemu.Drive]:
    """One scsi-cd per image, each with a unit serial number as real drives have
    (QEMU's scsi-cd has none unless given one): udev's scsi_id makes by-id of it."""
    return [qemu.Drive(i.path.resolve(), serial=f"SRPART{k}") for k, i in enumerate(images)]


@dataclass
class View:
    links: dict[str, str]       # "by-label/X" -> "sr0p1", every link to an sr device
    lsblk: dict[str, dict]      # device -> lsblk columns


def read(vm) -> View:
    vm.check("udevadm settle --timeout=30")
    return View(guest.parse_links(vm.check(guest.LINKS_CMD)),
                guest.parse_lsblk(vm.check(guest.LSBLK_JSON_CMD)))


def own_links(links: dict[str, str]) -> dict[str, str]:
    return {link: dev for link, dev in links.items() if link.startswith(OWN)}


def matches(got: dict[str, str], want: dict[str, set[str]]) -> bool:
    return set(got) == set(want) and all(got[k] in want[k] for k in got)


def wait_links(vm, want: dict[str, set[str]], limit: float = 30.0) -> tuple[float, dict[str, str]]:
    """Poll until the guest's own links match `want` or `limit` seconds pass:
    (seconds waited, the links last read)."""
    t0 = time.monotonic()
    while True:
        vm.check("udevadm settle --timeout=10")
        got = own_links(guest.parse_links(vm.check(guest.LINKS_CMD)))
        if matches(got, want) or time.monotonic() - t0 > limit:
            return time.monotonic() - t0, got
        time.sleep(0.25)
