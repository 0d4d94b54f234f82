"""The guest's userspaces: busybox (the fast default) or Debian's own udev.

    apt-get download (build/userspace/debs) -> dpkg-deb -x (build/userspace/root)
    -> archive: the executables below with the shared libraries their ELF
       DT_NEEDED entries name, resolved inside the unpacked root the way
       initramfs-tools' copy_exec resolves them with ldd, the stock rules,
       and the project's rules for "udev-srpart"
    -> build/userspace/<name>.cpio.gz, appended to the busybox initramfs.

Nothing is installed on the host. The guest init (guest-files/init) sees
/lib/systemd/systemd-udevd and boots as a real system does: udevd --daemon,
`udevadm trigger --action=add`, `udevadm settle`; udev then loads sr_mod by
modalias on module kernels (with the command line's sr_mod.* options, as
libkmod reads them) and probes every device with its own programs.
"""
from __future__ import annotations

import gzip
import os
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .cache import Stamp, key_of
from . import paths
from .errors import SrpartError, choose
from .lock import locked

DIR = paths.BUILD / "userspace"
RULES = paths.PATCHES / "udev"          # the project's rules files

# Debian 12 packages: udev and util-linux, and every library their
# executables need (resolve() fails naming a library none of them holds)
PACKAGES = ("udev", "libudev1", "util-linux", "mount", "libblkid1", "libmount1",
            "libsmartcols1", "libkmod2", "libacl1", "libcap2", "libselinux1",
            "libpcre2-8-0", "libc6", "libzstd1", "liblzma5", "libssl3")

# What the guest runs, at Debian's paths (they shadow busybox's applets:
# `busybox --install -s` does not replace a file that exists)
EXECUTABLES = ("bin/udevadm", "sbin/blkid", "bin/lsblk", "bin/findmnt", "bin/mount",
               "bin/umount", "usr/bin/partx")
PROGRAM_DIR = "lib/udev"                # cdrom_id, ata_id, scsi_id, ...: every file there
RULES_DIR = "lib/udev/rules.d"
LIB_DIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "lib", "usr/lib")
ETC = {
    # GROUP="disk" / "cdrom" in 50-udev-default.rules resolve through these
    "etc/group": b"root:x:0:\ndisk:x:6:\ncdrom:x:24:\ntty:x:5:\nkmem:x:15:\n",
    "etc/passwd": b"root:x:0:0:root:/:/bin/sh\n",
}


@dataclass(frozen=True)
class Userspace:
    name: str
    about: str
    udev: bool = False
    rules: tuple[str, ...] = field(default=())     # patches/udev files added to the stock rules
    patch: str | None = None     # a patches/udev patch applied to the stock rules (systemd's tree)


USERSPACES: dict[str, Userspace] = {u.name: u for u in (
    Userspace("busybox", "busybox, srprobe and a uevent-helper stand-in: the matrix's fast default"),
    Userspace("udev", "Debian 12's systemd-udevd, udevadm and stock rules; util-linux", udev=True),
    Userspace("udev-srpart", "as udev, plus patches/udev/61-srpart-partitions.rules", udev=True,
              rules=("61-srpart-partitions.rules",)),
    Userspace("udev-patched", "as udev, with patches/udev/60-persistent-storage.rules.patch "
              "applied (the change proposed to systemd)", udev=True,
              patch="60-persistent-storage.rules.patch"),
)}


def userspace(name: str) -> Userspace:
    return choose(USERSPACES, name, "userspace")


def debs() -> dict[str, Path]:
    """apt-get download each package once into build/userspace/debs."""
    d = DIR / "debs"
    d.mkdir(parents=True, exist_ok=True)
    have = {p.name.split("_")[0]: p for p in d.glob("*.deb")}
    want = [p for p in PACKAGES if p not in have]
    if want:
        r = subprocess.run(["apt-get", "download", *want], cwd=d, capture_output=True, text=True)
        if r.returncode != 0:
            err = [ln for ln in r.stderr.splitlines() if ln.startswith("E:")] or ["?"]
            raise SrpartError(f"apt-get download {' '.join(want)} failed: {err[0]} "
                              "(as root: apt-get update)")
        have = {p.name.split("_")[0]: p for p in d.glob("*.deb")}
    return {p: have[p] for p in PACKAGES}


def versions() -> dict[str, str]:
    """Package -> Debian version of the downloaded packages (for reports)."""
    return {p: f.name.split("_")[1] for p, f in debs().items()}


def unpack(files: dict[str, Path]) -> Path:
    root = DIR / "root"
    stamp = Stamp(DIR / "root.stamp", key_of(*sorted(f.name for f in files.values())))
    if stamp.fresh(root):
        return root
    subprocess.run(["rm", "-rf", str(root)], check=True)
    root.mkdir(parents=True)
    for f in files.values():
        r = subprocess.run(["dpkg-deb", "-x", str(f), str(root)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SrpartError(f"dpkg-deb -x {f} failed: {r.stderr.strip()}")
    stamp.write()
    return root


def needed(elf: Path) -> list[str]:
    """The DT_NEEDED entries of an ELF file (readelf -d); [] for a script."""
    if elf.read_bytes()[:4] != b"\x7fELF":
        return []
    r = subprocess.run(["readelf", "-d", str(elf)], capture_output=True, text=True)
    return [ln.split("[", 1)[1].split("]", 1)[0] for ln in r.stdout.splitlines() if "(NEEDED)" in ln]


def real(root: Path, rel: str) -> Path:
    """rel's file inside root, following symlinks (absolute ones inside root)."""
    p = root / rel
    for _ in range(20):
        if not p.is_symlink():
            return p
        t = os.readlink(p)
        p = root / t.lstrip("/") if t.startswith("/") else p.parent / t
    raise SrpartError(f"symlink loop at {rel} in {root}")


def resolve(root: Path, programs: list[str]) -> dict[str, Path]:
    """Archive path -> file for programs and, transitively, the libraries they need."""
    out: dict[str, Path] = {}
    todo = list(programs)
    while todo:
        rel = todo.pop()
        if rel in out:
            continue
        f = real(root, rel)
        if not f.is_file():
            raise SrpartError(f"{rel} is not in the unpacked packages ({root}): "
                              f"harness/userspace.py PACKAGES lacks the package that ships it")
        out[rel] = f
        for lib in needed(f):
            where = next((f"{d}/{lib}" for d in LIB_DIRS if real(root, f"{d}/{lib}").is_file()), None)
            if where is None:
                raise SrpartError(f"{lib}, needed by {rel}, is in none of the packages "
                                  f"{', '.join(PACKAGES)}: add its package to "
                                  "harness/userspace.py PACKAGES")
            todo.append(where)
    return out


def patched(rules: dict[str, bytes], patch: Path) -> dict[str, bytes]:
    """The rules files `patch` (paths rules.d/<name>, as in systemd's tree) changes,
    changed; one clear line when it no longer applies to this udev's rules."""
    import tempfile

    if not patch.is_file():
        raise SrpartError(f"rules patch not found: {patch}")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "rules.d"
        d.mkdir()
        for rel, data in rules.items():
            (d / Path(rel).name).write_bytes(data)
        r = subprocess.run(["git", "apply", "-p1", str(patch)], cwd=tmp, capture_output=True,
                           text=True)
        if r.returncode != 0:
            err = (r.stderr.strip().splitlines() or ["?"])[0]
            raise SrpartError(f"{patch.name} does not apply to the stock rules of the "
                              f"downloaded udev package: {err}")
        return {rel: (d / Path(rel).name).read_bytes() for rel in rules
                if (d / Path(rel).name).read_bytes() != rules[rel]}


def archive(u: Userspace, root: Path) -> bytes:
    from .initramfs import Cpio, Entry

    progs = list(EXECUTABLES) + sorted(f"{PROGRAM_DIR}/{p.name}" for p in (root / PROGRAM_DIR).iterdir()
                                       if p.is_file() and os.access(p, os.X_OK))
    files = resolve(root, progs)
    rules = {f"{RULES_DIR}/{p.name}": p.read_bytes() for p in sorted((root / RULES_DIR).glob("*.rules"))}
    if u.patch:
        rules.update(patched(rules, RULES / u.patch))
    for name in u.rules:
        f = RULES / name
        if not f.is_file():
            raise SrpartError(f"rules file not found: {f}")
        rules[f"{RULES_DIR}/{name}"] = f.read_bytes()
    d, reg = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o755
    dirs = sorted({str(Path(p).parent) for p in [*files, *rules, *ETC, "lib/systemd/x", "lib64/x", "run/x"]})
    every = sorted({str(a) for p in dirs for a in [Path(p), *Path(p).parents] if str(a) != "."})
    c = Cpio()
    for p in every:
        c.add(Entry(p, d))
    for rel, f in sorted(files.items()):
        c.add(Entry(rel, reg, f.read_bytes()))
    c.add(Entry("lib/systemd/systemd-udevd", stat.S_IFLNK | 0o777, b"/bin/udevadm"))
    c.add(Entry("lib64/ld-linux-x86-64.so.2", stat.S_IFLNK | 0o777,
                b"/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"))
    for rel, data in sorted(rules.items()):
        c.add(Entry(rel, stat.S_IFREG | 0o644, data))
    for rel, data in ETC.items():
        c.add(Entry(rel, stat.S_IFREG | 0o644, data))
    return c.finish()


def build(name: str) -> Path | None:
    """build/userspace/<name>.cpio.gz (None for busybox: the base initramfs is all of it)."""
    u = userspace(name)
    if not u.udev:
        return None
    with locked(paths.BUILD / "locks" / "userspace.lock"):
        files = debs()
        rules = b"".join((RULES / r).read_bytes() for r in (*u.rules, u.patch or "")
                         if r and (RULES / r).is_file())
        out = DIR / f"{u.name}.cpio.gz"
        stamp = Stamp(DIR / f"{u.name}.stamp",
                      key_of(*sorted(f.name for f in files.values()), rules,
                             Path(__file__).read_bytes()))
        if stamp.fresh(out):
            return out
        root = unpack(files)
        tmp = out.with_suffix(".tmp")
        tmp.write_bytes(gzip.compress(archive(u, root), compresslevel=6, mtime=0))
        tmp.replace(out)
        stamp.write()
        return out
