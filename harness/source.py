"""Kernel source: extract Debian's tarball into build/src and apply a series.

The tree is a git repository with two refs:
  srpart-base  the pristine tarball contents
  <kernel>     a branch with patches/<kernel>/*.patch applied by `git am`
Switching the work tree between refs only touches the files the kernel
changes, so one object tree serves every variant of a kernel version.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .cache import Stamp
from . import paths
from .errors import SrpartError

GIT_ID = ["-c", "user.name=srpart harness", "-c", "user.email=srpart@example.org",
          "-c", "core.excludesFile=/dev/null", "-c", "gc.auto=0", "-c", "advice.detachedHead=false"]
KNOWN_KERNELS = ("6.1", "6.12")


@dataclass(frozen=True)
class KernelSource:
    kernel: str          # "6.1", "6.12"
    tree: Path           # extracted source, a git work tree
    version: str         # full version read from the tree's Makefile, e.g. 6.1.192


def tarball_for(kernel: str) -> Path:
    if kernel not in KNOWN_KERNELS:
        raise SrpartError(f"unknown kernel {kernel!r}: choose one of {', '.join(KNOWN_KERNELS)}")
    tb = paths.TARBALL_DIR / f"linux-source-{kernel}.tar.xz"
    if not tb.exists():
        raise SrpartError(f"{tb} not found: install it with apt-get install linux-source-{kernel}")
    return tb


def makefile_version(tree: Path) -> str:
    text = (tree / "Makefile").read_text(errors="replace")
    fields = {}
    for key in ("VERSION", "PATCHLEVEL", "SUBLEVEL"):
        m = re.search(rf"^{key}\s*=\s*(\d+)\s*$", text, re.M)
        if not m:
            raise SrpartError(f"{tree}/Makefile has no {key}: not a kernel tree")
        fields[key] = m.group(1)
    return f"{fields['VERSION']}.{fields['PATCHLEVEL']}.{fields['SUBLEVEL']}"


def _git(tree: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *GIT_ID, *args], cwd=tree, text=True, capture_output=True, check=check)


def _tarball_id(tb: Path) -> str:
    st = tb.stat()
    return f"{tb.name} {st.st_size} {int(st.st_mtime)}"


def extract(kernel: str) -> KernelSource:
    """Extract the tarball once; re-extract when Debian updates it."""
    tb = tarball_for(kernel)
    top = paths.SRC / f"linux-source-{kernel}"
    stamp = Stamp(paths.SRC / f"linux-source-{kernel}.stamp", _tarball_id(tb))
    if not stamp.fresh(top / ".git"):
        paths.SRC.mkdir(parents=True, exist_ok=True)
        if top.exists():
            subprocess.run(["rm", "-rf", str(top)], check=True)
        stamp.drop()
        print(f"srpart: extracting {tb}", flush=True)
        subprocess.run(["tar", "-xJf", str(tb), "-C", str(paths.SRC)], check=True)
        if not top.is_dir():
            raise SrpartError(f"{tb} did not contain linux-source-{kernel}/")
        # Debian's top-level .gitignore ignores everything: add with -f
        _git(top, "init", "-q")
        _git(top, "add", "-A", "-f")
        _git(top, "commit", "-q", "-m", f"{tb.name} pristine")
        _git(top, "tag", "-f", "srpart-base")
        stamp.write()
    version = makefile_version(top)
    if not (version == kernel or version.startswith(kernel + ".")):
        raise SrpartError(f"{tb} holds kernel {version}, not {kernel}")
    return KernelSource(kernel=kernel, tree=top, version=version)


def series_files(name: str) -> list[Path]:
    d = paths.PATCHES / name
    if not d.is_dir():
        raise SrpartError(f"no patch series {d}")
    files = sorted(p for p in d.glob("*.patch") if not p.name.startswith("0000-"))
    if not files:
        raise SrpartError(f"{d} holds no patches")
    return files


def series_hash(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)


def describe_failure(tree: Path, patch: Path) -> str:
    """Name the file and hunk of `patch` that does not apply to `tree`."""
    r = subprocess.run(["git", "apply", "--check", "-v", str(patch)], cwd=tree, text=True,
                       capture_output=True)
    out = r.stderr + r.stdout
    m = re.search(r"error: patch failed: (\S+):(\d+)", out)
    if m:
        fname, line = m.group(1), int(m.group(2))
        hunk = _hunk_number(patch.read_text(errors="replace"), fname, line)
        where = f"hunk #{hunk}" if hunk else "a hunk"
        return f"{where} of {fname} (at line {line})"
    m = re.search(r"error: (\S+): (does not exist in index|No such file or directory|already exists)", out)
    if m:
        return f"{m.group(1)}: {m.group(2)}"
    lines = [ln for ln in out.splitlines() if ln.startswith("error:")]
    return lines[0] if lines else "git am refused it"


def _hunk_number(text: str, fname: str, line: int) -> int | None:
    sections = re.split(r"^diff --git ", text, flags=re.M)
    for sec in sections[1:]:
        if not sec.startswith(f"a/{fname} "):
            continue
        for i, m in enumerate(_HUNK.finditer(sec), 1):
            if int(m.group(1)) == line:
                return i
    return None


def apply_series(src: KernelSource, name: str) -> str:
    """Make branch `name` = srpart-base + patches/<name> (git am); return its commit.

    Skipped when the branch already holds this exact series (same hash).
    """
    files = series_files(name)
    want = series_hash(files)
    tree = src.tree
    stamp = Stamp(tree / ".git" / f"srpart-series-{name.replace('/', '_')}", want)
    have = _git(tree, "rev-parse", "-q", "--verify", f"refs/heads/{name}", check=False)
    if have.returncode == 0 and stamp.fresh():
        return have.stdout.strip()
    _git(tree, "am", "--abort", check=False)
    _git(tree, "checkout", "-q", "-f", "srpart-base")
    _git(tree, "branch", "-f", name, "srpart-base")
    _git(tree, "checkout", "-q", name)
    for f in files:
        r = _git(tree, "am", "-q", str(f), check=False)
        if r.returncode != 0:
            _git(tree, "am", "--abort", check=False)
            _git(tree, "checkout", "-q", "-f", "srpart-base")
            _git(tree, "branch", "-D", name, check=False)
            stamp.drop()
            raise SrpartError(f"{f.relative_to(paths.ROOT)} does not apply to linux-source-{src.kernel} "
                              f"{src.version}: {describe_failure(tree, f)}")
    stamp.write()
    return _git(tree, "rev-parse", "HEAD").stdout.strip()


def gcov_branch(src: KernelSource, base: str, name: str, folders: tuple[str, ...]) -> str:
    """Branch `name` = `base` + one commit that sets GCOV_PROFILE := y in each
    folder's Makefile, so that CONFIG_GCOV_KERNEL profiles those folders only.
    Kept while its parent is still `base`'s commit."""
    tree = src.tree
    parent = _git(tree, "rev-parse", f"refs/heads/{base}^{{commit}}" if base != "srpart-base"
                  else "srpart-base^{commit}").stdout.strip()
    have = _git(tree, "rev-parse", "-q", "--verify", f"refs/heads/{name}^", check=False)
    if have.returncode == 0 and have.stdout.strip() == parent:
        return _git(tree, "rev-parse", f"refs/heads/{name}").stdout.strip()
    _git(tree, "checkout", "-q", "-f", "-B", name, parent)
    for folder in folders:
        mk = tree / folder / "Makefile"
        if not mk.exists():
            raise SrpartError(f"no {folder}/Makefile in linux-source-{src.kernel} to profile")
        mk.write_text(mk.read_text() + "\n# srpart: gcov of this folder only (debug kernels)\n"
                      "GCOV_PROFILE := y\n")
        _git(tree, "add", "-f", str(mk.relative_to(tree)))
    _git(tree, "-c", "user.name=srpart", "-c", "user.email=srpart@localhost", "commit", "-q",
         "-m", f"srpart: GCOV_PROFILE in {' '.join(folders)}")
    return _git(tree, "rev-parse", "HEAD").stdout.strip()


def checkout(src: KernelSource, ref: str) -> None:
    """Point the work tree at `ref`; only files that differ get new mtimes."""
    _git(src.tree, "checkout", "-q", "-f", ref)


def git_out(src: KernelSource, *args: str) -> str:
    """stdout of a git command in the extracted tree."""
    return _git(src.tree, *args).stdout


def tree_id(src: KernelSource, ref: str) -> str:
    """The git tree `ref` holds: what a kernel built from it depends on."""
    return _git(src.tree, "rev-parse", f"{ref}^{{tree}}").stdout.strip()
