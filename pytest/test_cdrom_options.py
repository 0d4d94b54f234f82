"""cdrom.ko's options with partition scanning on (issue 27: bug A and every option).

cdrom's options change what an open and a release of a drive do: `autoclose`
closes an open tray on a blocking open, `autoeject` ejects the medium on the
last release of an open for data, `lockdoor` locks the door while the drive is
open for data, `check_media_type` refuses a disc without a data track. The
partition scan opens and releases the drive where the unpatched kernel never
does: when sr probes a drive (at boot, on hot-plug, on `modprobe sr_mod`).

Each option is set as a user sets it: on the kernel command line (sr and cdrom
built in), as cdrom.ko's parameter before sr_mod is loaded (modules), or with
its sysctl once the drives exist (it then applies to the drives already
registered and to the ones plugged later). The same drives then go through the
same events on the unpatched kernel, with the same option: a probe of a closed
tray with a disc, of an open tray and of an empty drive, a hot-plug, an open
held and closed, a media change and a read, a read of a drive whose tray is
open. Every tray and door state (QEMU's, over QMP) and every open's result
must be the unpatched kernel's, and every partition the oracle's.

Seen failing: on the v3 series (patch 12 ORs O_NDELAY into its local copy of the
open's mode only), 6.1 with autoeject, built in, as modules and by sysctl: the
probe ejects every disc it scanned ((cd0, True, False) for (cd0, False, False)),
the hot-plugged one too; 6.12 passes, as cdrom_release() keeps the open's
decision in cdi->opened_for_data there.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from fixtures import catalog
from harness import guest, oracle
from harness.kernel import SR_BUILDS

pytestmark = pytest.mark.vm

# Waits for every probe the SCSI host is running: a scan from user space takes
# the host's scan_mutex, which the boot's asynchronous scan and a hot-plugged
# device's scsi_add_device() hold until sr_probe() (and so device_add_disk()
# with its partition scan) has returned. Target 0 exists in every VM here.
SCSI_SETTLED = "echo '0 0 0' > /sys/class/scsi_host/host0/scan"


@dataclass(frozen=True)
class Setting:
    options: dict[str, int] = field(default_factory=dict)
    sysctl: bool = False       # written to /proc/sys/dev/cdrom after the probe

    def cmdline(self) -> list[str]:
        return [] if self.sysctl else [f"cdrom.{k}={v}" for k, v in self.options.items()]

    def module_args(self) -> str:
        return "" if self.sysctl else " ".join(f"{k}={v}" for k, v in self.options.items())


# cdrom.ko's parameter -> its sysctl under /proc/sys/dev/cdrom
SYSCTL = {"autoclose": "autoclose", "autoeject": "autoeject", "lockdoor": "lock",
          "check_media_type": "check_media"}

# cdrom.ko's defaults: autoclose=1 autoeject=0 lockdoor=1 check_media_type=0
SETTINGS = {
    "defaults": Setting(),
    "autoeject": Setting({"autoeject": 1}),
    "no-autoclose": Setting({"autoclose": 0}),
    "no-lockdoor": Setting({"lockdoor": 0}),
    "check-media-type": Setting({"check_media_type": 1}),
    "all-changed": Setting({"autoeject": 1, "autoclose": 0, "lockdoor": 0, "check_media_type": 1}),
    "sysctl-autoeject": Setting({"autoeject": 1}, sysctl=True),
    "sysctl-all-changed": Setting({"autoeject": 1, "autoclose": 0, "lockdoor": 0,
                                   "check_media_type": 1}, sysctl=True),
}


def _images():
    return catalog.first("mbr2048"), catalog.first("sun-xorriso")


def _scenario(vm, setting: Setting, load: str | None) -> tuple[list[tuple], dict]:
    """Run the events; (trace of tray/door states and open results, partitions seen)."""
    mbr, sun = _images()
    trace: list[tuple] = []
    parts: dict[str, list] = {}

    def note(step: str, dev: str, *extra) -> None:
        trace.append((step, dev, *vm.qmp.tray_and_lock(dev), *extra))

    # the second drive is probed with its tray open: after the boot, as SeaBIOS
    # closes trays while it looks for boot media (docs/lifecycle.md)
    if load:
        vm.qmp.open_tray("cd1")
        vm.check(load)
        vm.check(guest.wait_cmd("[ -e /sys/block/sr2 ]"))
    else:
        vm.check(SCSI_SETTLED)
        guest.reprobe_with_tray_open(vm, "cd1", 1, 1)
    vm.check(SCSI_SETTLED)
    for dev in ("cd0", "cd1", "cd2"):
        note("probe", dev)
    parts["probe"] = [guest.drive_partitions_of(vm, k) for k in range(3)]

    if setting.sysctl:
        for k, v in setting.options.items():
            vm.check(f"echo {v} > /proc/sys/dev/cdrom/{SYSCTL[k]}")

    vm.qmp.add_cd("hot3", mbr.path, scsi_id=3)
    vm.check(guest.wait_cmd("[ -e /sys/block/sr3 ]"))
    vm.check(SCSI_SETTLED)
    note("hot-plug", "hot3")
    parts["hot-plug"] = guest.drive_partitions_of(vm, 3)

    # an open for data held by a process, then closed: the door while it is
    # held, the tray after the last release
    vm.check("mkfifo /tmp/go && ( sh -c 'exec 3</dev/sr3; echo ok > /tmp/held; "
             "read x < /tmp/go; exec 3<&-; echo ok > /tmp/released' "
             "|| echo failed > /tmp/held ) >/dev/null 2>&1 &")
    vm.check(guest.wait_cmd("[ -s /tmp/held ]"))
    note("held", "hot3", vm.check("cat /tmp/held").strip())
    vm.check("echo > /tmp/go")
    vm.check(guest.wait_cmd("[ -s /tmp/released ]"))
    note("released", "hot3")

    vm.qmp.change_medium("cd0", sun.path)
    read = _read(vm, "/dev/sr0")
    note("media-change-read", "cd0", read)
    parts["media-change-read"] = guest.drive_partitions_of(vm, 0), read

    read = _read(vm, "/dev/sr1")
    note("read-open-tray", "cd1", read)
    parts["read-open-tray"] = guest.drive_partitions_of(vm, 1), read

    note("read-empty", "cd2", _read(vm, "/dev/sr2"))
    return trace, parts


def _read(vm, dev: str) -> str:
    """A blocking open and a read of the first 4 blocks: how many came, or the error."""
    r = vm.run(f"dd if={dev} of=/dev/null bs=2048 count=4 2>&1")
    lines = r.output.strip().splitlines()
    records = [ln for ln in lines if ln.endswith("records in")]
    return records[0] if r.status == 0 and records else f"failed: {lines[-1] if lines else ''}"


def _boot(boot, variant: str, setting: Setting, cmdline: list[str], name: str):
    mbr, sun = _images()
    return boot(variant, [mbr.path, sun.path, None], [*cmdline, *setting.cmdline()], name,
                qmp=True).start()


_REFERENCE: dict[tuple[str, str], list[tuple]] = {}


@pytest.fixture
def reference(boot, kernel):
    """The unpatched kernel's trace for a setting: once per kernel and setting."""
    def get(name: str) -> list[tuple]:
        key = (kernel, name)
        if key not in _REFERENCE:
            vm = _boot(boot, "unpatched", SETTINGS[name], [], f"cdopt-{name}-unpatched")
            try:
                _REFERENCE[key] = _scenario(vm, SETTINGS[name], None)[0]
            finally:
                vm.stop()
        return _REFERENCE[key]
    return get


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(f"cdopt-{n}"))
                                  for n in SETTINGS])
def test_cdrom_option_as_unpatched(boot, sr_build, reference, name):
    setting = SETTINGS[name]
    want = reference(name)
    variant, _ = SR_BUILDS[sr_build]
    if sr_build == "builtin":
        vm = _boot(boot, variant, setting, ["sr_mod.partscan=1"], f"cdopt-{name}-{sr_build}")
        load = None
    else:      # the modules are loaded by hand: cdrom's parameters before sr_mod probes
        vm = _boot(boot, variant, setting, [], f"cdopt-{name}-{sr_build}")
        load = f"modprobe cdrom {setting.module_args()} && modprobe sr_mod partscan=1"
    try:
        got, parts = _scenario(vm, setting, load)
    finally:
        vm.stop()
    diff = [f"{g}  unpatched: {w}" for g, w in zip(got, want) if g != w]
    assert got == want, ("trays, doors or opens differ from the unpatched kernel with the "
                         "same option:\n" + "\n".join(diff))

    mbr, sun = _images()
    assert parts["probe"] == [oracle.triples_of(mbr), [], []]
    assert parts["hot-plug"] == oracle.triples_of(mbr)
    # whatever an open for data could read, it scanned
    for step, k in (("media-change-read", 0), ("read-open-tray", 1)):
        got_k, read = parts[step]
        assert got_k == (oracle.triples_of(sun) if read == "4+0 records in" else []), \
            f"sr{k} after {step} ({read})"
