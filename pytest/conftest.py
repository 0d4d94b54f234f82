"""Shared fixtures: kernels, initramfs, fixture images, and booting a VM.

No __init__.py in this folder: it would shadow the pytest package itself.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import initramfs, packages, paths  # noqa: E402
from harness.kernel import SR_BUILDS  # noqa: E402
from harness.vm import VM, boot_spec, running  # noqa: E402

# Every VM test runs on each kernel: test ids carry it ([6.1-...], [6.12-...]),
# so `-k 6.12` selects one. SRPART_KERNELS="6.1" narrows the run.
KERNELS = os.environ.get("SRPART_KERNELS", "6.1 6.12").split()


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (make check, make bench): one and a half workers per core. A
    TCG guest often waits (media polling, sleeps, QMP round trips): with one
    worker per core the two cores were 34% idle through the matrix. Both
    kernels, 2 cores: 2 workers 718 s, 3 workers 584 s (15% idle), 4 workers
    571 s (5% idle, every VM slower)."""
    return max(1, (os.cpu_count() or 1) * 3 // 2)


_CHANNEL = paths.LOGS / "channel.tsv"


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):    # the controller, not an xdist worker
        session.config._srpart_channel_at = _CHANNEL.stat().st_size if _CHANNEL.exists() else 0


def pytest_terminal_summary(terminalreporter, config):
    """The command channel over the run (harness/vm.py's channel.tsv): how many
    commands, and the slowest start of any (a command that does not start within
    its timeout fails its test)."""
    at = getattr(config, "_srpart_channel_at", None)
    if at is None or not _CHANNEL.exists():
        return
    with open(_CHANNEL, "rb") as fh:
        fh.seek(at)
        rows = [ln.split("\t") for ln in fh.read().decode().splitlines() if ln.count("\t") == 2]
    if rows:
        vms, cmds = len(rows), sum(int(r[1]) for r in rows)
        slowest = max(rows, key=lambda r: float(r[2]))
        terminalreporter.write_line(
            f"srpart console: {vms} VMs, {cmds} commands; the slowest start {float(slowest[2]):.2f} s "
            f"({slowest[0]}; build/logs/channel.tsv)")


@pytest.fixture(scope="session")
def require_vm_tools() -> None:
    miss = packages.missing()
    if miss:
        pytest.fail(f"missing Debian packages: {' '.join(miss)}; run: {packages.apt_command(miss)}")


@pytest.fixture(scope="session")
def initrd(require_vm_tools) -> Path:
    return initramfs.build()


@pytest.fixture(autouse=True)
def kernel_log_slice(request):
    """Every test gets its own slice of the kernel log of each VM it shares with
    other tests (a module-scoped VM): a marker line goes to /dev/kmsg before the
    test and after it, and what the kernel printed between them is checked in
    the test's teardown, so a WARNING, or any line a `quiet_kernel(*patterns)`
    mark names, fails the test that caused it rather than the next one. A VM
    the test starts itself is checked as a whole when it stops."""
    shared = running()
    begin = {id(vm): vm.mark(f"begin {request.node.nodeid}") for vm in shared}
    yield
    quiet = request.node.get_closest_marker("quiet_kernel")
    for vm in shared:
        if vm.child is None:          # the test stopped it: stop() checked the log
            continue
        end = vm.mark(f"end {request.node.nodeid}")     # raises on a bad pattern
        if quiet:
            noisy = [ln for ln in vm.kernel_log(begin[id(vm)], end).splitlines()
                     if any(p in ln for p in quiet.args)]
            if noisy:
                pytest.fail(f"kernel log of {vm.name} during this test:\n" + "\n".join(noisy),
                            pytrace=False)


@pytest.fixture(scope="session", params=KERNELS)
def kernel(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def boot(initrd, kernel):
    """boot(variant, drives, cmdline, name) -> a VM to start (or use as a context
    manager). A drive is a path (a scsi-cd holding it), None (an empty one) or a
    qemu.Drive (any other drive: a scsi-hd, a block size, read errors).

    Booting builds nothing: `make kernels` builds the variants (vm.boot_spec says
    which one is stale and how to rebuild it).
    """

    def start(variant: str, images: list, cmdline: list[str], name: str,
              qmp: bool = False, userspace: str = "busybox") -> VM:
        return VM(boot_spec(kernel, variant, images, cmdline, qmp=qmp, userspace=userspace),
                  f"{kernel}-{name}")

    return start


@pytest.fixture(scope="session", params=list(SR_BUILDS))
def sr_build(request) -> str:
    """"builtin" or "module": every test that boots through partscan_on or lvm runs on both."""
    return request.param


@pytest.fixture(scope="session")
def partscan_on(boot, sr_build):
    """partscan_on(images, name) -> the srpart kernel (sr built in or as modules, see
    SR_BUILDS) with sr_mod.partscan=1 and one scsi-cd per fixture image; use it as a
    context manager (`with ... as vm`), which stops the VM and checks its log on the
    way out."""
    variant, extra = SR_BUILDS[sr_build]

    def make(images, name: str) -> VM:
        return boot(variant, [i.path for i in images], ["sr_mod.partscan=1", *extra],
                    f"{name}-{sr_build}")

    return make


def _vm_factory(boot, request, build: str | None):
    """start(images, cmdline[, variant]) -> a started VM with QMP; stop_all() after the test.
    Without a variant, sr is built as `build` says (kernel.SR_BUILDS)."""
    started = []

    def start(images, cmdline, variant=None):
        extra = []
        if variant is None:
            variant, extra = SR_BUILDS[build]
        vm = boot(variant, images, [*cmdline, *extra],
                  f"life-{request.node.name}-{len(started)}", qmp=True)
        vm.start()
        started.append(vm)
        return vm

    def stop_all():
        for vm in started:
            vm.stop()

    return start, stop_all


@pytest.fixture
def lvm(boot, request, sr_build):
    """lvm(images, cmdline) -> a started VM with QMP, sr built in or as modules
    (every test that uses it runs on both), stopped after the test."""
    start, stop_all = _vm_factory(boot, request, sr_build)
    yield start
    stop_all()


@pytest.fixture
def lvm_explicit(boot, request):
    """Like lvm, for tests that compare the builds themselves: the variant is always given."""
    start, stop_all = _vm_factory(boot, request, None)
    yield start
    stop_all()
