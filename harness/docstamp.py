"""The series a generated doc was made from, written into it, and checked.

A doc made by make media-report, abi-report or bench ends with one line

    <!-- srpart-series: 6.1=3f0c... naive-6.1=91ab... -->

naming each patches/<dir> it booted and the hash of its patches
(source.series_hash; the cover letter is not part of it). A unit test fails
when a doc's series changed since, naming the target that remakes it.
"""
from __future__ import annotations

import re
from pathlib import Path

from . import paths, source

LINE = re.compile(r"^<!-- srpart-series: ([^>]*) -->$", re.M)

# doc -> the make target that regenerates it
DOCS = {"docs/media.md": "make media-report", "docs/abi-impact.md": "make abi-report",
        "docs/performance.md": "make bench", "docs/userspace.md": "make userspace-report"}


def series_hash(name: str) -> str:
    return source.series_hash(source.series_files(name))


def line(names: list[str]) -> str:
    return "<!-- srpart-series: " + " ".join(f"{n}={series_hash(n)}"
                                             for n in sorted(set(names))) + " -->\n"


def recorded(text: str) -> dict[str, str] | None:
    m = LINE.search(text)
    return dict(f.split("=", 1) for f in m.group(1).split()) if m else None


def stale(doc: Path) -> str | None:
    """Why `doc` no longer matches the series it was made from, or None."""
    rel = str(doc.relative_to(paths.ROOT))
    got = recorded(doc.read_text())
    if got is None:
        return f"{rel} does not say which series it was made from: run `{DOCS[rel]}`"
    for name, h in got.items():
        now = series_hash(name) if (paths.PATCHES / name).is_dir() else "gone"
        if now != h:
            return (f"{rel} was made from patches/{name} {h}, which is now {now}: "
                    f"run `{DOCS[rel]}`")
    return None


def report_main(prog: str, description: str, doc: Path, run, argv: list[str] | None) -> int:
    """The command line of a report made on one kernel: --kernel, --out; writes the doc."""
    import argparse

    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--out", default=str(doc))
    args = ap.parse_args(argv)
    text = run(args.kernel)
    with open(args.out, "w") as fh:
        fh.write(text)
    print(f"srpart: wrote {args.out}")
    return 0
