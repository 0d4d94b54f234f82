"""Serial console protocol: a marker and exit code after every command.

Like labgrid's and U-Boot test/py's consoles: every expect also watches a
list of bad patterns, so a panic, Oops, BUG or WARNING fails the run at the
moment it appears, with the tail of the serial log in the error.
"""
from __future__ import annotations

import re
import secrets
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .errors import SrpartError

# The guest init's READY line: drives and disks probed / wanted
READY = re.compile(r"@@SRPART-READY sr=(\d+)/(\d+) sd=(\d+)/(\d+)@@\r*\n")
MARKER = re.compile(r"@@SRPART-RC (\d+) ([0-9a-f]+)@@\r*\n")
# printed first by every command: the guest's sh has read the whole command
GO = re.compile(r"@@SRPART-GO ([0-9a-f]+)@@\r*\n")
# A line written to /dev/kmsg to cut the kernel log into per-test slices
LOG_MARK = "@@SRPART-LOG {token} {label}@@"
MARK_LABEL_MAX = 200      # /dev/kmsg takes ~1 KiB a line; test ids can be long

BAD_PATTERNS: dict[str, str] = {
    "panic": r"Kernel panic",
    "BUG": r"BUG:",
    "kernel BUG": r"kernel BUG at",
    "WARNING": r"WARNING:",
    "Oops": r"Oops",
    "KASAN": r"KASAN:",
    "UBSAN": r"UBSAN:",
    "general protection fault": r"general protection fault",
    "kmemleak": r"kmemleak: \d+ new suspected memory leaks",
    # lockdep's non-WARNING reports and RCU stalls ("INFO: rcu_sched self-detected stall")
    "INFO": r"INFO: (trying to register non-static key|rcu_\w+ (self-)?detected stall|task .* blocked)",
    # Debian's udev (harness/userspace.py) logs to the kernel log: a rule's
    # program that failed or hung, a worker it killed, and the guest init's
    # own line when udevd would not start or `udevadm settle` gave up
    "udev RUN failed": r"Process '.*' failed with exit code|Failed to execute '",
    "udev timeout": r"Spawned process '.*' \[\d+\] (timed out|is taking longer)|"
                    r"Worker \[\d+\] processing SEQNUM=\d+ killed|Timed out for waiting",
    "udev init": r"srpart init: udev:",
    # udevd dropped a control message (harness/guest-files/udevsock.c)
    "udev control": r"Invalid sender uid",
    # the init found no command channel and powers off
    "init channel": r"srpart init: command channel:",
    # a rules file udevd refused a line of (syntax, unknown key, operator)
    "udev rules": r"\.rules:\d+ .*(?:[Ii]nvalid|[Uu]nknown|[Ff]ailed|[Ii]gnoring|not supported)",
}


class GuestError(AssertionError):
    """A guest run failed: bad pattern, timeout, unexpected exit."""


class GuestTimeout(GuestError):
    """No expected output within the timeout."""


class Spawned(Protocol):   # the subset of pexpect.spawn the console uses
    before: str
    match: object

    def sendline(self, s: str) -> int: ...
    def isalive(self) -> bool: ...
    def expect(self, pattern: object, timeout: float | None = ...) -> int: ...


@dataclass(frozen=True)
class Result:
    command: str
    output: str
    status: int


def wrap(command: str, token: str) -> str:
    """The line(s) sent for one command: the GO marker, a subshell with no stdin,
    then the RC marker. sh runs none of it before it has read the last line, so
    GO says the whole command arrived.

    The format strings do not contain the markers literally, so an echoed
    command can never be mistaken for its own start or completion.
    """
    return (f"printf '@@SRPART-GO %s@@\\n' {token}; ( {command}\n) </dev/null 2>&1; "
            f"printf '\\n@@SRPART-RC %d %s@@\\n' $? {token}")


def clean(raw: str) -> str:
    """Output between a command and its marker, without the marker's newline."""
    text = raw.replace("\r\n", "\n").replace("\r", "")
    if text.endswith("\n"):
        text = text[:-1]
    return text


def find_bad(text: str) -> str | None:
    for name, pat in BAD_PATTERNS.items():
        if re.search(pat, text):
            return name
    return None


def log_tail(log: Path | None, lines: int = 40) -> str:
    if not log or not log.exists():
        return "(no log)"
    tail = re.sub(r"\r+\n?", "\n", log.read_text(errors="replace")).splitlines()[-lines:]
    return "\n".join(tail)


class Console:
    """The command channel (a pexpect child) plus the kernel log it is checked against."""

    def __init__(self, child: Spawned, kernel_log: Path | None = None,
                 cmd_log: Path | None = None) -> None:
        import pexpect

        self.child = child
        self.log = kernel_log
        self.cmd_log = cmd_log
        self._eof = pexpect.EOF
        self._timeout = pexpect.TIMEOUT
        self._seen = 0        # bytes of the kernel log already checked
        self._carry = b""     # last partial line, checked again with what follows
        self.commands = 0
        self.slowest_start = 0.0   # seconds from a command's line to its GO, the longest

    def _fail(self, why: str) -> GuestError:
        return GuestError(f"{why}; kernel log {self.log}:\n{log_tail(self.log)}")

    def check_kernel_log(self, final: bool = False) -> None:
        """Fail if the kernel printed a bad pattern since the last check."""
        if not self.log or not self.log.exists():
            return
        # Offsets and the carried partial line are bytes: decoding first and
        # counting re-encoded text would shift the offset at every invalid
        # byte, and the next scan would start mid-line ("BUG:" read as "G:").
        with open(self.log, "rb") as fh:
            fh.seek(self._seen)
            new = fh.read()
        self._seen += len(new)
        data = self._carry + new
        cut = len(data) if final else data.rfind(b"\n") + 1
        self._carry = data[cut:]
        bad = find_bad(data[:cut].decode("utf-8", "replace"))
        if bad:
            raise self._fail(f"kernel printed a bad pattern ({bad})")

    def mark(self, label: str, timeout: float = 20.0) -> int:
        """Write a marker line to the kernel log (/dev/kmsg), wait until the serial
        log holds it, check everything up to it for bad patterns, and return the
        byte offset just past it: kernel_log(begin, end) is what came between."""
        if not self.log:
            raise SrpartError("this console has no kernel log to mark")
        tag = LOG_MARK.format(token=secrets.token_hex(4), label=label[:MARK_LABEL_MAX])
        self.run(f"echo {shlex.quote(tag)} > /dev/kmsg")
        want, deadline = tag.encode(), time.monotonic() + timeout
        while True:
            data = self.log.read_bytes() if self.log.exists() else b""
            i = data.find(want)
            end = data.find(b"\n", i) if i >= 0 else -1
            if end >= 0:
                break
            if time.monotonic() > deadline:
                raise self._fail(f"the kernel log marker did not reach {self.log} "
                                 f"within {timeout:g} s")
            time.sleep(0.02)
        self.check_kernel_log()
        return end + 1

    def kernel_log(self, begin: int, end: int | None = None) -> str:
        """The serial kernel log between two offsets mark() returned, as text lines."""
        with open(self.log, "rb") as fh:
            fh.seek(begin)
            data = fh.read() if end is None else fh.read(max(end - begin, 0))
        return re.sub(r"\r+\n?", "\n", data.decode("utf-8", "replace"))

    def expect(self, pattern: str, timeout: float) -> re.Match[str]:
        """Wait for `pattern` on the channel; fail on EOF, timeout or a bad kernel log."""
        i = self.child.expect([pattern, self._eof, self._timeout], timeout=timeout)
        if i == 1:
            self._wait_for_qemu()   # its file backend has written the whole kernel log
            self.check_kernel_log(final=True)
            raise self._fail(f"guest exited while waiting for {pattern!r}")
        self.check_kernel_log()
        if i == 2:
            raise GuestTimeout(f"timeout after {timeout:g} s waiting for {pattern!r}; kernel log "
                               f"{self.log}:\n{log_tail(self.log)}")
        return self.child.match  # type: ignore[return-value]

    def _wait_for_qemu(self, timeout: float = 10.0) -> None:
        """After EOF on the channel: wait until the QEMU process has exited."""
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            time.sleep(0.01)

    def wait_ready(self, timeout: float, probe_wait: float) -> None:
        """Wait for init's READY; fail in one line when it saw fewer drives than asked."""
        m = self.expect(READY.pattern, timeout)
        sr, want_sr, sd, want_sd = (int(g) for g in m.groups())
        if sr < want_sr or sd < want_sd:
            raise GuestError(f"the guest probed {sr} of {want_sr} CD drives and {sd} of "
                             f"{want_sd} disks before init gave up waiting ({probe_wait:g} s); "
                             f"kernel log {self.log}")

    def wait_exit(self, timeout: float) -> None:
        """Wait for QEMU to exit (after `reboot -f`)."""
        if self.child.expect([self._eof, self._timeout], timeout=timeout) != 0:
            raise self._fail(f"guest did not power off within {timeout:g} s")
        self._wait_for_qemu()
        self.check_kernel_log(final=True)

    def run(self, command: str, timeout: float = 30) -> Result:
        """Send one command; its GO and then its RC marker must come within
        `timeout` seconds. Nothing is sent to a command that has not started:
        one that has not within the timeout fails the run, whatever held it."""
        token = secrets.token_hex(4)
        log = getattr(self.child, "logfile_read", None)
        if log:   # the channel does not echo: keep a transcript of what was sent
            log.write("".join(f"$ {ln}\n" for ln in command.splitlines()))
        t0 = time.monotonic()
        deadline = t0 + timeout
        self.child.sendline(wrap(command, token))
        self.commands += 1
        while True:
            try:
                m = self.expect(GO.pattern, max(deadline - time.monotonic(), 0.01))
            except GuestTimeout:
                raise GuestTimeout(f"the command did not start within {timeout:g} s: "
                                   f"{command[:200]!r}; kernel log {self.log}:\n"
                                   f"{log_tail(self.log)}") from None
            if m.group(1) == token:
                break
        self.slowest_start = max(self.slowest_start, time.monotonic() - t0)
        while True:
            m = self.expect(MARKER.pattern, max(deadline - time.monotonic(), 0.01))
            if m.group(2) == token:
                break
        return Result(command, clean(self.child.before), int(m.group(1)))
