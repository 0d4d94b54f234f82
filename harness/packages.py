"""Debian packages srpart needs (harness/debian-packages.txt), and a check naming what is missing.

Installing is harness/deps.sh's job (`make deps`): it must work before
Python itself is installed.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from .errors import SrpartError

LIST = Path(__file__).resolve().parent / "debian-packages.txt"


def wanted() -> list[str]:
    return [ln.strip() for ln in LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def missing(names: list[str] | None = None) -> list[str]:
    names = names or wanted()
    r = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\\n", *names],
                       capture_output=True, text=True)
    installed = {ln.split()[0] for ln in r.stdout.splitlines() if ln.endswith(" installed")}
    return [n for n in names if n not in installed]


def apt_command(pkgs: list[str]) -> str:
    return "apt-get update && apt-get install -y --no-install-recommends " + " ".join(pkgs)


def require(names: list[str] | None = None) -> None:
    """Raise a one-line error naming missing packages and the apt command."""
    miss = missing(names)
    if miss:
        raise SrpartError(f"missing Debian packages: {' '.join(miss)}; as root run: {apt_command(miss)}")
