"""The guest the rig boots is the one make bench measured (issue 15).

Each of these settings only shortens a boot or a command under TCG, so a
change that drops one breaks no other test: it only makes every VM slower.
These tests read the booted guest, so such a change fails here instead.
"""
from __future__ import annotations

import pytest

from fixtures import catalog
from harness import qemu

# one VM per kernel, shared by the tests of this file: on one xdist worker
pytestmark = [pytest.mark.vm, pytest.mark.xdist_group("rig")]


@pytest.fixture(scope="module")
def rig_vm(boot):
    with boot("srpart", [i.path for i in catalog.drive_images(1)], ["sr_mod.partscan=1"],
              "rig") as vm:
        yield vm


def test_the_command_channel_is_the_virtio_port(rig_vm):
    """Commands and their output go over QEMU's virtio serial port, not a 16550:
    under TCG ttyS1 left one command in fifteen waiting for an interrupt that
    only more input brought (issue 29). The shell's stdout is the port
    harness/qemu.py names."""
    dev = rig_vm.check("readlink /proc/self/fd/1").strip()
    assert dev.startswith("/dev/vport"), f"the channel is {dev}"
    name = rig_vm.check(f"cat /sys/class/virtio-ports/{dev.removeprefix('/dev/')}/name").strip()
    assert name == qemu.CMD_PORT


def test_a_command_line_longer_than_a_tty_line_runs(rig_vm):
    """No line discipline on the port: a 10,000-byte line (N_TTY's canonical
    buffer holds 4,095 and a longer line never ended) comes back whole."""
    word = "x" * 10000
    assert rig_vm.check(f"echo {word} | wc -c").strip() == str(len(word) + 1)


def test_no_ps2_keyboard_or_mouse(rig_vm):
    """No serio port: the PS/2 mouse probe took 0.5 s of CPU after every boot
    and its reset ~0.1 s of every `reboot -f`."""
    assert rig_vm.check("ls /sys/bus/serio/devices 2>/dev/null | wc -l").strip() == "0"


def test_the_clock_event_device_is_the_pit(rig_vm):
    """No local APIC timer: calibrating it took 0.22 s of every boot."""
    devices = rig_vm.check("cat /sys/devices/system/clockevents/clockevent0/current_device")
    assert devices.strip() == "pit"
