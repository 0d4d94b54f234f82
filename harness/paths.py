"""Where things live. Everything generated goes under build/ (git-ignored)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("SRPART_BUILD", ROOT / "build"))
SRC = BUILD / "src"
OBJ = BUILD / "obj"
KERNELS = BUILD / "kernels"
LOGS = BUILD / "logs"
FIXTURES = BUILD / "fixtures"
INITRAMFS = BUILD / "initramfs"
PATCHES = ROOT / "patches"
FRAGMENT = ROOT / "Kconfig.fragment"
TARBALL_DIR = Path(os.environ.get("SRPART_TARBALL_DIR", "/usr/src"))


def project_revision() -> str:
    """`git describe --always --dirty` of this checkout, for generated reports."""
    import subprocess

    r = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                       text=True, capture_output=True)
    return r.stdout.strip() or "unknown"
