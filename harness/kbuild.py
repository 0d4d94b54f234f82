"""One way to run kbuild: `make` in an object tree, every line into a log,
and a progress line on the terminal while it runs.

A cold test kernel takes five to eight minutes on two cores; a build that
prints nothing for that long looks hung. kbuild's quiet output names every
step ("  CC      block/genhd.o"), so the runner counts the files compiled,
shows the current step, the elapsed time and the log's path: on a terminal
one line rewritten in place every second, elsewhere (CI) one line every
PLAIN_EVERY seconds. The count of the last complete build of the same
object tree and targets is kept in the tree, so the line can say "412/1046".
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import SrpartError

PLAIN_EVERY = 30.0
# kbuild's quiet-mode step line: two blanks, a tag of capitals (CC, LD, AR,
# "CC [M]", ...), blanks, the target
STEP = re.compile(r"^  ([A-Z][A-Z0-9_]*(?: \[M\])?)\s+(\S.*)$")
COMPILES = ("CC", "CC [M]", "AS", "AS [M]")


@dataclass
class Progress:
    what: str
    log: Path
    expected: int | None = None
    files: int = 0
    step: str = "starting"
    started: float = 0.0

    def feed(self, line: str) -> None:
        m = STEP.match(line.rstrip("\n"))
        if m:
            self.step = f"{m.group(1)} {m.group(2)}"
            if m.group(1) in COMPILES:
                self.files += 1

    def line(self, now: float) -> str:
        s = int(now - self.started)
        count = f"{self.files}/{self.expected}" if self.expected else str(self.files)
        return (f"srpart: {self.what}: {count} files compiled, {s // 60}:{s % 60:02d} "
                f"elapsed, now {self.step[:60]} (log: {self.log})")


def _counts_file(obj: Path) -> Path:
    return obj / "srpart.compile-counts.json"


def _expected(obj: Path, key: str) -> int | None:
    try:
        return json.loads(_counts_file(obj).read_text()).get(key)
    except (OSError, ValueError):
        return None


def _remember(obj: Path, key: str, files: int) -> None:
    f = _counts_file(obj)
    try:
        counts = json.loads(f.read_text())
    except (OSError, ValueError):
        counts = {}
    # only a build that compiled (nearly) everything says how many there are
    if files > max(counts.get(key, 0) // 2, 0):
        counts[key] = files
        f.write_text(json.dumps(counts))


def make(tree: Path, obj: Path, targets: list[str], jobs: int, log: Path, what: str,
         extra: list[str] | None = None, append: bool = False, quiet: bool = False,
         out=None) -> Progress:
    """Run `make -jN O=obj [extra] targets` in `tree`; fail naming the log (and
    printing its tail) when make fails. Returns the final Progress."""
    out = out or sys.stdout
    tty = not quiet and getattr(out, "isatty", lambda: False)()
    key = " ".join([*(extra or []), *targets])
    p = Progress(what, log, _expected(obj, key), started=time.monotonic())
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = ["make", f"-j{jobs}", f"O={obj}", *(extra or []), *targets]
    last = p.started
    with open(log, "a" if append else "w") as fh:
        fh.write("# " + " ".join(argv) + "\n")
        proc = subprocess.Popen(argv, cwd=tree, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout
        for line in proc.stdout:
            fh.write(line)
            p.feed(line)
            now = time.monotonic()
            if not quiet and now - last >= (1.0 if tty else PLAIN_EVERY):
                last = now
                print(("\r\033[K" if tty else "") + p.line(now), end="" if tty else "\n",
                      file=out, flush=True)
        rc = proc.wait()
    if tty:
        print("\r\033[K", end="", file=out, flush=True)
    if rc != 0:
        print("\n".join(log.read_text(errors="replace").strip().splitlines()[-15:]), file=out)
        raise SrpartError(f"kernel build {what} failed; full log: {log}")
    _remember(obj, key, p.files)
    return p
