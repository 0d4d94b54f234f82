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
