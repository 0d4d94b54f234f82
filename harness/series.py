"""Series hygiene: `git am` onto the pristine tree, no trailing blanks, checkpatch --strict.

    /usr/bin/python3 -m harness.series --kernel 6.1
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from . import paths, source
from .errors import SrpartError
from .lock import locked

TOTAL = re.compile(r"^total: (\d+) errors, (\d+) warnings, (?:(\d+) checks, )?\d+ lines checked", re.M)


def trailing_whitespace(patch: Path) -> list[str]:
    """`file:line` of every line we wrote that ends in blanks.

    checkpatch only looks at added lines. This also covers the commit
    message, the cover letter, and the " " git writes for an empty context
    line (mail tools flag it; the series is exported with
    diff.suppressBlankEmpty=true). Context lines that carry upstream's own
    trailing blanks are left alone: they are not ours to change.
    """
    bad, in_diff = [], False
    for n, line in enumerate(patch.read_text().splitlines(), 1):
        if line.startswith("diff --git "):
            in_diff = True
        if line == line.rstrip():
            continue
        ours = (not in_diff or line == " " or
                (line.startswith("+") and not line.startswith("+++")))
        if ours:
            bad.append(f"{patch.name}:{n}")
    return bad


def checkpatch(tree, patch) -> tuple[int, int, int, str]:
    r = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict",
                        str(patch)], cwd=tree, capture_output=True, text=True)
    m = TOTAL.search(r.stdout)
    if not m:
        raise SrpartError(f"checkpatch printed no total for {patch.name}: {r.stderr.strip()[:200]}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), r.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.series", description=__doc__)
    ap.add_argument("--kernel", default="6.1")
    args = ap.parse_args(argv)
    try:
        with locked(paths.BUILD / "locks" / f"kernel-{args.kernel}.lock"):
            src = source.extract(args.kernel)
            # applied with git am onto srpart-base by `make kernels`; redone
            # only when the series changed (apply_series keeps its hash)
            commit = source.apply_series(src, args.kernel)
            files = source.series_files(args.kernel)
            print(f"srpart: git am of {len(files)} patches onto linux-source-{args.kernel} "
                  f"{src.version}: ok ({commit[:12]})")
            bad = 0
            for f in sorted(paths.PATCHES.joinpath(args.kernel).glob("*.patch")):
                ws = trailing_whitespace(f)
                if ws:
                    bad += 1
                    print(f"  trailing whitespace: {', '.join(ws)}")
                if f.name.startswith("0000-"):
                    continue
                e, w, c, out = checkpatch(src.tree, f)
                print(f"  checkpatch --strict {f.name}: {e} errors, {w} warnings, {c} checks")
                if e or w or c:
                    bad += 1
                    print(out)
    except SrpartError as e:
        print(f"srpart: error: {e}", file=sys.stderr)
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
