"""Booted malformed media against the kernel's invariants: the logic `make
fuzz` (harness/fuzz_run.py) and pytest/test_fuzz.py share. See fuzz_run's
docstring for the invariants.

On sr (2048-byte blocks) the images are swapped in round by round; on
scsi-hd (512- and 4096-byte blocks, the syzkaller and 4Kn cases) each image
is a disk of its own, booted once under the unpatched kernel and once under
the series, and the series must give the unpatched partitions, except for
what its fixes name: no partition that ends beyond the disk (the unpatched
kernel makes them only when start + size wraps, patches 0006-0007), and on
blocks above 512 bytes none that starts inside a block (patch 0008).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import guest, oracle
from .console import GuestError
from .errors import SrpartError
from .vm import VM

PER_VM = 8          # drives per VM
ROUNDS = 8          # images per drive per VM: one at probe, ROUNDS-1 media swaps
SD_PER_VM = 32      # scsi-hd disks per VM (one image each, no swaps)


@dataclass
class VmResult:
    processed: int = 0                     # images whose round finished
    partitions: int = 0
    failures: list[tuple[list, list[str]]] = field(default_factory=list)  # (cases, problems)
    kmemleak: bool = False                 # the kernel has kmemleak and the scan ran
    leaks: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    images: int = 0
    vms: int = 0
    partitions: int = 0
    failures: list[str] = field(default_factory=list)
    scans: int = 0                         # kmemleak scans
    leaks: int = 0
    seconds: float = 0.0


def check_batch(vm: VM, n: int) -> tuple[int, list[str]]:
    """The invariants for drives sr0..sr<n-1>; returns (partitions seen, problems)."""
    problems = []
    vm.check(" ".join(["srprobe"] + [f"/dev/sr{k}" for k in range(n)]) + " || true")
    sizes = {}
    for d in guest.parse_disks(vm.check(guest.DISKS_CMD, timeout=60)):
        sizes[d.name] = d.size
        if d.dev != f"11:{d.name[2:]}":
            problems.append(f"{d.name} is {d.dev}, not 11:{d.name[2:]}")
    if len(sizes) != n:
        problems.append(f"{len(sizes)} sr disks, {n} drives")
    parts = guest.parse_sys_partitions(vm.check(guest.PARTITIONS_CMD, timeout=180))
    for p in parts:
        disk = p.name.split("p")[0]
        if p.start % 4 or p.size % 4:
            problems.append(f"{p.name}: start {p.start} size {p.size} not 2048-aligned")
        if p.start + p.size > sizes.get(disk, 0):
            problems.append(f"{p.name}: {p.start}+{p.size} beyond the medium ({sizes.get(disk)})")
        if p.major != 259:
            problems.append(f"{p.name} is {p.major}:{p.minor}, not on the extended major")
    return len(parts), problems


def rounds_of(cases: list, per_vm: int = PER_VM) -> list[list]:
    return [cases[i:i + per_vm] for i in range(0, len(cases), per_vm)]


def fuzz_vm(vm: VM, cases: list) -> VmResult:
    """Check the probed first round, swap the rest in round by round (the VM
    needs QMP and must have booted with the first round's images), then scan
    for leaks. Stops at the first failing round."""
    res = VmResult()
    rounds = rounds_of(cases)
    drives = len(rounds[0])
    for r, batch in enumerate(rounds):
        try:
            if r:
                for k, c in enumerate(batch):
                    vm.qmp.change_medium(f"cd{k}", c.path)
            seen, problems = check_batch(vm, drives)
        except (GuestError, SrpartError) as e:
            seen, problems = 0, [str(e).splitlines()[0]]
        if problems:
            res.failures.append((batch, problems))
            return res
        res.processed += len(batch)
        res.partitions += seen
    try:
        present, leaks = guest.parse_kmemleak(vm.check(guest.kmemleak_cmd(), timeout=300))
    except (GuestError, SrpartError) as e:
        res.failures.append((cases, [f"kmemleak scan: {str(e).splitlines()[0]}"]))
        return res
    res.kmemleak, res.leaks = present, leaks
    if leaks:
        res.failures.append((cases, [f"kmemleak: {len(leaks)} unreferenced objects, first: "
                                     + leaks[0].splitlines()[0]]))
    return res


def sd_expected(unpatched: guest.SdDisk, block: int) -> tuple[tuple[int, int, int], ...]:
    """What the series must give where the unpatched kernel gave `unpatched`."""
    kept = [oracle.Part(n, s, c) for n, s, c in unpatched.parts if s + c <= unpatched.size]
    return tuple((p.number, p.start, p.size) for p in oracle.on_device(kept, block).parts)


def sd_problems(before: dict[str, guest.SdDisk], after: dict[str, guest.SdDisk], block: int,
                compare: bool = True) -> list[str]:
    """The series' disks against the invariants and, with `compare`, the unpatched kernel."""
    problems = []
    if set(before) != set(after):
        problems.append(f"disks differ: unpatched {sorted(before)}, series {sorted(after)}")
    k = block // 512
    for t, d in sorted(after.items()):
        for n, s, c in d.parts:
            if s + c > d.size:
                problems.append(f"{t} p{n}: {s}+{c} beyond the medium ({d.size})")
            if s % k or c % k:
                problems.append(f"{t} p{n}: start {s} size {c} not {block}-aligned")
        if compare and t in before and d.parts != sd_expected(before[t], block):
            problems.append(f"{t}: series {list(d.parts)} != unpatched through the fixes "
                            f"{list(sd_expected(before[t], block))}")
    return problems
