"""The QEMU command line: the one way srpart boots a VM."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SrpartError

QEMU = "qemu-system-x86_64"
# How long the guest init waits for the drives to be probed before it prints
# READY with what it has (srpart.probe_wait=); vm.BOOT_TIMEOUT is derived from it.
PROBE_WAIT_S = 90
# The name of the command channel's port (srpart.cmd_port=): the guest init
# finds its device (/dev/vportNpM) by it in /sys/class/virtio-ports/*/name.
CMD_PORT = "srpart.cmd"
# Boot parameters that only shorten a boot under TCG (make bench's phases,
# 8 drives, median of 9 boots: 1.80 s -> 1.50 s QEMU start to verdict):
# - noapictimer: the local APIC timer's calibration against the PIT took
#   0.22 s of every boot (setup_boot_APIC_clock, sampled with QMP); with one
#   CPU the PIT's tick serves as the clock event device.
# - no_timer_check: no test of the IO-APIC timer interrupt (what KVM guests do).
# - i8042.nokbd i8042.noaux: no PS/2 keyboard and mouse. The mouse's probe
#   took 0.5 s of the guest's one CPU after every boot, and its reset in
#   device_shutdown() ~0.1 s of every `reboot -f`; nothing types into a guest.
FAST_BOOT = ["noapictimer", "no_timer_check", "i8042.nokbd", "i8042.noaux"]


def kvm_usable(cpuinfo: str | None = None, dev: str = "/dev/kvm") -> bool:
    """KVM only when the CPU advertises vmx/svm and /dev/kvm is writable."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    return bool(flags & {"vmx", "svm"}) and os.access(dev, os.R_OK | os.W_OK)


def choose_accel(requested: str | None = None) -> str:
    """'tcg' unless KVM is proven usable; SRPART_ACCEL or --accel forces one."""
    req = requested or os.environ.get("SRPART_ACCEL", "auto")
    if req not in ("auto", "kvm", "tcg"):
        raise SrpartError(f"unknown accelerator {req!r}: choose auto, kvm or tcg")
    if req == "auto":
        return "kvm" if kvm_usable() else "tcg"
    return req


@dataclass(frozen=True)
class Drive:
    """One drive on the virtio-scsi bus: a scsi-cd (default) or a scsi-hd."""
    image: Path | None          # None: an empty CD drive
    kind: str = "scsi-cd"
    block_size: int | None = None   # a scsi-hd's logical (and physical) block size
    read_errors: tuple[int, ...] = ()   # 512-byte sectors whose reads fail with EIO (blkdebug)
    serial: str | None = None   # the unit serial number (VPD page 0x80) udev's scsi_id reads


# The 512-byte sectors that begin 2048-byte blocks 0..15 (read_errors): blkdebug
# then fails every read of those blocks, as a damaged disc's or, to a data read,
# an audio CD's first blocks fail.
FIRST_BLOCKS = tuple(range(0, 64, 4))


def _blkdebug_rules(sectors: tuple[int, ...]) -> str:
    """blkdebug rules: every read request that touches one of `sectors` fails with EIO.
    raw's reads raise the read_aio event on the node below it."""
    return ",".join(f"inject-error.{n}.event=read_aio,inject-error.{n}.sector={s},"
                    f"inject-error.{n}.errno=5,inject-error.{n}.once=off"
                    for n, s in enumerate(sectors))


@dataclass
class QemuConfig:
    kernel: Path
    initrd: Path
    drives: list[Drive] = field(default_factory=list)
    cmdline: list[str] = field(default_factory=list)
    accel: str = "tcg"
    memory_mb: int = 256
    kernel_log: Path | None = None
    qmp_socket: Path | None = None   # -qmp unix:<path>
    paused: bool = False             # -S: CPUs wait for QMP `cont`

    def argv(self) -> list[str]:
        append = ["console=ttyS0", "panic=-1", f"srpart.drives={self.count('scsi-cd')}",
                  f"srpart.disks={self.count('scsi-hd')}", f"srpart.probe_wait={PROBE_WAIT_S}",
                  f"srpart.cmd_port={CMD_PORT}",
                  *FAST_BOOT, *self.cmdline]
        argv = [
            QEMU, "-machine", f"q35,accel={self.accel}", *(["-cpu", "host"] if self.accel == "kvm" else []),
            "-m", str(self.memory_mb), "-smp", "1",
            "-nodefaults", "-no-user-config", "-display", "none",
            # ttyS0: the kernel console, every message, into kernel_log.
            "-serial", f"file:{self.kernel_log}" if self.kernel_log else "null",
            # The command channel, on stdio: a virtio serial port (CMD_PORT).
            # A 16550 under TCG left one command in fifteen waiting for an
            # interrupt that came only with more input; the port's
            # virtqueue has no trigger level, and no tty line discipline
            # (no echo, no 4096-byte canonical line).
            "-device", "virtio-serial-pci,id=vser0",
            "-chardev", "stdio,id=cmd0,signal=off",
            "-device", f"virtserialport,bus=vser0.0,chardev=cmd0,name={CMD_PORT}",
            "-no-reboot",
            *(["-qmp", f"unix:{self.qmp_socket},server=on,wait=off"] if self.qmp_socket else []),
            *(["-S"] if self.paused else []),
            "-kernel", str(self.kernel), "-initrd", str(self.initrd),
            "-append", " ".join(append),
        ]
        if self.drives:
            argv += ["-device", "virtio-scsi-pci,id=scsi0"]
        for i, d in enumerate(self.drives):
            if d.image is not None:
                argv += ["-blockdev", f"driver=file,node-name=file{i},filename={d.image},read-only=on"]
                below = f"file{i}"
                if d.read_errors:
                    argv += ["-blockdev", f"driver=blkdebug,node-name=dbg{i},image=file{i},"
                                          f"read-only=on,{_blkdebug_rules(d.read_errors)}"]
                    below = f"dbg{i}"
                argv += ["-blockdev", f"driver=raw,node-name=drive{i},file={below},read-only=on"]
            dev = f"{d.kind},bus=scsi0.0,id={d.kind.replace('scsi-', '')}{i},channel=0,scsi-id={i},lun=0"
            if d.image is not None:
                dev += f",drive=drive{i}"
            if d.serial:
                dev += f",serial={d.serial}"
            if d.block_size:
                dev += f",logical_block_size={d.block_size},physical_block_size={d.block_size}"
            argv += ["-device", dev]
        return argv

    def count(self, kind: str) -> int:
        return sum(1 for d in self.drives if d.kind == kind)


def require_qemu() -> str:
    path = shutil.which(QEMU)
    if not path:
        raise SrpartError(f"{QEMU} not found: apt-get install qemu-system-x86")
    return path
