"""The guest the rig boots is the one make bench measured (issue 15).

Each of these settings only shortens a boot or a command under TCG, so a
change that drops one breaks no other test: it only makes every VM slower.
These tests read the booted guest, so such a change fails here instead.
"""
from __future__ import annotations

import time

import pytest

from fixtures import catalog
from harness import qemu
from harness import vm as vm_module
from harness.console import GuestError

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


def test_a_guest_without_its_channel_fails_at_once(boot):
    """Negative control of the channel: the init finds no port of the name it is
    given, says so in the kernel log (a bad pattern) and powers off; the boot
    fails in one line at once, not at BOOT_TIMEOUT. The later srpart.* words
    of the command line override the harness's own."""
    vm = boot("srpart", [], ["srpart.cmd_port=no.such.port", "srpart.probe_wait=2"],
              "rig-no-channel")
    t0 = time.monotonic()
    with pytest.raises(GuestError, match=r"bad pattern \(init channel\)"):
        vm.start()
    assert time.monotonic() - t0 < vm_module.BOOT_TIMEOUT / 2


def test_an_injected_warning_fails_its_log_slice(boot):
    """Negative control of the kernel log check, end to end: a WARNING line
    reaches the log through the real serial console, and the command that
    wrote it or, at the latest, the next mark (conftest's kernel_log_slice
    cuts every shared VM's log with these marks) fails naming the pattern."""
    with boot("srpart", [], [], "rig-injected-warning") as vm:
        vm.mark("begin injected")
        with pytest.raises(GuestError, match=r"bad pattern \(WARNING\)"):
            vm.check("echo 'WARNING: CPU: 0 PID: 1 at srpart/injected.c:1 srpart_injected' "
                     "> /dev/kmsg")
            vm.mark("end injected")
