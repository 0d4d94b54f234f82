"""Coverage of block/partitions/ in the debug kernels (issue 14).

The srpart-debug variant builds with CONFIG_GCOV_KERNEL and GCOV_PROFILE :=
y in block/partitions/ only (kernel.Variant.gcov). The stages:

    guest: COLLECT_CMD -> base64 of every .gcda under /sys/kernel/debug/gcov
    host:  parse_collected() -> {name.gcda: bytes} -> save() under one run dir
           merge(run dirs) -> gcov-tool merge, pairwise -> one .gcda set
           report(merged, obj, tree) -> gcov --json-format -> per source file:
           executable lines, lines reached, the lines not reached

A run's counters are cumulative for the life of one VM, so each VM's data is
saved on its own and the runs are merged.
"""
from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SrpartError

GCOV_FS = "/sys/kernel/debug/gcov"
FOLDER = "block/partitions"
BEGIN, END = "@@gcda", "@@end"

COLLECT_CMD = (f"[ -d {GCOV_FS} ] || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null; "
               f"if [ -d {GCOV_FS} ]; then for f in $(find {GCOV_FS} -path '*/{FOLDER}/*.gcda'); "
               f"do echo {BEGIN} ${{f##*/}}; base64 $f; echo {END}; done; "
               f"else echo 'gcov: absent'; fi")


def parse_collected(text: str) -> dict[str, bytes]:
    """COLLECT_CMD's output -> {file name: .gcda bytes}; {} on a kernel without gcov."""
    out: dict[str, bytes] = {}
    name, chunks = None, []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(BEGIN + " "):
            name, chunks = line.split(None, 1)[1], []
        elif line == END and name:
            out[name] = base64.b64decode("".join(chunks))
            name = None
        elif name:
            chunks.append(line)
    if name:
        raise SrpartError(f"gcov data for {name} cut short")
    return out


def save(run_dir: Path, files: dict[str, bytes]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (run_dir / name).write_bytes(data)


def merge(runs: list[Path], out: Path) -> Path:
    """Sum the counters of several runs' .gcda sets (gcov-tool merge, two at a time)."""
    runs = [r for r in runs if any(r.glob("*.gcda"))]
    if not runs:
        raise SrpartError("no gcov data to merge: did the VMs run a kernel with CONFIG_GCOV_KERNEL?")
    tool = shutil.which("gcov-tool") or ""
    if not tool:
        raise SrpartError("gcov-tool not found: install the gcc package")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(runs[0], out)
    for r in runs[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            res = subprocess.run([tool, "merge", str(r), str(out), "-o", tmp],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                raise SrpartError(f"gcov-tool merge {r} failed: {res.stderr.strip()[:200]}")
            for f in Path(tmp).glob("*.gcda"):
                shutil.copy2(f, out / f.name)
            for f in r.glob("*.gcda"):              # a file only this run has
                if not (out / f.name).exists():
                    shutil.copy2(f, out / f.name)
    return out


@dataclass
class FileCoverage:
    source: str                       # "block/partitions/msdos.c"
    lines: int                        # executable lines
    reached: int
    unreached: list[int] = field(default_factory=list)

    @property
    def percent(self) -> float:
        return 100.0 * self.reached / self.lines if self.lines else 0.0


def parse_gcov_json(doc: dict, folder: str | None = FOLDER) -> list[FileCoverage]:
    """gcov --json-format's document -> the coverage of the files in `folder`
    (None: every .c file, as named in the document)."""
    out = []
    for f in doc.get("files", []):
        name = f["file"]
        at = name.find(folder + "/") if folder else 0
        if at < 0 or not name.endswith(".c"):
            continue
        counts: dict[int, int] = {}
        for ln in f.get("lines", []):
            n = ln["line_number"]
            counts[n] = max(counts.get(n, 0), ln["count"])
        unreached = sorted(n for n, c in counts.items() if c == 0)
        out.append(FileCoverage(name[at:], len(counts), len(counts) - len(unreached), unreached))
    return out


def gcov_json(work: Path, target: str, folder: str | None = FOLDER) -> list[FileCoverage]:
    """Run gcov --json-format on `target` (a source or object name gcov resolves
    against the .gcno/.gcda files in `work`) and parse what it writes there."""
    tool = shutil.which("gcov")
    if not tool:
        raise SrpartError("gcov not found: install the gcc package")
    res = subprocess.run([tool, "--json-format", "-o", str(work), target],
                         cwd=work, capture_output=True, text=True)
    if res.returncode != 0:
        raise SrpartError(f"gcov on {work / target} failed: {res.stderr.strip()[:200]}")
    out = []
    for js in work.glob("*.gcov.json.gz"):
        out += parse_gcov_json(json.loads(gzip.decompress(js.read_bytes())), folder)
        js.unlink()
    return out


def report(merged: Path, obj: Path, tree: Path) -> list[FileCoverage]:
    """Per source file of block/partitions, from the merged .gcda and the build's .gcno."""
    out: dict[str, FileCoverage] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for gcno in sorted((obj / FOLDER).glob("*.gcno")):
            shutil.copy2(gcno, work / gcno.name)
            gcda = merged / gcno.with_suffix(".gcda").name
            if gcda.exists():
                shutil.copy2(gcda, work / gcda.name)
            for fc in gcov_json(work, gcno.stem + ".c"):
                if (tree / fc.source).exists():
                    out.setdefault(fc.source, fc)
    return sorted(out.values(), key=lambda c: c.source)


def render(cov: list[FileCoverage]) -> str:
    rows = ["file                          lines  reached      %  not reached"]
    for c in cov:
        miss = ",".join(map(str, c.unreached[:40])) + (" ..." if len(c.unreached) > 40 else "")
        rows.append(f"{c.source:<29} {c.lines:5d} {c.reached:8d} {c.percent:6.1f}  {miss}")
    return "\n".join(rows) + "\n"
