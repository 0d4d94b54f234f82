"""Shared fixtures: kernels, initramfs, fixture images, and booting a VM.

No __init__.py in this folder: it would shadow the pytest package itself.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import initramfs, kernel, packages, qemu  # noqa: E402
from harness.vm import VM, BootSpec  # noqa: E402

SERIES = "6.1"


@pytest.fixture(scope="session")
def require_vm_tools() -> None:
    miss = packages.missing()
    if miss:
        pytest.fail(f"missing Debian packages: {' '.join(miss)}; run: {packages.apt_command(miss)}")


@pytest.fixture(scope="session")
def initrd(require_vm_tools) -> Path:
    return initramfs.build()


@pytest.fixture(scope="session")
def kernels(require_vm_tools):
    """kernels(variant) -> Kernel, built once (up to date after `make kernels`)."""
    cache: dict[str, kernel.Kernel] = {}

    def get(variant: str) -> kernel.Kernel:
        if variant not in cache:
            cache[variant] = kernel.build(SERIES, variant, quiet=True)
        return cache[variant]

    return get


@pytest.fixture(scope="session")
def boot(kernels, initrd):
    """boot(variant, images, cmdline, name) -> a started VM (use as a context manager)."""

    def start(variant: str, images: list[Path], cmdline: list[str], name: str) -> VM:
        k = kernels(variant)
        spec = BootSpec(kernel=k.bzimage, initrd=initrd,
                        drives=[qemu.Drive(Path(i)) for i in images], cmdline=cmdline)
        return VM(spec, name)

    return start
