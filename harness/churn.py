"""Media swaps and hot-plug under readers, and their invariants: the logic
`make stress` (harness/stress_run.py) and pytest/test_stress.py share.
See stress_run's docstring for what each churn does and checks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import guest, oracle
from .vm import VM

SWAP_KINDS = ("mbr2048", "sgi-direct", "sun-xorriso")   # sr0p1 differs between neighbours
HOTPLUG_KIND = "mbr2048"
WAIT_S = 60            # per swap / per plug: the sanitizer kernel under TCG is slow
SETTLE_S = guest.MINOR_SETTLE_S   # with no partitions left: their minors are free again

READER_DISK = ("n=0; while [ ! -e /tmp/stop ]; do dd if=/dev/sr0 of=/dev/null bs=64k 2>/dev/null"
               " && n=$((n+1)); echo $n > /tmp/reader-disk; done; echo done >> /tmp/reader-disk")
READER_PART = ("mkdir -p /mnt/p; n=0; while [ ! -e /tmp/stop ]; do "
               "if mount -o ro /dev/sr0p1 /mnt/p 2>/dev/null; then "
               "for j in 1 2 3; do find /mnt/p -type f | xargs cat >/dev/null 2>&1 && "
               "dd if=/dev/sr0p1 of=/dev/null bs=64k 2>/dev/null && n=$((n+1)); done; "
               "umount /mnt/p; fi; echo $n > /tmp/reader-part; sleep 0.1; done; "
               "echo done >> /tmp/reader-part")


@dataclass
class Churn:
    what: str
    rounds: int = 0
    seconds: float = 0.0
    disk_reads: int = 0          # whole passes of the srN reader
    part_reads: int = 0          # passes of the srNp1 reader that completed
    minors_before: list[int] = field(default_factory=list)
    minors_after: list[int] = field(default_factory=list)
    kmemleak: bool = False
    leaks: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        leak = (f"{len(self.leaks)} leaks" if self.leaks else
                "clean" if self.kmemleak else "not in this kernel")
        readers = (f"srN {self.disk_reads} passes, srNp1 {self.part_reads} passes"
                   if self.what == "media swaps" else f"srNp1 {self.part_reads} passes")
        return (f"{self.what}: {self.rounds} in {self.seconds:.0f} s "
                f"({self.seconds / max(self.rounds, 1):.2f} s each); readers: {readers}; "
                f"extended minors {self.minors_before} -> {self.minors_after}; kmemleak {leak}")


def _layout(img) -> str:
    """What the guest prints for drive 0 with LAYOUT_CMD, from the host oracle."""
    parts = oracle.expected(img.table, img.path).parts
    return " ".join(f"{p.number}:{p.start}:{p.size}" for p in sorted(parts, key=lambda p: p.number))


def _minors(vm: VM) -> list[int]:
    return guest.parse_ext_minors(vm.check(guest.ext_minors_cmd()))


def _finish(vm: VM, c: Churn) -> None:
    """Extended minors back to the starting set, then the kmemleak scan.

    A dropped partition gives its minor back only when its block device's
    inode is freed, after an RCU grace period (bdev_free_inode()), so a
    rescan right after a drop may get higher minors. Callers first leave no
    partition of the churned drive for SETTLE_S seconds; then IDA hands the
    lowest free minors out again and anything leaked shows as a different set.
    """
    c.minors_after = _minors(vm)
    if c.minors_after != c.minors_before:
        c.problems.append(f"extended minors {c.minors_before} at the start, {c.minors_after} "
                          "at the end")
    c.kmemleak, c.leaks = guest.parse_kmemleak(vm.check(guest.kmemleak_cmd(), timeout=600))
    if c.leaks:
        c.problems.append(f"kmemleak: {len(c.leaks)} unreferenced objects, first:\n"
                          + c.leaks[0])


def swap_images():
    from fixtures import catalog
    return [catalog.first(k) for k in SWAP_KINDS]


def swaps(vm: VM, count: int) -> Churn:
    """`count` forced media swaps on cd0 under two readers. The VM booted with
    swap_images()[0] in its only drive and has QMP."""
    imgs = swap_images()
    c = Churn("media swaps")
    vm.check("srprobe /dev/sr0")
    first = _layout(imgs[0])
    if vm.check(guest.layout_cmd(0)).strip() != first:
        c.problems.append(f"at boot sr0 shows {vm.check(guest.layout_cmd(0)).strip()!r}, "
                          f"oracle {first!r}")
        return c
    c.minors_before = _minors(vm)
    vm.check("rm -f /tmp/stop /tmp/reader-*; "
             f"( {READER_DISK} ) >/dev/null 2>&1 & ( {READER_PART} ) >/dev/null 2>&1 &")
    t = time.monotonic()
    i = 0
    while i < count or i % len(imgs):      # then on until the first disc is back
        i += 1
        img = imgs[i % len(imgs)]
        vm.qmp.change_medium("cd0", img.path, force=True)
        want = _layout(img)
        r = vm.run(guest.wait_cmd(f'[ "$({guest.layout_cmd(0)})" = "{want}" ]', WAIT_S),
                   timeout=WAIT_S + 30)
        if r.status:
            c.problems.append(f"swap {i} ({img.kind}): sr0 shows "
                              f"{vm.check(guest.layout_cmd(0)).strip()!r} after {WAIT_S} s, "
                              f"oracle {want!r}")
            break
        c.rounds += i <= count
    c.seconds = time.monotonic() - t
    vm.check("touch /tmp/stop; " + guest.wait_cmd(
        "grep -q done /tmp/reader-disk && grep -q done /tmp/reader-part", WAIT_S),
        timeout=WAIT_S + 30)
    c.disk_reads = int(vm.check("head -n1 /tmp/reader-disk").strip() or 0)
    c.part_reads = int(vm.check("head -n1 /tmp/reader-part").strip() or 0)
    # the first disc is back; empty the drive, let the minors go, put it back
    vm.qmp.change_medium("cd0", None)
    vm.check("srprobe /dev/sr0; " + guest.wait_cmd("[ ! -e /sys/block/sr0/sr0p1 ]", WAIT_S),
             timeout=WAIT_S + 30)
    vm.check(f"sleep {SETTLE_S}")
    vm.qmp.change_medium("cd0", imgs[0].path)
    vm.check("srprobe /dev/sr0; " + guest.wait_cmd(f'[ "$({guest.layout_cmd(0)})" = "{first}" ]', WAIT_S),
             timeout=WAIT_S + 30)
    _finish(vm, c)
    return c


def hotplug(vm: VM, count: int) -> Churn:
    """`count` plug / mount / unplug-under-mount cycles of a second drive."""
    from fixtures import catalog

    img = catalog.image(HOTPLUG_KIND, catalog.drive_label(1, HOTPLUG_KIND))
    want = _layout(img)
    part = img.data[0]
    c = Churn("hot-plug cycles")
    c.minors_before = _minors(vm)
    t = time.monotonic()
    for i in range(count):
        vm.qmp.add_cd("hot1", img.path, scsi_id=1)
        vm.check(guest.wait_cmd("[ -e /sys/block/sr1 ]", WAIT_S), timeout=WAIT_S + 30)
        vm.check("srprobe /dev/sr1")
        dev = vm.check("cat /sys/block/sr1/dev").strip()
        got = vm.check(guest.layout_cmd(1)).strip()
        if dev != "11:1" or got != want:
            c.problems.append(f"cycle {i + 1}: sr1 is {dev} with {got!r}, oracle {want!r}")
            break
        vm.check(f"mkdir -p /mnt/h && mount -t {part.fstype} -o ro /dev/sr1p{part.number} /mnt/h")
        vm.check("rm -f /tmp/hot-reads; ( while find /mnt/h -type f | xargs cat >/dev/null 2>&1 && dd if=/dev/sr1p1 of=/dev/null bs=64k "
                 "2>/dev/null; do echo x >> /tmp/hot-reads; done; echo stop >> /tmp/hot-reads ) "
                 ">/dev/null 2>&1 &")
        vm.check(guest.wait_cmd("grep -q x /tmp/hot-reads", WAIT_S), timeout=WAIT_S + 30)
        vm.qmp.del_device("hot1", timeout=WAIT_S)
        vm.check(guest.wait_cmd("[ ! -e /sys/block/sr1 ] && grep -q stop /tmp/hot-reads", WAIT_S),
                 timeout=WAIT_S + 30)
        vm.check("umount /mnt/h")
        c.part_reads += int(vm.check("grep -c x /tmp/hot-reads || true").strip() or 0)
        c.rounds += 1
    c.seconds = time.monotonic() - t
    vm.check(f"sleep {SETTLE_S}")
    _finish(vm, c)
    return c
