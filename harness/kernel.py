"""Build test kernels: the variants of one kernel (6.1, 6.12), from one table.

VARIANTS below says, for each variant, which patches/ directory it applies
(its git branch in the extracted tree), what it adds to Kconfig.fragment,
which object tree it builds in, and who builds it. `make kernels` (srpart
build --variant tested) builds the "kernels" ones; booting builds nothing
it was not asked to (see ensure()).

A variant's bzImage is copied to build/kernels/<kernel>/<variant>/ with a
stamp of (source tree id, config). A hit costs nothing; a miss checks the
variant's tree out and lets kbuild rebuild what changed: about 10 s between
variants of one object tree when only sr.o differs, 130-280 s for the
module variant (blkdev.h tests IS_REACHABLE(CONFIG_CDROM)).
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cache import Stamp, key_of
from . import kbuild, kconfig, paths, source
from .lock import locked
from .errors import SrpartError, choose

MODULE_CONFIG = {"CONFIG_BLK_DEV_SR": "m", "CONFIG_CDROM": "m"}   # sr selects cdrom


@dataclass(frozen=True)
class Variant:
    name: str
    patches: str | None          # patches/<dir> ("{kernel}" is filled in); None: pristine
    about: str
    config: dict[str, str] = field(default_factory=dict)   # added to Kconfig.fragment
    fragment: str | None = None  # a second fragment file, added the same way
    obj: str = ""                # object tree build/obj/<kernel><obj>
    built_by: str = "kernels"    # "kernels": make kernels; "report": make abi-report; "demand"
    modules: bool = False        # sr_mod.ko and cdrom.ko packed into modules.cpio.gz
    gcov: tuple[str, ...] = ()   # folders built with GCOV_PROFILE := y (CONFIG_GCOV_KERNEL)

    def patch_dir(self, kernel: str) -> str | None:
        return self.patches.format(kernel=kernel) if self.patches else None

    def base_ref(self, kernel: str) -> str:
        return self.patch_dir(kernel) or "srpart-base"

    def ref(self, kernel: str) -> str:
        """The git branch of the extracted tree the variant builds: its series, plus
        a commit of the harness's that profiles the gcov folders."""
        return self.base_ref(kernel) + ("+gcov" if self.gcov else "")


# The order is the build order of `make kernels`, all in one object tree: each
# step changes as few files as possible. sr-only differs from the pristine
# tree in sr.c only (about 25 s); the series then changes blkdev.h (about 170
# files); the module variant last (IS_REACHABLE(CONFIG_CDROM) in blkdev.h
# again). Built after srpart, sr-only cost 116-124 s instead. v4 dropped
# CONFIG_BLK_DEV_SR_PARTSCAN and with it the srpart-partscan-y variant.
VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("unpatched", None, "the pristine tarball (branch srpart-base)"),
    Variant("sr-only", "naive-{kernel}", "sr drops GENHD_FL_NO_PART and nothing else, "
            "upstream's parsers: a naive patch, and v1 with CONFIG_CDROM=m"),
    Variant("srpart", "{kernel}", "the whole series, sr built in"),
    Variant("srpart-module", "{kernel}", "the series with sr and cdrom as modules, as "
            "distributions build them; init loads sr_mod like udev would",
            config=MODULE_CONFIG, modules=True),
    Variant("legacy", "legacy-{kernel}", "the 2004 approach, for docs/abi-impact.md only",
            built_by="report"),
    Variant("srpart-debug", "{kernel}", "the series plus Kconfig.debug.fragment (KASAN, UBSAN, "
            "lockdep, kmemleak, gcov of block/partitions) for make fuzz/stress",
            fragment="Kconfig.debug.fragment", obj="-debug", built_by="demand",
            gcov=("block/partitions",)),
)}

# How the series' sr is built, for the tests that run on both: into the kernel
# (the test kernel), or as modules (sr_mod.ko, cdrom.ko) as every distribution
# kernel has them, loaded by the guest init with the command line's sr_mod.*
# options, as udev would: (variant, extra kernel command line).
SR_BUILDS = {"builtin": ("srpart", []),
             "module": ("srpart-module", ["srpart.modprobe=sr_mod"])}


def variant(name: str) -> Variant:
    return choose(VARIANTS, name, "kernel variant")


@dataclass(frozen=True)
class Kernel:
    kernel: str        # "6.1"
    variant: str       # a key of VARIANTS
    version: str       # "6.1.192"
    bzimage: Path
    config: Path
    built_seconds: float | None = None   # None: taken from cache
    modules: Path | None = None          # modules.cpio.gz, for variants with modules


def record_timing(kernel: str, variant: str, seconds: float, cold: bool) -> None:
    """Append to build/kernels/<kernel>/timings.json, which `make bench` reports."""
    f = paths.KERNELS / kernel / "timings.json"
    rows = json.loads(f.read_text()) if f.exists() else []
    rows.append({"variant": variant, "seconds": round(seconds, 1), "cold": cold,
                 "when": time.strftime("%Y-%m-%dT%H:%M:%S")})
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(rows[-50:], indent=1))


def requested_config(name: str = "srpart") -> kconfig.Kconfig:
    """Kconfig.fragment plus what the variant adds."""
    v = variant(name)
    want = kconfig.Kconfig.read(paths.FRAGMENT)
    if v.fragment:
        want = want.with_options(kconfig.Kconfig.read(paths.ROOT / v.fragment).options)
    return want.with_options(v.config) if v.config else want


def make_modules(tree: Path, obj: Path, jobs: int, log: Path, out: Path,
                 what: str = "", quiet: bool = False) -> Path:
    """`make modules modules_install` into a staging root; pack lib/modules as newc cpio.gz."""
    from .initramfs import Cpio, Entry
    import gzip
    import stat

    root = out / "modroot"
    shutil.rmtree(root, ignore_errors=True)
    kbuild.make(tree, obj, ["modules"], jobs, log, f"{what} modules", append=True, quiet=quiet)
    kbuild.make(tree, obj, ["modules_install"], jobs, log, f"{what} modules_install",
                extra=[f"INSTALL_MOD_PATH={root}", "INSTALL_MOD_STRIP=1"], append=True,
                quiet=True)
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


def make_bzimage(tree: Path, obj: Path, jobs: int, log: Path, what: str,
                 quiet: bool = False) -> Path:
    """`make bzImage` in object tree `obj`, with progress (harness/kbuild.py); on
    failure, print the log's tail and fail naming it."""
    kbuild.make(tree, obj, ["bzImage"], jobs, log, what, quiet=quiet)
    return obj / "arch/x86/boot/bzImage"


def available(kernel: str) -> list[str]:
    """The variants that exist for a kernel (legacy only where ported), debug aside."""
    return [v.name for v in VARIANTS.values() if v.built_by != "demand" and
            (v.patches is None or (paths.PATCHES / v.patch_dir(kernel)).is_dir())]


def tested(kernel: str) -> list[str]:
    """The variants the pytest matrix boots: what `make kernels` builds."""
    return [n for n in available(kernel) if VARIANTS[n].built_by == "kernels"]


def artifact_dir(kernel: str, variant: str) -> Path:
    return paths.KERNELS / kernel / variant


def build_command(kernel: str, name: str) -> str:
    return (f"make kernels KERNELS={kernel}" if VARIANTS[name].built_by == "kernels" else
            f"./srpart build --kernel {kernel} --variant {name}")


@dataclass(frozen=True)
class _Plan:
    src: source.KernelSource
    variant: Variant
    key: str           # what the artifact's stamp must hold to be current
    out: Path

    def kernel_of(self, built_seconds: float | None = None) -> Kernel:
        return Kernel(self.src.kernel, self.variant.name, self.src.version,
                      self.out / "bzImage", self.out / "config", built_seconds,
                      self.out / "modules.cpio.gz" if self.variant.modules else None)

    @property
    def stamp(self) -> Stamp:
        return Stamp(self.out / "stamp", self.key)

    def current(self) -> bool:
        return self.stamp.fresh(self.out / "bzImage")


def _plan(kernel: str, name: str) -> _Plan:
    """What building a variant means now (call under the kernel's lock): its
    series applied as a branch, and the stamp its artifact must carry."""
    v = variant(name)
    src = source.extract(kernel)
    if name not in available(kernel) and v.built_by != "demand":
        raise SrpartError(f"kernel variant {name} does not exist for {kernel}: "
                          f"no patches/{v.patch_dir(kernel)}/")
    if v.patches:
        source.apply_series(src, v.patch_dir(kernel))
    if v.gcov:
        source.gcov_branch(src, v.base_ref(kernel), v.ref(kernel), v.gcov)
    want = requested_config(name)
    key = key_of(source.tree_id(src, v.ref(kernel)), want.render())
    return _Plan(src, v, key, artifact_dir(kernel, name))


def _lock(kernel: str):
    return locked(paths.BUILD / "locks" / f"kernel-{kernel}.lock")


def built(kernel: str, name: str) -> Kernel:
    """The up-to-date build of a variant, for booting. Booting never builds: a
    missing or stale kernel is one line naming the command that builds it."""
    with _lock(kernel):
        plan = _plan(kernel, name)
        if plan.current():
            return plan.kernel_of()
    why = "stale (its series, tree or config changed)" if plan.stamp.exists() \
        else "not built"
    raise SrpartError(f"kernel {kernel} {name} is {why}: run `{build_command(kernel, name)}`")


def build(kernel: str, name: str, jobs: int | None = None, quiet: bool = False) -> Kernel:
    """Build a variant unless its artifact is current; the build stage's one entry."""
    jobs = jobs or os.cpu_count() or 1
    with _lock(kernel):
        plan = _plan(kernel, name)
        if plan.current():
            return plan.kernel_of()
        src, v, out = plan.src, plan.variant, plan.out
        t0 = time.monotonic()
        source.checkout(src, v.ref(kernel))
        obj = paths.OBJ / (kernel + v.obj)
        # cold: a new object tree; one that a stopped build left half full is not
        cold = not (obj / ".config").exists()
        kconfig.configure(src.tree, obj, requested_config(name))
        if not quiet:
            print(f"srpart: building {kernel} {name} ({src.version}) in {obj}", flush=True)
        log = paths.LOGS / f"build-{kernel}-{name}.log"
        bz = make_bzimage(src.tree, obj, jobs, log, f"{kernel} {name}", quiet=quiet)
        out.mkdir(parents=True, exist_ok=True)
        if v.modules:
            make_modules(src.tree, obj, jobs, log, out, f"{kernel} {name}", quiet)
        shutil.copy2(bz, out / "bzImage")
        shutil.copy2(obj / ".config", out / "config")
        (out / "version").write_text(src.version + "\n")
        plan.stamp.write()
        seconds = time.monotonic() - t0
        record_timing(kernel, name, seconds, cold)
        return plan.kernel_of(seconds)
