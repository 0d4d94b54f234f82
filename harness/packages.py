"""Debian packages srpart needs, and a check that names what is missing."""
from __future__ import annotations

import subprocess

from .errors import SrpartError

# package -> a file it installs, used to check for it without dpkg locks
PACKAGES: dict[str, str] = {
    "linux-source-6.1": "/usr/src/linux-source-6.1.tar.xz",
    "build-essential": "/usr/bin/gcc",
    "flex": "/usr/bin/flex",
    "bison": "/usr/bin/bison",
    "bc": "/usr/bin/bc",
    "libelf-dev": "/usr/include/libelf.h",
    "libssl-dev": "/usr/include/openssl/ssl.h",
    "cpio": "/usr/bin/cpio",
    "xz-utils": "/usr/bin/xz",
    "kmod": "/usr/bin/kmod",
    "git": "/usr/bin/git",
    "qemu-system-x86": "/usr/bin/qemu-system-x86_64",
    "busybox-static": "/bin/busybox",
    "xorriso": "/usr/bin/xorriso",
    "fdisk": "/usr/sbin/fdisk",
    "e2fsprogs": "/usr/sbin/mke2fs",
    "python3-pytest": "/usr/lib/python3/dist-packages/pytest/__init__.py",
    "python3-pexpect": "/usr/lib/python3/dist-packages/pexpect/__init__.py",
    "python3-pytest-xdist": "/usr/lib/python3/dist-packages/xdist/__init__.py",
    "python3-pytest-timeout": "/usr/lib/python3/dist-packages/pytest_timeout.py",
}


def missing(names: list[str] | None = None) -> list[str]:
    from pathlib import Path

    wanted = names or list(PACKAGES)
    return [p for p in wanted if not Path(PACKAGES[p]).exists()]


def apt_command(pkgs: list[str]) -> str:
    return "apt-get update && apt-get install -y --no-install-recommends " + " ".join(pkgs)


def require(names: list[str] | None = None) -> None:
    """Raise a one-line error naming missing packages and the apt command."""
    miss = missing(names)
    if miss:
        raise SrpartError(f"missing Debian packages: {' '.join(miss)}; run as root: {apt_command(miss)}")


def install_missing() -> list[str]:
    """As root: apt-get update once, then install what is missing."""
    import os

    miss = missing()
    if not miss:
        return []
    if os.geteuid() != 0:
        raise SrpartError(f"missing Debian packages: {' '.join(miss)}; run as root: {apt_command(miss)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *miss], check=True, env=env)
    still = missing()
    if still:
        raise SrpartError(f"apt-get did not install: {' '.join(still)}")
    return miss
