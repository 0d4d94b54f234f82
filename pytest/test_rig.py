"""The guest the rig boots is the one make bench measured (issue 15).

Each of these settings only shortens a boot or a command under TCG, so a
change that drops one breaks no other test: it only makes every VM slower.
These tests read the booted guest, so such a change fails here instead.
"""
from __future__ import annotations

import pytest

from fixtures import catalog

# one VM per kernel, shared by the tests of this file: on one xdist worker
pytestmark = [pytest.mark.vm, pytest.mark.xdist_group("rig")]


@pytest.fixture(scope="module")
def rig_vm(boot):
    with boot("srpart", [i.path for i in catalog.drive_images(1)], ["sr_mod.partscan=1"],
              "rig") as vm:
        yield vm


def test_the_command_channel_interrupts_at_every_byte(rig_vm):
    """ttyS1 raises its receive interrupt at 1 byte: at the 8250 driver's 8 the
    tail of a command line waited for the 16550's character timeout (a 0.2 s
    wake-up newline for 25 of 60 commands in a loaded guest)."""
    assert rig_vm.check("cat /sys/class/tty/ttyS1/rx_trig_bytes").strip() == "1"


def test_no_ps2_keyboard_or_mouse(rig_vm):
    """No serio port: the PS/2 mouse probe took 0.5 s of CPU after every boot
    and its reset ~0.1 s of every `reboot -f`."""
    assert rig_vm.check("ls /sys/bus/serio/devices 2>/dev/null | wc -l").strip() == "0"


def test_the_clock_event_device_is_the_pit(rig_vm):
    """No local APIC timer: calibrating it took 0.22 s of every boot."""
    devices = rig_vm.check("cat /sys/devices/system/clockevents/clockevent0/current_device")
    assert devices.strip() == "pit"
