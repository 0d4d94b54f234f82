"""Series hygiene: `git am` onto the pristine tree, no trailing blanks, checkpatch --strict.

    /usr/bin/python3 -m harness.series --kernel 6.1 [--build-each] [--update-cover]

--build-each (make series-check) also builds, after every patch, the
directories of the C files the series touches and those files' objects
(whatever the config enables) with W=1 (bisectability, and
no new warnings in a file a patch touches), then the whole test kernel at
the last patch; and it checks that the cover letter records what
scripts/get_maintainer.pl says about the series (--update-cover rewrites
that block) and shows a before/after /proc/partitions.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from .cache import Stamp, key_of
from . import kbuild, paths, source
from .errors import SrpartError
from .lock import locked

TOTAL = re.compile(r"^total: (\d+) errors, (\d+) warnings, (?:(\d+) checks, )?\d+ lines checked", re.M)


def trailing_whitespace(patch: Path) -> list[str]:
    """`file:line` of every line that ends in blanks, removed lines included.

    checkpatch --strict itself reports only added lines, but reviewers'
    tools flag any line of the mail: an upstream " * " kept as context or
    removed next to a change was reported as ERROR:TRAILING_WHITESPACE
    twice. So the series is exported with diff.suppressBlankEmpty=true and
    hunks stay clear of such upstream lines altogether.
    """
    return [f"{patch.name}:{n}" for n, line in enumerate(patch.read_text().splitlines(), 1)
            if line != line.rstrip()]


MAINTAINERS_HEAD = "scripts/get_maintainer.pl --no-git --no-git-fallback on this series:"


def get_maintainers(tree: Path, patches: list[Path]) -> list[str]:
    r = subprocess.run(["perl", "scripts/get_maintainer.pl", "--no-git", "--no-git-fallback",
                        *map(str, patches)], cwd=tree, capture_output=True, text=True)
    if r.returncode != 0:
        raise SrpartError(f"get_maintainer.pl failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]


def cover_maintainers(cover: str) -> list[str] | None:
    """The block under MAINTAINERS_HEAD in a cover letter, up to the next blank line."""
    lines = cover.splitlines()
    if MAINTAINERS_HEAD not in lines:
        return None
    out = []
    for ln in lines[lines.index(MAINTAINERS_HEAD) + 1:]:
        if not ln.strip():
            break
        out.append(ln.strip())
    return out


def set_cover_maintainers(cover: str, names: list[str]) -> str:
    """Replace (or add, before the shortlog) the get_maintainer.pl block."""
    block = MAINTAINERS_HEAD + "\n" + "".join(f"  {n}\n" for n in names)
    lines = cover.splitlines(keepends=True)
    if any(ln.rstrip("\n") == MAINTAINERS_HEAD for ln in lines):
        i = next(i for i, ln in enumerate(lines) if ln.rstrip("\n") == MAINTAINERS_HEAD)
        j = i + 1
        while j < len(lines) and lines[j].strip():
            j += 1
        return "".join(lines[:i]) + block + "".join(lines[j:])
    m = re.search(r"^srpart developers \(\d+\):$", cover, re.M)
    at = m.start() if m else len(cover)
    return cover[:at] + block + "\n" + cover[at:]


# gcc's "file:line:col: warning:" and kernel-doc's "file:line: warning:" (W=1)
WARNING = re.compile(r"^(/\S+?|[^/\s]\S*?):\d+(?::\d+)?: warning: (.*)$", re.M)


def series_targets(src: source.KernelSource, kernel: str) -> list[str]:
    """What each patch's build compiles: the kbuild directories of every C file the
    series touches (["block/partitions/", "drivers/scsi/"]) and each such file's
    object by name, so that a parser the config leaves out (aix.c, sysv68.c in the
    plain kernels) is compiled with W=1 too: kbuild builds a named object whatever
    the config says."""
    names = [n for n in source.git_out(src, "diff", "--name-only", f"srpart-base..{kernel}").split()
             if n.endswith(".c")]
    return sorted({str(Path(n).parent) + "/" for n in names}) + sorted(n[:-2] + ".o" for n in names)


def warnings_in(log: str, tree: Path) -> set[tuple[str, str]]:
    """(file relative to the tree, message) of every compiler warning in a build log.
    make prints the tree's real path: under a symlinked build/ a prefix of the
    path as given matched nothing, and every warning counted as in no file."""
    prefixes = {str(t).rstrip("/") + "/" for t in (tree, tree.resolve())}

    def rel(f: str) -> str:
        return next((f[len(p):] for p in prefixes if f.startswith(p)), f)
    return {(rel(f), msg.strip()) for f, msg in WARNING.findall(log)}


def build_each(src: source.KernelSource, kernel: str) -> int:
    """Build after every patch what the series touches, with W=1; return the number of
    patches that failed. A patch fails when that build fails or when a file it touches
    gets a W=1 warning the file did not have before the patch. The kernel as a whole
    is built once, at the last patch: the srpart test kernel (main() checks it is current).

    Each step is `make W=1 <the series' C directories and objects>` in the test kernel's object
    tree: what a patch can break in a file of its own is seen there, in about 15 s
    instead of a full build's 25-160 s (vmlinux, and every includer of a header the
    patch changes)."""
    from . import kconfig
    from . import kernel as kernels

    obj = paths.OBJ / kernel
    revs = source.git_out(src, "rev-list", "--reverse", f"srpart-base..{kernel}").split()
    # the same patch trees with the same config were all built before: nothing to prove again
    trees = [source.tree_id(src, rev) for rev in revs]
    targets = series_targets(src, kernel)
    stamp = Stamp(obj / "srpart.series-check.stamp",
                  key_of(*trees, kernels.requested_config().render(), *targets, "W=1", length=64))
    if stamp.fresh():
        print(f"  builds after each of {len(revs)} patches: up to date (same trees, same config)")
        return 0
    stamp.drop()
    failed = 0
    jobs = os.cpu_count() or 1
    try:
        # the warnings the touched files have before the series: compile them all once
        source.checkout(src, "srpart-base")
        kconfig.configure(src.tree, obj, kernels.requested_config())
        touched = set(source.git_out(src, "diff", "--name-only", f"srpart-base..{kernel}").split())
        for f in touched:
            if f.endswith(".c") and (src.tree / f).exists():
                os.utime(src.tree / f)
        log = paths.LOGS / f"series-check-{kernel}-0.log"
        kbuild.make(src.tree, obj, targets, jobs, log,
                    f"{kernel} before the series, W=1 {' '.join(targets)}",
                    extra=["W=1"])
        seen = warnings_in(log.read_text(errors="replace"), src.tree)
        print(f"  W=1 {' '.join(targets)} before the series: {len(seen)} warnings (the baseline)")
        for n, rev in enumerate(revs, 1):
            subject = source.git_out(src, "log", "-1", "--format=%s", rev).strip()
            files = set(source.git_out(src, "diff", "--name-only", f"{rev}^", rev).split())
            source.checkout(src, rev)
            log = paths.LOGS / f"series-check-{kernel}-{n}.log"
            try:
                kconfig.configure(src.tree, obj, kernels.requested_config())
                kbuild.make(src.tree, obj, targets, jobs, log, f"{kernel} after patch {n}",
                            extra=["W=1"])
            except SrpartError as e:
                failed += 1
                print(f"  build after {n}/{len(revs)} ({subject}): FAILED: {e}")
                continue
            now = warnings_in(log.read_text(errors="replace"), src.tree)
            new = sorted(w for w in now - seen if w[0] in files)
            seen |= now
            if new:
                failed += 1
                print(f"  build after {n}/{len(revs)} ({subject}): FAILED: new W=1 warnings "
                      f"in the files it touches (log: {log}):")
                for f, msg in new:
                    print(f"    {f}: warning: {msg}")
            else:
                print(f"  build after {n}/{len(revs)} ({subject}): ok")
    finally:
        source.checkout(src, kernel)
    if not failed:
        stamp.write()
    return failed


# The extracted tarball has no upstream history, so checkpatch cannot look up
# the commit a Fixes: tag names (1da177e4c3f4, Linux-2.6.12-rc2) and warns
# UNKNOWN_COMMIT_ID; in a kernel clone the same patch passes. Nothing else is
# ignored.
CHECKPATCH_IGNORE = ("UNKNOWN_COMMIT_ID",)


def checkpatch(tree, patch) -> tuple[int, int, int, str]:
    r = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict",
                        "--ignore", ",".join(CHECKPATCH_IGNORE),
                        str(patch)], cwd=tree, capture_output=True, text=True)
    m = TOTAL.search(r.stdout)
    if not m:
        raise SrpartError(f"checkpatch printed no total for {patch.name}: {r.stderr.strip()[:200]}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), r.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.series", description=__doc__)
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--build-each", action="store_true",
                    help="build after every patch; check the cover letter")
    ap.add_argument("--update-cover", action="store_true",
                    help="write get_maintainer.pl's answer into the cover letter")
    args = ap.parse_args(argv)
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
        if args.build_each or args.update_cover:
            bad += check_cover(src, args.kernel, files, args.update_cover)
        if args.build_each:
            bad += build_each(src, args.kernel)
    if args.build_each and not bad:
        # the one full build: the last patch's tree is the srpart test kernel's
        from . import kernel as kernels
        k = kernels.build(args.kernel, "srpart")
        print(f"  full build at the last patch: the srpart test kernel, "
              f"{'built in %.0f s' % k.built_seconds if k.built_seconds else 'current'}")
    return 1 if bad else 0


def check_cover(src: source.KernelSource, kernel: str, files: list[Path], update: bool) -> int:
    cover_path = paths.PATCHES / kernel / "0000-cover-letter.patch"
    cover = cover_path.read_text()
    names = get_maintainers(src.tree, files)
    bad = 0
    if update and cover_maintainers(cover) != names:
        cover = set_cover_maintainers(cover, names)
        cover_path.write_text(cover)
        print(f"  cover letter: get_maintainer.pl block written ({len(names)} lines)")
    recorded = cover_maintainers(cover)
    if recorded != names:
        bad += 1
        print(f"  cover letter: get_maintainer.pl block {'missing' if recorded is None else 'stale'}; "
              f"run: {sys.executable} -m harness.series --kernel {kernel} --update-cover")
    else:
        print(f"  cover letter: get_maintainer.pl block current ({len(names)} lines)")
    if cover.count("major minor  #blocks  name") < 2:
        bad += 1
        print("  cover letter: no before/after /proc/partitions")
    return bad


if __name__ == "__main__":
    from harness import entry
    entry.run(main)
