"""The distribution's kernel configuration, for what the test kernels must match.

Debian ships each kernel's configs in linux-config-<ver> (one .xz per
flavour); srpart compares its fragment with the amd64 flavour:

    apt-get download linux-config-6.1 -> build/distconfig/<deb>
    dpkg-deb --fsys-tarfile | config.amd64_none_amd64.xz -> Kconfig

The partition-parser symbols are the ones block/partitions/Kconfig of the
pristine tree defines, so a parser a later kernel adds is compared too.
"""
from __future__ import annotations

import io
import lzma
import re
import subprocess
import tarfile
from pathlib import Path

from . import paths, source
from .errors import SrpartError
from .kconfig import Kconfig

DIR = paths.BUILD / "distconfig"
FLAVOUR = "amd64_none_amd64"
PARSER_KCONFIG = "block/partitions/Kconfig"
_CONFIG = re.compile(r"^\s*(?:menu)?config\s+(\w+)\s*$", re.M)


def package(kernel: str) -> str:
    return f"linux-config-{kernel}"


def deb(kernel: str) -> Path:
    """linux-config-<kernel>'s .deb, downloaded once into build/distconfig."""
    DIR.mkdir(parents=True, exist_ok=True)
    have = sorted(DIR.glob(f"{package(kernel)}_*.deb"))
    if have:
        return have[-1]
    r = subprocess.run(["apt-get", "download", package(kernel)], cwd=DIR,
                       capture_output=True, text=True)
    have = sorted(DIR.glob(f"{package(kernel)}_*.deb"))
    if r.returncode != 0 or not have:
        err = [ln for ln in r.stderr.splitlines() if ln.startswith("E:")] or ["?"]
        raise SrpartError(f"apt-get download {package(kernel)} failed: {err[0]} "
                          "(as root: apt-get update)")
    return have[-1]


def config_from_deb(path: Path, kernel: str, flavour: str = FLAVOUR) -> Kconfig:
    """The flavour's .config inside a linux-config .deb."""
    want = f"./usr/src/{package(kernel)}/config.{flavour}.xz"
    r = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(path)], capture_output=True)
    if r.returncode != 0:
        raise SrpartError(f"dpkg-deb --fsys-tarfile {path} failed: "
                          f"{r.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tar:
        try:
            member = tar.extractfile(want)
        except KeyError:
            member = None
        if member is None:
            raise SrpartError(f"{path} holds no {want}")
        return Kconfig.parse(lzma.decompress(member.read()).decode())


def debian(kernel: str) -> Kconfig:
    """Debian's amd64 configuration of `kernel`."""
    return config_from_deb(deb(kernel), kernel)


def symbols_defined(kconfig_text: str) -> list[str]:
    """CONFIG_ names of the `config`/`menuconfig` entries of a Kconfig file."""
    return [f"CONFIG_{m}" for m in _CONFIG.findall(kconfig_text)]


def parser_symbols(kernel: str) -> list[str]:
    """Every option of block/partitions/Kconfig in the pristine tree of `kernel`."""
    src = source.extract(kernel)
    return symbols_defined(source.git_out(src, "show", f"srpart-base:{PARSER_KCONFIG}"))


def enabled(config: Kconfig, names: list[str]) -> set[str]:
    return {n for n in names if config.options.get(n, "n") in ("y", "m")}
