"""srpart-dkms: the sr half of the series as a Debian DKMS package (issue 28).

Stages, each reading only what the one before wrote under build/dkms/:
  sources   the series' drivers/scsi/sr*.c of each kernel tree (branch <kernel>,
            patches/<kernel> applied), adapted to a stock kernel's block layer
            (dkms/compat.h; a 512-unit medium is not scanned), plus dkms/ and
            patches/udev/61-srpart-partitions.rules: a Debian source tree
  package   dpkg-buildpackage (debhelper, dh-dkms) -> srpart-dkms_<v>_all.deb,
            then lintian, which must report no error and no warning
  images    Debian's own kernel images (apt-get download linux-image-<abi>,
            dpkg-deb -x into build/dkms/root/, never rebuilt) and their headers
            (apt-get install linux-headers-<abi> on the host: nothing is loaded)
  build     Debian's dkms builds and installs the module from the package's
            /usr/src (extracted into the same root) for each ABI, with trees
            under build/dkms/ (--dkmstree, --sourcetree, --installtree)
  modules   lib/modules/<abi> for the guest: the modules a drive needs (virtio,
            SCSI, cdrom, sr_mod, isofs), Debian's own, decompressed, with
            depmod run over them; "stock" has Debian's sr_mod, "dkms" adds the
            DKMS one under updates/dkms, which depmod prefers, as on a system

The version is the series': [PATCH v5 ...] -> 5.0.
"""
from __future__ import annotations

import argparse
import gzip
import re
import stat
import shutil
import subprocess
import time
from pathlib import Path

from . import paths, source
from .errors import SrpartError

KERNELS = ("6.1", "6.12")
FILES = ("sr.c", "sr.h", "sr_ioctl.c", "sr_vendor.c", "scsi_logging.h")
DKMS = paths.ROOT / "dkms"
UDEV_RULES = paths.PATCHES / "udev" / "61-srpart-partitions.rules"
OUT = paths.BUILD / "dkms"

# On a stock kernel GD_512_TABLES does not exist and the parsers read every
# table natively: a medium sr finds to count 512-byte sectors is not scanned.
# The stock disk_scan_partitions() tests GD_SUPPRESS_PART_SCAN (compat.h's
# GD_SKIP_PART_SCAN) before it opens, so no scan opens the drive at probe and
# the first open after it revalidates the medium again: say it from opens only.
STOCK_OLD = "\tassign_bit(GD_512_TABLES, &cd->disk->state, units == SR_UNITS_512);\n"
STOCK_NEW = ("#ifdef SRPART_STOCK_BLOCK\n"
             "\t/* srpart-dkms: this kernel's msdos.c and efi.c read every table natively */\n"
             "\tif (units == SR_UNITS_512) {\n"
             "\t\t/* once: sr_probe() flags a change that the first open sees */\n"
             "\t\tif (test_bit(GD_ADDED, &cd->disk->state))\n"
             "\t\t\tsr_printk(KERN_INFO, cd,\n"
             "\t\t\t\t  \"tables in 512-byte sectors, which this kernel's parsers cannot "
             "read: not scanned\\n\");\n"
             "\t\tscan = false;\n"
             "\t}\n"
             "#else\n" + STOCK_OLD + "#endif\n")
STOCK_LINE = "tables in 512-byte sectors, which this kernel's parsers cannot read: not scanned"


def series_version(kernel: str = "6.1") -> str:
    """5.0 for a series whose cover letter says [PATCH v5 00/NN]."""
    cover = paths.PATCHES / kernel / "0000-cover-letter.patch"
    m = re.search(r"^Subject: \[PATCH v(\d+) 00/\d+\]", cover.read_text(), re.M)
    if not m:
        raise SrpartError(f"{cover}: no [PATCH vN 00/NN] subject to take the package version from")
    return f"{m.group(1)}.0"


def stock_sr(text: str, kernel: str) -> str:
    if STOCK_OLD not in text:
        raise SrpartError(f"sr.c of the {kernel} series has no GD_512_TABLES decision to adapt "
                          f"for stock kernels (harness/dkms.py STOCK_OLD)")
    return text.replace(STOCK_OLD, STOCK_NEW)


def _git_show(tree: Path, rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=tree, text=True,
                          capture_output=True, check=True).stdout


def sources(version: str) -> Path:
    """build/dkms/srpart-dkms-<version>/: the Debian source tree of the package."""
    top = OUT / f"srpart-dkms-{version}"
    if top.exists():
        shutil.rmtree(top)
    mod = top / "module"
    (mod / "src").mkdir(parents=True)
    for name in ("Kbuild", "Makefile", "compat.h"):
        shutil.copy(DKMS / name, mod / name)
    (mod / "srpart_version.c").write_text(
        (DKMS / "srpart_version.c.in").read_text().replace("@VERSION@", version))
    for k in KERNELS:
        src = source.extract(k)
        rev = source.apply_series(src, k)
        d = mod / "src" / k
        d.mkdir()
        for f in FILES:
            text = _git_show(src.tree, rev, f"drivers/scsi/{f}")
            (d / f).write_text(stock_sr(text, k) if f == "sr.c" else text)
        (d / "SOURCE").write_text(src.version + "\n")
    shutil.copy(UDEV_RULES, top / UDEV_RULES.name)
    shutil.copytree(DKMS / "debian", top / "debian")
    for f in (top / "debian").iterdir():
        if f.is_file():
            f.write_text(f.read_text().replace("@VERSION@", version))
    (top / "debian" / "rules").chmod(0o755)
    when = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(
        int(subprocess.run(["git", "-C", str(paths.ROOT), "log", "-1", "--format=%ct"],
                           text=True, capture_output=True).stdout.strip() or time.time())))
    (top / "debian" / "changelog").write_text(
        f"srpart-dkms ({version}) unstable; urgency=medium\n\n"
        f"  * sr_mod of the srpart series v{version.split('.')[0]} "
        f"(Linux {', '.join(KERNELS)}), built by DKMS.\n\n"
        f" -- srpart developers <srpart@example.org>  {when}\n")
    return top


def package(top: Path, version: str) -> Path:
    """dpkg-buildpackage, then lintian; returns the .deb."""
    log = paths.LOGS / "dkms-package.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        r = subprocess.run(["dpkg-buildpackage", "-b", "-us", "-uc", "--no-pre-clean"], cwd=top,
                           stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode:
        raise SrpartError(f"dpkg-buildpackage failed (exit {r.returncode}): see {log}")
    deb = OUT / f"srpart-dkms_{version}_all.deb"
    if not deb.exists():
        raise SrpartError(f"dpkg-buildpackage wrote no {deb.name}: see {log}")
    changes = next(OUT.glob(f"srpart-dkms_{version}_*.changes"))
    out = lintian(changes)
    (paths.LOGS / "dkms-lintian.log").write_text(out)
    bad = [ln for ln in out.splitlines() if ln[:2] in ("E:", "W:")]
    if bad:
        raise SrpartError("lintian: " + "; ".join(bad))
    return deb


def lintian(path: Path) -> str:
    r = subprocess.run(["lintian", "--info", "--display-level", ">=warning", str(path)],
                       text=True, capture_output=True)
    if r.returncode not in (0, 1, 2):
        raise SrpartError(f"lintian failed (exit {r.returncode}): {r.stderr.strip()}")
    return r.stdout + r.stderr


# The ABIs the package is tested on: the newest of each series that apt
# offers, resolved when `make dkms` runs and recorded in build/dkms/abis.
ABI_PATTERNS = {"6.1": r"^linux-image-(6\.1\.0-\d+-amd64)$",
                "6.12": r"^linux-image-(6\.12\.\d+\+deb12-amd64)$"}
ROOT = OUT / "root"
# those that are modules; virtio_console carries the command channel (the init loads it)
GUEST_MODULES = ("virtio_pci", "virtio_scsi", "sr_mod", "isofs", "virtio_console")
LOAD_ORDER = ("virtio_pci", "virtio_scsi", "sr_mod")     # what udev would load, in order


def newest_abis() -> dict[str, str]:
    out = subprocess.run(["apt-cache", "pkgnames", "linux-image-6."], text=True,
                         capture_output=True, check=True).stdout.split()
    abis = {}
    for k, pat in ABI_PATTERNS.items():
        found = sorted((m.group(1) for m in map(re.compile(pat).match, out) if m),
                       key=lambda a: [int(x) for x in re.findall(r"\d+", a)])
        if not found:
            raise SrpartError(f"apt offers no linux-image for Linux {k} ({pat}): apt-get update?")
        abis[k] = found[-1]
    return abis


def abis() -> dict[str, str]:
    """The ABIs `make dkms` prepared (build/dkms/abis)."""
    f = OUT / "abis"
    if not f.exists():
        raise SrpartError("no Debian kernel images prepared: run `make dkms`")
    return dict(line.split() for line in f.read_text().splitlines() if line.strip())


def _run(cmd: list[str], log: Path, what: str) -> None:
    with open(log, "a") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        r = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=OUT)
    if r.returncode:
        raise SrpartError(f"{what} failed (exit {r.returncode}): see {log}")


def images(want: dict[str, str]) -> None:
    """Debian's kernel images into build/dkms/root/, their headers on the host."""
    log = paths.LOGS / "dkms-images.log"
    debs = OUT / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    for k, abi in want.items():
        if not (ROOT / "boot" / f"vmlinuz-{abi}").exists():
            for old in debs.glob(f"linux-image-{abi}_*.deb"):
                old.unlink()
            subprocess.run(["apt-get", "download", "-q", f"linux-image-{abi}"], cwd=debs,
                           capture_output=True)
            deb = next(debs.glob(f"linux-image-{abi}_*.deb"), None)
            if deb is None:
                raise SrpartError(f"apt-get download linux-image-{abi} failed")
            _run(["dpkg-deb", "-x", str(deb), str(ROOT)], log, f"dpkg-deb -x {deb.name}")
        if not Path(f"/lib/modules/{abi}/build/Makefile").exists():
            print(f"srpart: installing linux-headers-{abi} (host; nothing is loaded)", flush=True)
            _run(["apt-get", "install", "-y", "-q", "--no-install-recommends",
                  f"linux-headers-{abi}"], log, f"apt-get install linux-headers-{abi}")
    (OUT / "abis").write_text("".join(f"{k} {a}\n" for k, a in want.items()))


def dkms_build(version: str, want: dict[str, str]) -> dict[str, Path]:
    """dkms install from the package's /usr/src into ROOT; returns each ABI's make.log."""
    deb = OUT / f"srpart-dkms_{version}_all.deb"
    log = paths.LOGS / "dkms-build.log"
    log.write_text("")
    _run(["dpkg-deb", "-x", str(deb), str(ROOT)], log, f"dpkg-deb -x {deb.name}")
    tree = OUT / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir()
    logs = {}
    for k, abi in want.items():
        for old in (ROOT / "lib" / "modules" / abi / "updates").glob("dkms/sr_mod.ko*"):
            old.unlink()
        _run(["dkms", "install", f"srpart/{version}", "-k", abi, "--dkmstree", str(tree),
              "--sourcetree", str(ROOT / "usr" / "src"),
              "--installtree", str(ROOT / "lib" / "modules")], log, f"dkms install for {abi}")
        logs[abi] = tree / "srpart" / version / abi / "x86_64" / "log" / "make.log"
    return logs


def _deps(ko: Path) -> list[str]:
    out = subprocess.run(["modinfo", "-F", "depends", str(ko)], text=True,
                         capture_output=True, check=True).stdout.strip()
    return [d for d in out.split(",") if d]


def _find(tree: Path, name: str) -> Path:
    for ext in (".ko", ".ko.xz"):
        hits = [p for p in tree.rglob(name + ext) if "updates" not in p.parts]
        if hits:
            return hits[0]
    alt = name.replace("_", "-") if "_" in name else name.replace("-", "_")
    if alt != name:
        return _find(tree, alt)
    raise SrpartError(f"{tree}: no module {name}")


def _builtin(abi: str) -> set[str]:
    """Names of the modules Debian builds into this kernel (modules.builtin)."""
    f = ROOT / "lib" / "modules" / abi / "modules.builtin"
    return {Path(line.strip()).name.removesuffix(".ko").replace("-", "_")
            for line in f.read_text().splitlines() if line.strip()}


def guest_cmdline(kernel: str) -> list[str]:
    """The init's srpart.modprobe= list for Debian's image of `kernel`: the modules
    a drive needs that this kernel has as modules (6.1: virtio_pci too)."""
    builtin = _builtin(abis()[kernel])
    return ["srpart.modprobe=" + ",".join(m for m in LOAD_ORDER if m not in builtin)]


def modules_cpio(abi: str, which: str) -> Path:
    """build/dkms/modules-<abi>-<which>.cpio.gz: lib/modules/<abi> for the guest
    (made by `make dkms`; remade under a lock if an input is newer)."""
    from .lock import locked

    with locked(paths.BUILD / "locks" / f"dkms-modules-{which}.lock"):
        return _modules_cpio(abi, which)


def _modules_cpio(abi: str, which: str) -> Path:
    from .initramfs import Cpio, Entry

    if which not in ("stock", "dkms"):
        raise SrpartError(f"modules: {which!r} is neither stock nor dkms")
    src = ROOT / "lib" / "modules" / abi
    # vm._joined() names the joined initrd after the part before the first dot
    out = OUT / f"modules-{abi.replace('.', '_')}-{which}.cpio.gz"
    dkms_ko = next(iter(sorted((src / "updates" / "dkms").glob("sr_mod.ko*"))), None)
    if which == "dkms" and dkms_ko is None:
        raise SrpartError(f"no DKMS sr_mod for {abi}: run `make dkms`")
    inputs = [p for p in (ROOT / "boot" / f"vmlinuz-{abi}", dkms_ko) if p]
    stamp = out.with_name(out.name + ".stamp")
    key = " ".join(GUEST_MODULES) + "\n"
    if out.exists() and stamp.exists() and stamp.read_text() == key and \
            all(out.stat().st_mtime >= p.stat().st_mtime for p in inputs):
        return out
    stage = OUT / f"stage-{abi}-{which}"
    shutil.rmtree(stage, ignore_errors=True)
    kdir = stage / "lib" / "modules" / abi
    todo, seen = list(GUEST_MODULES), set()
    builtin = _builtin(abi)
    while todo:
        name = todo.pop()
        if name in seen or name in builtin:
            continue
        seen.add(name)
        ko = _find(src / "kernel", name)
        todo += _deps(ko)
        dst = kdir / ko.relative_to(src)
        dst = dst.with_name(dst.name.removesuffix(".xz"))
        dst.parent.mkdir(parents=True, exist_ok=True)
        data = ko.read_bytes()
        dst.write_bytes(subprocess.run(["xz", "-dc"], input=data, capture_output=True,
                                       check=True).stdout if ko.suffix == ".xz" else data)
    if which == "dkms":
        dst = kdir / "updates" / "dkms" / "sr_mod.ko"
        dst.parent.mkdir(parents=True, exist_ok=True)
        data = dkms_ko.read_bytes()
        dst.write_bytes(subprocess.run(["xz", "-dc"], input=data, capture_output=True,
                                       check=True).stdout if dkms_ko.suffix == ".xz" else data)
    for f in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
        if (src / f).exists():
            shutil.copy(src / f, kdir / f)
    subprocess.run(["depmod", "-b", str(stage), abi], check=True, capture_output=True)
    dep = (kdir / "modules.dep").read_text()
    want_sr = "updates/dkms/sr_mod.ko:" if which == "dkms" else "kernel/drivers/scsi/sr_mod.ko:"
    if not any(line.startswith(want_sr) for line in dep.splitlines()):
        raise SrpartError(f"depmod over {stage} did not choose {want_sr.rstrip(':')}")
    c = Cpio()
    for d in sorted(stage.rglob("*")):
        rel = str(d.relative_to(stage))
        c.add(Entry(rel, stat.S_IFDIR | 0o755) if d.is_dir()
              else Entry(rel, stat.S_IFREG | 0o644, d.read_bytes()))
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(c.finish(), compresslevel=6, mtime=0))
    tmp.replace(out)
    stamp.write_text(key)
    return out


def measure_build(abi: str) -> float:
    """Seconds dkms takes to build sr_mod for `abi` from the package's source."""
    import tempfile
    version = series_version()
    with tempfile.TemporaryDirectory() as d:
        t = time.monotonic()
        r = subprocess.run(["dkms", "build", f"srpart/{version}", "-k", abi, "--dkmstree", d,
                            "--sourcetree", str(ROOT / "usr" / "src")], capture_output=True, text=True)
        took = time.monotonic() - t
    if r.returncode:
        raise SrpartError(f"dkms build for {abi} failed: {r.stdout[-500:]}{r.stderr[-500:]}")
    return took


def junit_seconds(junit: Path) -> float | None:
    """Test time of pytest/test_dkms.py in a JUnit file, None without one."""
    import xml.etree.ElementTree as ET
    if not junit.exists():
        return None
    cases = [c for c in ET.parse(junit).iter("testcase") if "test_dkms" in c.get("classname", "")]
    return sum(float(c.get("time", 0)) for c in cases) if cases else None


def recorded_make_seconds() -> float | None:
    f = OUT / "make-seconds"
    return float(f.read_text()) if f.exists() else None


def debian_kernel(kernel: str, which: str):
    """Debian's kernel image of series `kernel` with the stock or the DKMS sr_mod,
    as a kernel.Kernel for vm.boot_spec (variants debian-stock, debian-dkms)."""
    from .kernel import Kernel

    abi = abis().get(kernel)
    if abi is None:
        raise SrpartError(f"no Debian kernel image for Linux {kernel}: run `make dkms`")
    bz = ROOT / "boot" / f"vmlinuz-{abi}"
    if not bz.exists():
        raise SrpartError(f"{bz} missing: run `make dkms`")
    return Kernel(kernel=kernel, variant=f"debian-{which}", version=abi, bzimage=bz,
                  config=ROOT / "boot" / f"config-{abi}", modules=modules_cpio(abi, which))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="srpart dkms", description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    t0 = time.monotonic()
    version = series_version()
    top = sources(version)
    deb = package(top, version)
    print(f"srpart: {deb} (lintian: no error, no warning)", flush=True)
    want = newest_abis()
    images(want)
    for abi, log in dkms_build(version, want).items():
        print(f"srpart: dkms built sr_mod {version} for {abi} (log: {log})", flush=True)
        for which in ("stock", "dkms"):
            modules_cpio(abi, which)
    (OUT / "make-seconds").write_text(f"{time.monotonic() - t0:.1f}\n")
    return 0


if __name__ == "__main__":
    from harness import entry
    entry.run(main)
