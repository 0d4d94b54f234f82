"""Console protocol and bad-pattern detection, on recorded logs and a fake channel (no VM)."""
from __future__ import annotations

import re
import shlex
import threading
from pathlib import Path

import pexpect
import pytest

from harness import console

DATA = Path(__file__).parent / "data"


class FakeChild:
    """Plays back scripted channel output through pexpect's own matching."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.sent: list[str] = []
        self.before = ""
        self.match = None
        self.buffer = ""

    def sendline(self, s: str) -> int:
        self.sent.append(s)
        if s and self.replies:
            m = re.search(r"printf '.*' \$\? ([0-9a-f]+)$", s)
            reply = self.replies.pop(0)
            if "@@SRPART-GO" not in reply:    # sh starts the command: GO first
                reply = "@@SRPART-GO TOKEN@@\r\n" + reply
            self.buffer += reply.replace("TOKEN", m.group(1) if m else "")
        return len(s)

    def expect(self, patterns, timeout=None):
        for i, p in enumerate(patterns):
            if isinstance(p, str):
                m = re.search(p, self.buffer)
                if m:
                    self.before, self.match = self.buffer[:m.start()], m
                    self.buffer = self.buffer[m.end():]
                    return i
        return patterns.index(pexpect.TIMEOUT)


def test_wrap_never_contains_its_own_marker():
    line = console.wrap("echo hi", "deadbeef")
    assert not console.MARKER.search(line) and not console.GO.search(line)
    assert "; ( echo hi\n)" in line and "</dev/null" in line


def test_clean_drops_only_the_marker_newline():
    assert console.clean("a\r\nb\r\n\r\n") == "a\nb\n"
    assert console.clean("\r\n") == ""


def test_run_returns_output_and_status(tmp_path):
    log = tmp_path / "kernel.log"
    log.write_text((DATA / "kernel-clean.log").read_text())
    child = FakeChild(["hello\r\n\r\n@@SRPART-RC 3 TOKEN@@\r\n"])
    r = console.Console(child, log).run("echo hello; exit 3")
    assert (r.output, r.status) == ("hello\n", 3)


def test_stale_marker_of_another_command_is_skipped(tmp_path):
    child = FakeChild(["@@SRPART-GO 00000000@@\r\nold\r\n@@SRPART-RC 0 00000000@@\r\n"
                       "@@SRPART-GO TOKEN@@\r\nnew\r\n\r\n@@SRPART-RC 0 TOKEN@@\r\n"])
    r = console.Console(child, tmp_path / "none.log").run("echo new")
    assert r.output == "new\n"


class StuckChild(FakeChild):
    """A guest whose command line sits unread until the next input arrives (the
    old 16550 channel under TCG)."""

    def sendline(self, s: str) -> int:
        if s:
            self.token = re.search(r"\$\? ([0-9a-f]+)$", s).group(1)
            self.sent.append(s)
            return len(s)
        self.buffer += f"@@SRPART-GO {self.token}@@\r\nok\r\n\r\n@@SRPART-RC 0 {self.token}@@\r\n"
        return super().sendline(s)


class SlowChild(FakeChild):
    """A guest that starts the command at once and answers after one second."""

    def expect(self, patterns, timeout=None):
        if patterns[0] == console.MARKER.pattern and timeout is not None and timeout >= 1:
            self.buffer += "done\r\n\r\n@@SRPART-RC 0 " + self.token + "@@\r\n"
        return super().expect(patterns, timeout)

    def sendline(self, s: str) -> int:
        if s:
            self.token = re.search(r"\$\? ([0-9a-f]+)$", s).group(1)
            self.buffer += f"@@SRPART-GO {self.token}@@\r\n"
        self.sent.append(s)
        return len(s)


def test_a_command_that_does_not_start_fails_and_nothing_wakes_it(tmp_path):
    """Issue 29: a stall before a command starts is a failure, never cured by
    more input. (Seen failing: with the old nudge loop this returned "ok".)"""
    child = StuckChild([])
    con = console.Console(child, tmp_path / "none.log")
    with pytest.raises(console.GuestTimeout, match=r"did not start within 0.5 s"):
        con.run("echo ok", timeout=0.5)
    assert len(child.sent) == 1


def test_a_command_that_started_is_left_to_finish(tmp_path):
    child = SlowChild([])
    con = console.Console(child, tmp_path / "none.log")
    assert con.run("sleep 1; echo done", timeout=5).output == "done\n"
    assert len(child.sent) == 1 and 0 <= con.slowest_start < 1


def test_a_long_command_line_is_sent_whole(tmp_path):
    """No line limit on the port: a 10 kB command goes out as it is."""
    child = FakeChild(["ok\r\n\r\n@@SRPART-RC 0 TOKEN@@\r\n"])
    con = console.Console(child, tmp_path / "none.log")
    command = "echo " + "x" * 10000
    assert con.run(command).output == "ok\n"
    assert command in child.sent[0]


def test_kernel_warning_fails_the_next_command(tmp_path):
    log = tmp_path / "kernel.log"
    log.write_text((DATA / "kernel-warning.log").read_text())
    child = FakeChild(["x\r\n\r\n@@SRPART-RC 0 TOKEN@@\r\n"])
    with pytest.raises(console.GuestError, match=r"bad pattern \(WARNING\)"):
        console.Console(child, log).run("true")


def test_kernel_log_is_checked_incrementally_and_across_partial_lines(tmp_path):
    log = tmp_path / "kernel.log"
    log.write_text((DATA / "kernel-clean.log").read_text() + "[    3.0] Oo")
    con = console.Console(FakeChild([]), log)
    con.check_kernel_log()                 # clean so far; "Oo" is an unfinished line
    with open(log, "a") as fh:
        fh.write("ps: 0000 [#1] SMP\n")
    with pytest.raises(console.GuestError, match=r"\(Oops\)"):
        con.check_kernel_log()


def test_an_invalid_byte_does_not_shift_the_next_scan(tmp_path):
    # the log offset is in bytes: counting decoded text re-encoded, two invalid
    # bytes (6 once replaced) moved the next scan 4 bytes, past "BUG:"
    log = tmp_path / "kernel.log"
    log.write_bytes(b"[    1.0] serial noise \xff\xfe\n")
    con = console.Console(FakeChild([]), log)
    con.check_kernel_log()
    with open(log, "ab") as fh:
        fh.write(b"BUG: unable to handle page fault\n")
    with pytest.raises(console.GuestError, match=r"\(BUG\)"):
        con.check_kernel_log()


def test_timeout_is_reported_with_the_log_tail(tmp_path):
    log = tmp_path / "kernel.log"
    log.write_text((DATA / "kernel-clean.log").read_text())
    with pytest.raises(console.GuestTimeout, match=r"reboot: Restarting system"):
        console.Console(FakeChild([]), log).run("sleep 100", timeout=0.3)


@pytest.mark.parametrize("text,name", [
    ("Kernel panic - not syncing: Attempted to kill init!", "panic"),
    ("BUG: kernel NULL pointer dereference, address: 0000000000000000", "BUG"),
    ("WARNING: CPU: 0 PID: 1 at fs/block_dev.c:1 x", "WARNING"),
    ("Oops: 0002 [#1] PREEMPT SMP", "Oops"),
    ("BUG: KASAN: use-after-free in add_partition+0x1/0x2", "BUG"),
    ("UBSAN: shift-out-of-bounds in block/partitions/msdos.c:1:2", "UBSAN"),
    ("general protection fault, probably for non-canonical address", "general protection fault"),
])
def test_bad_patterns(text, name):
    assert console.find_bad(f"[    1.0] {text}\n") == name


def test_clean_log_has_no_bad_pattern():
    assert console.find_bad((DATA / "kernel-clean.log").read_text()) is None


@pytest.mark.parametrize("line,short", [("@@SRPART-READY sr=8/8 sd=1/1@@\r\n", False),
                                        ("@@SRPART-READY sr=7/8 sd=1/1@@\r\n", True),
                                        ("@@SRPART-READY sr=2/2 sd=0/3@@\n", True)])
def test_ready_fails_when_the_guest_probed_fewer_drives(tmp_path, line, short):
    child = FakeChild([])
    child.buffer = line
    con = console.Console(child, tmp_path / "none.log")
    if short:
        with pytest.raises(console.GuestError, match=r"the guest probed \d+ of \d+ CD drives"):
            con.wait_ready(1, 90)
    else:
        con.wait_ready(1, 90)


class KmsgChild(FakeChild):
    """A guest whose `echo ... > /dev/kmsg` lands in the serial kernel log, after
    whatever the kernel printed in the meantime (`printed`)."""

    def __init__(self, log: Path, printed: list[str]) -> None:
        super().__init__([])
        self.log, self.printed = log, printed

    def sendline(self, s: str) -> int:
        m = re.search(r"; \( (echo .*> /dev/kmsg)\n", s)
        if m:
            words = shlex.split(m.group(1))
            text = (self.printed.pop(0) if self.printed else "") + f"[    9.0] {words[1]}\r\n"
            # the serial log gets the lines after the command has answered, as
            # QEMU's file backend does: only mark()'s own wait and check see them
            threading.Timer(0.1, self._append, (text,)).start()
            self.replies.append("\r\n@@SRPART-RC 0 TOKEN@@\r\n")
        return super().sendline(s)

    def _append(self, text: str) -> None:
        with open(self.log, "a") as fh:
            fh.write(text)


def test_marks_cut_the_kernel_log_into_slices(tmp_path):
    log = tmp_path / "kernel.log"
    log.write_text("[    1.0] boot\r\n")
    con = console.Console(KmsgChild(log, ["", "[    5.0] sr0: I/O error\r\n"]), log)
    a = con.mark("begin pytest/test_x.py::test_y[6.1-'quoted' id]")
    b = con.mark("end pytest/test_x.py::test_y")
    first, between = con.kernel_log(0, a).splitlines(), con.kernel_log(a, b).splitlines()
    assert first[0] == "[    1.0] boot"
    assert first[1].endswith(" begin pytest/test_x.py::test_y[6.1-'quoted' id]@@")
    assert between[0] == "[    5.0] sr0: I/O error"
    assert between[1].endswith(" end pytest/test_x.py::test_y@@") and len(between) == 2


def test_a_warning_inside_a_slice_fails_at_its_end_mark(tmp_path):
    log = tmp_path / "kernel.log"
    log.write_text("")
    con = console.Console(KmsgChild(log, ["", "[    5.0] WARNING: at block/x.c:1\r\n"]), log)
    con.mark("begin")
    with pytest.raises(console.GuestError, match=r"bad pattern \(WARNING\)"):
        con.mark("end")
