"""Build test kernels. Variants of one version share one object tree.

  unpatched      srpart-base (the pristine tarball)
  srpart         branch with patches/<version>/ applied
  sr-only        patches/naive-<version>/: sr drops GENHD_FL_NO_PART and
                 nothing else (upstream parsers), what a naive patch gives,
                 and what v1 gave with CONFIG_CDROM=m (pytest/test_media_without_fixes.py)
  srpart-module  srpart with CONFIG_BLK_DEV_SR=m and CONFIG_CDROM=m, in the
                 same object tree; sr_mod.ko and cdrom.ko go into an extra
                 initramfs archive, modules.cpio.gz. The switch rebuilds about
                 170 files (blkdev.h tests IS_REACHABLE(CONFIG_CDROM)): 130-160 s
                 here, against 340 s for a second cold object tree
  legacy         patches/legacy-<version>/: the 2004 approach, for
                 comparison only (6.1)
  srpart-debug   srpart plus Kconfig.debug.fragment (KASAN, UBSAN, lockdep,
                 kmemleak; own object tree). Built on demand only
                 (`make debug-kernel`), never by `make kernels`.

A variant's bzImage is copied to build/kernels/<version>/<variant>/ with a
stamp of (source tree id, config). A hit costs nothing; a miss checks the
variant's tree out and lets kbuild rebuild what changed (about 10 s between
variants, since kbuild tracks dependencies per config symbol).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import kconfig, paths, source
from .lock import locked
from .errors import SrpartError

# unpatched: srpart-base; srpart: the whole series; sr-only: patches/naive-<v>/
# (sr.c scans, the parsers are upstream's) -- what a naive patch gives, for
# docs/media.md and the tests that show why the parser patches exist.
VARIANTS = ("unpatched", "srpart", "sr-only", "srpart-module", "legacy", "srpart-debug")
ON_DEMAND = ("srpart-debug",)     # not part of "all"
REPORT_ONLY = ("legacy",)   # only make abi-report boots it
DEBUG_SUFFIX = "-debug"
MODULE_SUFFIX = "-module"
MODULE_CONFIG = {"CONFIG_BLK_DEV_SR": "m", "CONFIG_CDROM": "m"}   # sr selects cdrom

# How the series' sr is built, for the tests that run on both: into the kernel
# (the test kernel), or as modules (sr_mod.ko, cdrom.ko) as every distribution
# kernel has them, loaded by the guest init with the command line's sr_mod.*
# options, as udev would: (variant, extra kernel command line).
SR_BUILDS = {"builtin": ("srpart", []),
             "module": ("srpart-module", ["srpart.modprobe=sr_mod"])}


@dataclass(frozen=True)
class Kernel:
    series: str        # "6.1"
    variant: str       # one of VARIANTS
    version: str       # "6.1.192"
    bzimage: Path
    config: Path
    built_seconds: float | None = None   # None: taken from cache
    modules: Path | None = None          # modules.cpio.gz, for -module variants


def record_timing(series: str, variant: str, seconds: float, cold: bool) -> None:
    """Append to build/kernels/<series>/timings.json, which `make bench` reports."""
    f = paths.KERNELS / series / "timings.json"
    rows = json.loads(f.read_text()) if f.exists() else []
    rows.append({"variant": variant, "seconds": round(seconds, 1), "cold": cold,
                 "when": time.strftime("%Y-%m-%dT%H:%M:%S")})
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(rows[-50:], indent=1))


def requested_config(variant: str = "srpart") -> kconfig.Kconfig:
    want = kconfig.Kconfig.read(paths.FRAGMENT)
    if variant.endswith(MODULE_SUFFIX):
        return want.with_options(MODULE_CONFIG)
    if variant.endswith(DEBUG_SUFFIX):
        debug = kconfig.Kconfig.read(paths.ROOT / "Kconfig.debug.fragment")
        return want.with_options(debug.options)
    return want


def make_modules(tree: Path, obj: Path, jobs: int, log: Path, out: Path) -> Path:
    """`make modules modules_install` into a staging root; pack lib/modules as newc cpio.gz."""
    from .initramfs import Cpio, Entry
    import gzip
    import stat

    root = out / "modroot"
    shutil.rmtree(root, ignore_errors=True)
    with open(log, "a") as fh:
        for target in (["modules"], ["modules_install", f"INSTALL_MOD_PATH={root}",
                                     "INSTALL_MOD_STRIP=1"]):
            r = subprocess.run(["make", f"-j{jobs}", f"O={obj}", *target], cwd=tree,
                               stdout=fh, stderr=subprocess.STDOUT)
            if r.returncode != 0:
                raise SrpartError(f"make {target[0]} failed; full log: {log}")
    c = Cpio()
    for d in sorted(root.rglob("*")):
        rel = str(d.relative_to(root))
        if d.is_symlink():
            continue            # build/source links into the tree
        if d.is_dir():
            c.add(Entry(rel, stat.S_IFDIR | 0o755))
        else:
            c.add(Entry(rel, stat.S_IFREG | 0o644, d.read_bytes()))
    cpio = out / "modules.cpio.gz"
    cpio.write_bytes(gzip.compress(c.finish(), compresslevel=6, mtime=0))
    return cpio


def make_bzimage(tree: Path, obj: Path, jobs: int, log: Path, what: str) -> Path:
    """`make bzImage` in object tree `obj`; on failure, print the log's tail and fail naming it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        r = subprocess.run(["make", f"-j{jobs}", f"O={obj}", "bzImage"], cwd=tree,
                           stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        print("\n".join(log.read_text(errors="replace").strip().splitlines()[-15:]))
        raise SrpartError(f"kernel build {what} failed; full log: {log}")
    return obj / "arch/x86/boot/bzImage"


def series_for(series: str, variant: str) -> str | None:
    """The patches/<dir> a variant applies, None for the pristine tree."""
    if variant == "unpatched":
        return None
    if variant == "sr-only":
        return f"naive-{series}"
    return f"legacy-{series}" if variant == "legacy" else series


def available(series: str) -> list[str]:
    """The variants that exist for a kernel version (legacy only where ported)."""
    return [v for v in VARIANTS if v not in ON_DEMAND and
            (series_for(series, v) is None or (paths.PATCHES / series_for(series, v)).is_dir())]


def tested(series: str) -> list[str]:
    """The variants the pytest matrix boots: what `make kernels` builds."""
    return [v for v in available(series) if v not in REPORT_ONLY]


def _ref_for(src: source.KernelSource, series: str, variant: str) -> str:
    if variant in ("srpart" + MODULE_SUFFIX, "srpart" + DEBUG_SUFFIX):
        return series
    if variant == "legacy":
        return f"legacy-{series}"
    if variant == "unpatched":
        return "srpart-base"
    if variant == "srpart":
        return series
    if variant == "sr-only":
        return f"naive-{series}"
    raise SrpartError(f"unknown kernel variant {variant!r}: choose one of {', '.join(VARIANTS)}")


def artifact_dir(series: str, variant: str) -> Path:
    return paths.KERNELS / series / variant


def build(series: str, variant: str, jobs: int | None = None, quiet: bool = False) -> Kernel:
    jobs = jobs or os.cpu_count() or 1
    with locked(paths.BUILD / "locks" / f"kernel-{series}.lock"):
        src = source.extract(series)
        if variant not in VARIANTS:
            _ref_for(src, series, variant)     # raises the error naming the choices
        if variant not in available(series) and variant not in ON_DEMAND:
            raise SrpartError(f"kernel variant {variant} does not exist for {series}: "
                              f"no patches/{series_for(series, variant)}/")
        if series_for(series, variant):
            source.apply_series(src, series_for(series, variant))
        ref = _ref_for(src, series, variant)
        want = requested_config(variant)
        module = variant.endswith(MODULE_SUFFIX)
        key = hashlib.sha256(f"{source.tree_id(src, ref)}\n{want.render()}".encode()).hexdigest()[:16]
        out = artifact_dir(series, variant)
        stamp = out / "stamp"
        mods = out / "modules.cpio.gz" if module else None
        if stamp.exists() and stamp.read_text() == key and (out / "bzImage").exists():
            return Kernel(series, variant, src.version, out / "bzImage", out / "config",
                          modules=mods)
        t0 = time.monotonic()
        source.checkout(src, ref)
        obj = paths.OBJ / (series + (DEBUG_SUFFIX if variant.endswith(DEBUG_SUFFIX) else ""))
        cold = not (obj / "vmlinux").exists()
        kconfig.configure(src.tree, obj, want)
        if not quiet:
            print(f"srpart: building {series} {variant} ({src.version}) in {obj}", flush=True)
        bz = make_bzimage(src.tree, obj, jobs, paths.LOGS / f"build-{series}-{variant}.log",
                          f"{series} {variant}")
        out.mkdir(parents=True, exist_ok=True)
        if module:
            make_modules(src.tree, obj, jobs, paths.LOGS / f"build-{series}-{variant}.log", out)
        shutil.copy2(bz, out / "bzImage")
        shutil.copy2(obj / ".config", out / "config")
        (out / "version").write_text(src.version + "\n")
        stamp.write_text(key)
        seconds = time.monotonic() - t0
        record_timing(series, variant, seconds, cold)
        return Kernel(series, variant, src.version, out / "bzImage", out / "config",
                      built_seconds=seconds, modules=mods)
