"""Malformed media, a bounded subset of `make fuzz` (issues 6, 14).

On sr (2048-byte blocks): every parser's table kind x every mutation at
least once (seed 20261203: the first kinds x mutations cases, rounded up to
whole VMs), 16 images per VM of 8 drives: the first 8 are parsed at probe,
the next 8 after a media swap over QMP, as `make fuzz` does. All of them
with sr built in; the first VM's worth with sr as modules too (the parsers
are the same code either way, the media-change path is not). On scsi-hd
with 512- and 4096-byte blocks: one image of every kind, one VM each under
the unpatched kernel and the series, which must agree except where the
series' fixes say (harness/fuzz_check.py). Plus the reproducer of the GPT
size wrap patches 0006-0007 fix (pinned: fuzz.gpt_end_before_start), on sr
and, against the unpatched kernel, on sd. Invariants: no bad pattern in the kernel log (the
harness fails the VM), every partition inside its medium and aligned, on
the extended major, whole disks at 11,K. The full run, under the sanitizer
kernel with a kmemleak scan, is `make fuzz`.
"""
from __future__ import annotations

import pytest

from fixtures import fuzz
from harness import fuzz_check, guest, paths, qemu
from harness.kernel import SR_BUILDS

pytestmark = pytest.mark.vm

SEED, ROUNDS = 20261203, 2
PER_VM = fuzz_check.PER_VM * ROUNDS
# case i is kind i % len(KINDS), mutation (i // len(KINDS)) % len(MUTATIONS):
# the first len(KINDS) * len(MUTATIONS) cases are every pair once
PAIRS = len(fuzz.KINDS) * len(fuzz.MUTATIONS)
COUNT = -(-PAIRS // PER_VM) * PER_VM
BATCHES = [pytest.param(b, build, id=f"batch{b}-{build}",
                        marks=pytest.mark.xdist_group(f"fuzz-{b}-{build}"))
           for b in range(COUNT // PER_VM) for build in (("builtin", "module") if b == 0
                                                         else ("builtin",))]


@pytest.mark.parametrize("batch,build", BATCHES)
def test_malformed_media_keep_the_invariants(boot, batch, build):
    cases = [fuzz.case(SEED, i, paths.BUILD / "fuzz" / str(SEED))
             for i in range(batch * PER_VM, (batch + 1) * PER_VM)]
    first = cases[:fuzz_check.PER_VM]
    variant, extra = SR_BUILDS[build]
    with boot(variant, [c.path for c in first], ["sr_mod.partscan=1", *extra],
              f"fuzz-{batch}-{build}", qmp=True) as vm:
        res = fuzz_check.fuzz_vm(vm, cases)
    assert not res.failures, [f"seed {SEED}, cases {b[0].index}-{b[-1].index}: {p}"
                              for b, p in res.failures]
    assert res.processed == len(cases)


# one case of every kind, mutations varying with the kind
SD_CASES = list(range(len(fuzz.KINDS)))


@pytest.mark.parametrize("block", [512, 4096])
def test_malformed_disks_partition_as_unpatched_through_the_fixes(boot, block):
    """Every kind on scsi-hd: the series changes nothing sd gets but what its fixes name."""
    cases = [fuzz.case(SEED, i, paths.BUILD / "fuzz" / str(SEED)) for i in SD_CASES]
    assert {c.kind for c in cases} == set(fuzz.KINDS)
    drives = [qemu.Drive(c.path, "scsi-hd", block) for c in cases]
    views = {}
    for variant in ("unpatched", "srpart"):
        with boot(variant, drives, [], f"fuzz-sd{block}-{variant}") as vm:
            views[variant] = guest.parse_sd(vm.check(guest.SD_CMD, timeout=120))
    assert len(views["srpart"]) == len(cases)
    assert sum(len(d.parts) for d in views["unpatched"].values()), "no partitions at all"
    assert fuzz_check.sd_problems(views["unpatched"], views["srpart"], block) == []


def _wrap_image():
    """Pinned: the generator changes as coverage steers it, the reproducer must not."""
    return fuzz.gpt_end_before_start(paths.BUILD / "fuzz" / "pinned")


def test_gpt_entry_ending_before_its_start_is_ignored(boot, sr_build):
    """The first finding (seed 1, case 37 on 2026-12-03): without patches 0006-0007
    this made sr0p3 nearly 2^64 sectors long."""
    img = _wrap_image()
    variant, extra = SR_BUILDS[sr_build]
    with boot(variant, [img], ["sr_mod.partscan=1", *extra], f"fuzz-gpt-wrap-{sr_build}") as vm:
        _, problems = fuzz_check.check_batch(vm, 1)
    assert not problems


@pytest.mark.parametrize("variant", ["unpatched", "srpart"])
def test_gpt_size_wrap_on_a_scsi_disk(boot, variant):
    """The same GPT on sd with 2048-byte blocks, which scans partitions without the
    series: the unpatched kernel creates a partition far larger than the disk (the bug
    patches 0006-0007 fix for every disk, hence Cc: stable), the series does not."""
    img = _wrap_image()
    with boot(variant, [qemu.Drive(img, "scsi-hd", 2048)], [], f"gpt-wrap-sd-{variant}") as vm:
        disk = int(vm.check("cat /sys/block/sda/size"))
        parts = guest.parse_sys_partitions(vm.check(guest.partitions_cmd("sd")))
    assert parts, "no partitions on sda: the case no longer reaches the GPT parser"
    huge = [p for p in parts if p.start + p.size > disk]
    if variant == "unpatched":
        assert [p.size for p in huge] == [2**64 - 4], parts
    else:
        assert huge == [], parts
