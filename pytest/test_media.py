"""Every partition table kind on sr, read with the whole series (issue 3).

Three boots with sr_mod.partscan=1: one with 8 drives, each a different table
kind (catalog.MIXED), one with the rest (catalog.REST), one with a table for
each of the other parsers a distribution kernel has (catalog.PARSERS, issue 14). Expected partitions
come from the host-side oracle reading the image bytes; the guest's view is
checked against it by name, start and size, by the bytes each partition
reads, and by mounting the file systems the generators put there.
"""
from __future__ import annotations

import hashlib
import re

import pytest

from fixtures import catalog
from harness import guest, oracle

NOISE = guest.MEDIA_NOISE
# The reads and mounts every test does must be as quiet as the boot: each
# test's own slice of the kernel log is checked for NOISE (conftest.py).
pytestmark = [pytest.mark.vm, pytest.mark.quiet_kernel(*NOISE)]

SETS = [pytest.param(catalog.MIXED, id="mixed8", marks=pytest.mark.xdist_group("media-mixed8")),
        pytest.param(catalog.REST, id="rest", marks=pytest.mark.xdist_group("media-rest")),
        pytest.param(catalog.PARSERS, id="parsers", marks=pytest.mark.xdist_group("media-parsers"))]

SKIP_LINE = re.compile(r"\bsr(\d+): p(\d+) start (\d+) is not a multiple of the 2048-byte "
                       r"block size, skipped$")
# upstream's partition line: names, extended/nested brackets, the parser's tag
# ([mac], [ICS]) and amiga.c's " RDSK (512)" and " (DOS^C)(res 2 spb 1)" notes
PART_LINE = re.compile(r"\bsr(\d+):((?: p\d+| <| >| \[\w+\]| RDSK \(\d+\)"
                       r"| \([^)]*\)(?:\([^)]*\))*)*)$")
UNIT_LINE = re.compile(r"\bsr(\d+): ((?:MBR|GPT) in 512-byte sectors)$")
HEAD_BLOCKS = 32          # bytes compared at each partition's start: 64 KiB


@pytest.fixture(scope="module", params=SETS)
def media(request, partscan_on):
    kinds = request.param
    images = catalog.kind_images(kinds)
    layouts = [oracle.expected(i.table, i.path) for i in images]
    with partscan_on(images, f"media-{len(kinds)}-{kinds[0]}") as vm:
        yield kinds, images, layouts, vm, vm.check("dmesg")


def _dmesg_lines(dmesg: str) -> list[str]:
    return [re.sub(r"^\[\s*[\d.]+\]\s*", "", line).rstrip() for line in dmesg.splitlines()]


def test_every_whole_disk_stays_11_k(media):
    kinds, _, _, vm, _ = media
    rows = guest.parse_proc_partitions(vm.check("cat /proc/partitions"))
    assert sorted(((r.name, r.major, r.minor) for r in rows if r.major == 11),
                  key=lambda t: t[2]) == [(f"sr{k}", 11, k) for k in range(len(kinds))]


def test_each_drive_holds_its_own_image(media):
    kinds, images, _, vm, _ = media
    for k in range(len(kinds)):
        assert vm.check(guest.volume_label_cmd(f"/dev/sr{k}")).strip() == images[k].volume_label


def test_partitions_equal_the_oracle(media):
    kinds, images, layouts, vm, _ = media
    sysparts = guest.parse_sys_partitions(vm.check(guest.PARTITIONS_CMD))
    for p in sysparts:
        assert p.major == 259 and re.fullmatch(r"sr\d+p\d+", p.name), p
    wrong = []          # every drive's verdict, not only the first one's
    for k, (kind, layout) in enumerate(zip(kinds, layouts)):
        want = [(f"sr{k}p{p.number}", p.start, p.size) for p in layout.parts]
        got = sorted(((p.name, p.start, p.size) for p in sysparts if p.name.startswith(f"sr{k}p")),
                     key=lambda t: int(t[0].split("p")[1]))
        if got != want:
            wrong.append(f"sr{k} ({kind}): guest {got} != oracle {want}")
    assert not wrong, "\n".join(wrong)


def test_partitions_read_the_image_bytes(media):
    """The first 64 KiB and the last block of every partition are the image's bytes there."""
    kinds, images, layouts, vm, _ = media
    cmds, want = [], {}
    for k, (img, layout) in enumerate(zip(images, layouts)):
        data = img.path.read_bytes()
        for p in layout.parts:
            dev = f"/dev/sr{k}p{p.number}"
            head = min(HEAD_BLOCKS, p.size // 4)
            last = p.size // 4 - 1
            cmds.append(f"echo {dev} $(dd if={dev} bs=2048 count={head} 2>/dev/null | sha256sum) "
                        f"$(dd if={dev} bs=2048 skip={last} count=1 2>/dev/null | sha256sum)")
            b0 = p.start * 512
            want[dev] = (hashlib.sha256(data[b0:b0 + head * 2048]).hexdigest(),
                         hashlib.sha256(data[b0 + last * 2048:b0 + last * 2048 + 2048]).hexdigest())
    got = {}
    for cmd in cmds:     # one at a time: the guest tty takes 4095 bytes per line
        f = vm.check(cmd).split()
        if len(f) == 5:
            got[f[0]] = (f[1], f[3])
    assert got == want


# fat_fill_super() refuses a FAT whose logical sector (512 bytes, as in every
# ESP image) is smaller than the device's block ("logical sector size too
# small for device"), so a FAT partition on sr cannot be mounted: its label
# is read instead (test_memtest_esp_label).
UNMOUNTABLE_ON_SR = {"vfat"}


def test_data_file_systems_mount_and_read(media):
    kinds, images, layouts, vm, _ = media
    checked = 0
    for k, img in enumerate(images):
        made = {p.number for p in layouts[k].parts}
        skipped = {p.number for p in layouts[k].skipped}
        if img.table in oracle.ONLY_512:
            assert not made, f"sr{k} ({kinds[k]}): {img.table} tables make no partitions on sr"
            continue
        for part in img.data:
            # every data partition the fixture wrote is one the oracle expects, or one
            # the alignment rule leaves out (it cannot be read on sr at all)
            assert part.number in made | skipped, \
                f"sr{k} ({kinds[k]}): data partition {part.number} not in the layout {sorted(made)}"
            if part.fstype in UNMOUNTABLE_ON_SR or part.number in skipped:
                continue
            dev = f"/dev/sr{k}p{part.number}"
            out = vm.check(f"mkdir -p /mnt/x && mount -t {part.fstype} -o ro {dev} /mnt/x && "
                           f"sha256sum '/mnt/x/{part.file}'; rc=$?; umount /mnt/x; exit $rc")
            assert out.split()[0] == part.sha256, f"{dev} ({kinds[k]}) {part.file}: {out!r}"
            checked += 1
    assert checked, "no data partitions in this set"


def test_unit_note_on_a_line_of_its_own(media):
    """A line of its own says "MBR|GPT in 512-byte sectors" exactly for 512-unit tables;
    the partition line itself keeps upstream's format (tools grep it)."""
    kinds, images, layouts, _, dmesg = media
    notes, parts = {}, set()
    for line in _dmesg_lines(dmesg):
        m = UNIT_LINE.search(line)
        if m:
            notes[int(m.group(1))] = m.group(2)
        m = PART_LINE.search(line)
        if m and m.group(2):
            parts.add(int(m.group(1)))
    for k, img in enumerate(images):
        if not layouts[k].parts and not layouts[k].skipped:
            continue
        assert k in parts, f"sr{k} ({kinds[k]}): no partition line in upstream's format"
        assert notes.get(k) == oracle.UNIT_NOTE.get(img.table), f"sr{k} ({kinds[k]})"


def test_unreadable_entries_are_explained_once(media):
    kinds, _, layouts, _, dmesg = media
    got = sorted((int(m.group(1)), int(m.group(2)), int(m.group(3)))
                 for m in map(SKIP_LINE.search, _dmesg_lines(dmesg)) if m)
    want = sorted((k, p.number, p.start) for k, layout in enumerate(layouts) for p in layout.skipped)
    assert got == want


def test_no_io_errors_or_eod_complaints(media):
    """The boot's kernel log (the tests after it are checked in their own slices,
    see pytestmark): no I/O errors; end-of-disc lines exactly for the entries the oracle's table
    says overrun the disc (upstream truncates them: mbr2048-overrun)."""
    _, images, _, _, dmesg = media
    want = []
    for k, img in enumerate(images):
        disk = img.path.stat().st_size // 512
        want += [f"sr{k}: p{p.number} size {p.size} extends beyond EOD, truncated"
                 for p in oracle.ORACLES[img.table](img.path)
                 if p.start < disk < p.start + p.size]
    got = [line for line in _dmesg_lines(dmesg) if any(n in line for n in NOISE)]
    assert got == want


FAT_SETS = [p for p in SETS if any(catalog.image_kind_has(k, "vfat") for k in p.values[0])]


@pytest.mark.parametrize("media", FAT_SETS, indirect=True)
def test_fat_partitions_carry_their_labels(media):
    """Every FAT partition (memtest86+'s ESP, the El Torito ESP) starts with a FAT boot
    sector whose label is the one the image was made with, and findfs finds it there."""
    kinds, images, _, vm, _ = media
    checked = 0
    for k, img in enumerate(images):
        for part in img.data:
            if part.fstype != "vfat":
                continue
            dev = f"/dev/sr{k}p{part.number}"
            boot = vm.check(f"dd if={dev} bs=2048 count=1 2>/dev/null | od -A n -t x1 -v | "
                            "tr -d ' \\n'")
            boot = bytes.fromhex(boot.strip())
            assert boot[510:512] == b"\x55\xaa", f"{dev} ({kinds[k]}): no boot sector"
            assert boot[43:54].decode().rstrip() == part.label, f"{dev} ({kinds[k]})"
            assert vm.check(f"findfs LABEL={part.label}").strip() == dev
            checked += 1
    assert checked
