"""Boot a kernel with drives in QEMU and hand out its console.

    with VM(BootSpec(kernel, drives=[Drive(img)], cmdline=["sr_mod.partscan=1"]), "name") as vm:
        print(vm.check("cat /proc/partitions"))

Every VM's serial log is kept in build/logs/<name>.log.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import paths, qemu
from .cache import key_of
from .console import Console, GuestError, Result
from .errors import SrpartError
from .lock import locked
from .qmp import QMP

# The guest init waits up to qemu.PROBE_WAIT_S for its drives, after the kernel
# has booted (~2 s here, far more under a sanitizer kernel on a loaded machine)
BOOT_TIMEOUT = qemu.PROBE_WAIT_S + 30.0
SHUTDOWN_TIMEOUT = 30.0
# `reboot -f` as a subshell with no stdin, like every command (console.wrap):
# sent bare over the old serial channel, the guest's sh took 0.2-0.3 s before
# it ran it; this way the VM was gone 0.18 s after the line was sent instead
# of 0.43 s (make bench, the power-off phase).
REBOOT = "( reboot -f\n) </dev/null"


@dataclass
class BootSpec:
    kernel: Path
    initrd: Path
    drives: list[qemu.Drive] = field(default_factory=list)
    cmdline: list[str] = field(default_factory=list)
    accel: str | None = None
    memory_mb: int = 256
    qmp: bool = False        # a QMP socket, for trays, media and hotplug (VM.qmp)
    paused: bool = False     # start with -S; VM.start(prepare=...) sets up, then `cont`

    def config(self, kernel_log: Path | None = None, qmp_socket: Path | None = None
               ) -> qemu.QemuConfig:
        for d in self.drives:
            if d.image is not None and not Path(d.image).is_file():
                raise SrpartError(f"image not found: {d.image}")
        return qemu.QemuConfig(kernel=self.kernel, initrd=self.initrd, drives=list(self.drives),
                               cmdline=list(self.cmdline), accel=qemu.choose_accel(self.accel),
                               memory_mb=self.memory_mb, kernel_log=kernel_log,
                               qmp_socket=qmp_socket, paused=self.paused)


def _joined(initrd: Path, extra: list[Path]) -> Path:
    """The base initramfs followed by further archives (a userspace, lib/modules): the
    kernel unpacks concatenated cpio archives in order. Written next to the last one;
    another xdist worker's QEMU may be reading the file: write a new one and rename it
    over, under the same lock, never rewrite it in place."""
    if not extra:
        return initrd
    last = extra[-1]
    both = last.parent / ("initrd-" + "-".join(p.name.split(".")[0] for p in extra) + ".cpio.gz")
    lock = paths.BUILD / "locks" / f"initrd-{key_of(str(both))}.lock"
    with locked(lock):
        data = initrd.read_bytes() + b"".join(p.read_bytes() for p in extra)
        if not both.exists() or both.read_bytes() != data:
            tmp = both.with_name(f".{both.name}.{os.getpid()}")
            tmp.write_bytes(data)
            os.replace(tmp, both)
    return both


def boot_spec(kernel: str, variant: str, drives: list[Path | qemu.Drive | None],
              cmdline: list[str], accel: str | None = None, qmp: bool = False,
              paused: bool = False, userspace: str = "busybox") -> BootSpec:
    """The usual spec: a built kernel variant, the initramfs, one drive each. A
    drive is a qemu.Drive (the one description of a drive: scsi-cd or scsi-hd,
    block size, injected read errors); a bare path is a scsi-cd holding it,
    None an empty scsi-cd. `userspace` names one of harness/userspace.py's
    USERSPACES (busybox; Debian's udev with stock or with the project's rules)."""
    from . import initramfs, userspace as us
    from .kernel import built

    if variant.startswith("debian-"):          # Debian's own image (harness/dkms.py)
        from .dkms import debian_kernel
        k = debian_kernel(kernel, variant.removeprefix("debian-"))
    else:
        k = built(kernel, variant)
    extra = [p for p in (us.build(userspace), k.modules) if p is not None]
    initrd = _joined(initramfs.build(), extra)
    return BootSpec(kernel=k.bzimage, initrd=initrd,
                    drives=[d if isinstance(d, qemu.Drive) else
                            qemu.Drive(Path(d).resolve() if d else None) for d in drives],
                    cmdline=list(cmdline), accel=accel, qmp=qmp, paused=paused)


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:120] or "vm"


def qmp_socket_path() -> Path:
    """A fresh private directory for one VM's QMP socket, outside the checkout.

    A Unix socket path must fit sun_path (108 bytes on Linux). Under
    build/run/ it carried the checkout's depth and the test's name, and CI's
    clone at a longer path went over; the socket's place never mattered to
    anyone, only the logs under build/logs/ do."""
    return Path(tempfile.mkdtemp(prefix="srpart-qmp-")) / "qmp"


_RUNNING: "weakref.WeakSet[VM]" = weakref.WeakSet()


def running() -> list["VM"]:
    """The VMs this process has started and not yet stopped, oldest first."""
    return sorted((vm for vm in _RUNNING if vm.child is not None), key=lambda vm: vm._t0)


class VM:
    def __init__(self, spec: BootSpec, name: str) -> None:
        self.spec = spec
        self.name = safe_name(name)
        self.log = paths.LOGS / f"{self.name}.log"            # ttyS0: the kernel's serial console
        self.cmd_log = paths.LOGS / f"{self.name}.cmd.log"    # the channel: commands, output
        self.child = None
        self.console: Console | None = None
        self.qmp: QMP | None = None
        self.qmp_socket: Path | None = None     # set by start() when the spec wants QMP
        self._name_lock = None                  # held while running, see _claim_name()
        self.boot_seconds: float | None = None
        self.total_seconds: float | None = None
        self._t0 = 0.0

    def start(self, prepare: Callable[[QMP], None] | None = None) -> "VM":
        """Boot to the guest's READY marker. With a paused spec, `prepare(qmp)` runs
        before the CPUs start (set trays and media up before firmware and kernel)."""
        import pexpect

        qemu.require_qemu()
        paths.LOGS.mkdir(parents=True, exist_ok=True)
        self._claim_name()
        try:
            self.log.unlink(missing_ok=True)
            sock = None
            if self.spec.qmp or self.spec.paused:
                sock = self.qmp_socket = qmp_socket_path()
            argv = self.spec.config(self.log, sock).argv()
            logfh = open(self.cmd_log, "w", encoding="utf-8", errors="replace", buffering=1)
            logfh.write("# " + " ".join(argv) + "\n")
            self._t0 = time.monotonic()
            try:
                self.child = pexpect.spawn(argv[0], argv[1:], encoding="utf-8",
                                           codec_errors="replace", timeout=30, maxread=65536,
                                           searchwindowsize=None)
            except BaseException:
                logfh.close()
                raise
            self.child.logfile_read = logfh
            self.console = Console(self.child, self.log, self.cmd_log)
            if sock:
                self.qmp = QMP(sock)
            if self.spec.paused:
                if prepare:
                    prepare(self.qmp)
                self.qmp.cmd("cont")
            self.console.wait_ready(BOOT_TIMEOUT, qemu.PROBE_WAIT_S)
        except BaseException:
            self._kill()
            raise
        self.boot_seconds = time.monotonic() - self._t0
        _RUNNING.add(self)
        return self

    def mark(self, label: str) -> int:
        """Cut the kernel log here (Console.mark): the offset just past a marker line."""
        assert self.console, "VM not started"
        return self.console.mark(label)

    def kernel_log(self, begin: int, end: int | None = None) -> str:
        assert self.console, "VM not started"
        return self.console.kernel_log(begin, end)

    def run(self, command: str, timeout: float = 30) -> Result:
        assert self.console, "VM not started"
        return self.console.run(command, timeout)

    def check(self, command: str, timeout: float = 30) -> str:
        """Run `command`; fail unless it exits 0. Returns its output."""
        r = self.run(command, timeout)
        if r.status != 0:
            raise GuestError(f"guest command failed with status {r.status}: {command}\n{r.output}")
        return r.output

    def stop(self) -> None:
        """`reboot -f` (QEMU exits via -no-reboot), then a last scan of the kernel log."""
        if not self.child:
            return
        try:
            self.child.sendline(REBOOT)
            self.console.wait_exit(SHUTDOWN_TIMEOUT)
        finally:
            self.total_seconds = time.monotonic() - self._t0
            self._record_channel()
            self._kill()

    def _record_channel(self) -> None:
        """One line per VM in build/logs/channel.tsv (name, commands, the slowest
        start in seconds: line sent to its GO marker); pytest's summary adds them up."""
        c = self.console
        if c is None:
            return
        line = f"{self.name}\t{c.commands}\t{c.slowest_start:.3f}\n"
        self.cmd_log.parent.mkdir(parents=True, exist_ok=True)
        with open(paths.LOGS / "channel.tsv", "a") as fh:     # one short O_APPEND write
            fh.write(line)
        if self.child is not None and self.child.logfile_read:
            self.child.logfile_read.write(f"# {c.commands} commands, the slowest started "
                                          f"{c.slowest_start:.3f} s after its line was sent\n")

    def _claim_name(self) -> None:
        """Hold build/logs/.<name>.running while the VM runs: a second VM of the same
        name (in this process or another) would delete this one's kernel log and
        truncate its command log, so it is refused."""
        fh = open(paths.LOGS / f".{self.name}.running", "a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise SrpartError(f"a VM named {self.name} is already running: "
                              "VM names must be unique (they name the logs)") from None
        self._name_lock = fh

    def _kill(self) -> None:
        _RUNNING.discard(self)
        if self.qmp is not None:
            self.qmp.close()
            self.qmp = None
        if self.qmp_socket is not None:
            shutil.rmtree(self.qmp_socket.parent, ignore_errors=True)
            self.qmp_socket = None
        if self._name_lock is not None:
            self._name_lock.close()        # releases the flock
            self._name_lock = None
        if self.child is not None:
            if self.child.isalive():
                self.child.terminate(force=True)
            self.child.close()
            if self.child.logfile_read:
                self.child.logfile_read.close()
            self.child = None

    def __enter__(self) -> "VM":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.stop()
        else:
            self._kill()
