"""The guest's initramfs: busybox-static, srprobe, and guest/init.

Written as a newc cpio by hand, so /dev/console can be a device node
without root privileges or mknod.
"""
from __future__ import annotations

import gzip
import io
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .cache import Stamp, key_of
from . import paths
from .errors import SrpartError
from .lock import locked

GUEST = Path(__file__).resolve().parent / "guest-files"
BUSYBOX = Path("/bin/busybox")


@dataclass(frozen=True)
class Entry:
    name: str
    mode: int
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)


class Cpio:
    """Minimal writer for the "newc" format the kernel unpacks."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.ino = 1

    def add(self, e: Entry) -> None:
        name = e.name.encode() + b"\0"
        fields = [self.ino, e.mode, 0, 0, 1, 0, len(e.data), 0, 0, e.rdev[0], e.rdev[1],
                  len(name), 0]
        hdr = b"070701" + b"".join(b"%08X" % f for f in fields)
        self.ino += 1
        self.buf.write(hdr + name)
        self._pad()
        self.buf.write(e.data)
        self._pad()

    def _pad(self) -> None:
        self.buf.write(b"\0" * (-self.buf.tell() % 4))

    def finish(self) -> bytes:
        self.add(Entry("TRAILER!!!", 0))
        return self.buf.getvalue()


HELPERS = ("srprobe", "srctl", "srread", "sropen", "udevsock")     # guest-files/<name>.c, built static into bin/


SCRIPTS = ("hotplug", "firstopen")           # guest-files/<name>, copied to bin/sr<name>


def entries(busybox: bytes, helpers: dict[str, bytes], init: bytes,
            scripts: dict[str, bytes] | None = None) -> list[Entry]:
    d = stat.S_IFDIR | 0o755
    return [
        Entry("bin", d), Entry("dev", d), Entry("proc", d), Entry("sys", d),
        Entry("tmp", d), Entry("mnt", d),
        Entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1)),
        Entry("bin/busybox", stat.S_IFREG | 0o755, busybox),
        Entry("bin/sh", stat.S_IFLNK | 0o777, b"busybox"),
        *(Entry(f"bin/{name}", stat.S_IFREG | 0o755, data) for name, data in helpers.items()),
        *(Entry(f"bin/sr{name}", stat.S_IFREG | 0o755, data)
          for name, data in (scripts or {}).items()),
        Entry("init", stat.S_IFREG | 0o755, init),
    ]


def build_helper(name: str, out: Path) -> bytes:
    cc = shutil.which("gcc")
    if not cc:
        raise SrpartError("gcc not found: apt-get install build-essential")
    r = subprocess.run([cc, "-static", "-Os", "-Wall", "-Werror", "-o", str(out),
                        str(GUEST / f"{name}.c")], capture_output=True, text=True)
    if r.returncode != 0:
        raise SrpartError(f"cannot build {name}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return out.read_bytes()


def build() -> Path:
    """Build build/initramfs/initramfs.cpio.gz when its inputs changed."""
    with locked(paths.BUILD / "locks" / "initramfs.lock"):
        return _build()


def _build() -> Path:
    if not BUSYBOX.exists():
        raise SrpartError(f"{BUSYBOX} not found: apt-get install busybox-static")
    outdir = paths.INITRAMFS
    outdir.mkdir(parents=True, exist_ok=True)
    image = outdir / "initramfs.cpio.gz"
    bb = BUSYBOX.read_bytes()
    init = (GUEST / "init").read_bytes()
    src = b"\0".join((GUEST / f"{h}.c").read_bytes() for h in HELPERS)
    scripts = {name: (GUEST / name).read_bytes() for name in SCRIPTS}
    src += b"\0".join(scripts.values())
    stamp = Stamp(outdir / "stamp", key_of(bb, init, src, sep=b"\0"))
    if stamp.fresh(image):
        return image
    helpers = {h: build_helper(h, outdir / h) for h in HELPERS}
    data = Cpio()
    for e in entries(bb, helpers, init, scripts):
        data.add(e)
    tmp = image.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(data.finish(), compresslevel=6, mtime=0))
    tmp.replace(image)
    stamp.write()
    return image
