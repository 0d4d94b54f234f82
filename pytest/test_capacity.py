"""Capacities unlike the image's (issue 27: bug E and the drive states it names).

A formatted DVD+RW or BD-RE reports its formatted capacity, far more than the
image written to it; a drive can also report one block less than was written
(the 2004 thread's SGI discs). Every kind of the first two media boots
(catalog.MIXED, catalog.REST) is read from a drive whose medium is the image
padded with zeros to a single-layer DVD's 2,295,104 blocks (a sparse file),
and from one whose medium is the image cut one block short. Expected: the
oracle's partitions for that capacity, i.e. the table read in its own units and
clipped to the disc as upstream's blk_add_partition() clips.

Seen failing: v3's patch 9 (v4's 10) weighed the capacity in msdos.c and read
a 512-unit MBR natively whenever its entries fit the disc in 2048-byte units
and no El Torito or ISO-end evidence said otherwise: on the padded discs they
always fit (mbr512-xorriso, grub-rescue, misaligned); one block short, the
512-unit readings of grub-rescue and misaligned ended beyond the disc and were
refused. v4 ran these as strict xfails. v5 decides the unit in sr (patch 15):
they pass, except the one table nothing can decide (UNDECIDABLE below), which
must give no partitions and the one line saying why.
"""
from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest

from fixtures import catalog
from harness import guest, oracle

pytestmark = pytest.mark.vm

DVD_BLOCKS = 2295104          # a single-layer DVD+R/RW, in 2048-byte blocks
STATES = {"dvd": lambda size: DVD_BLOCKS * 2048,
          "short": lambda size: size - 2048}

SETS = [pytest.param((kinds, state), id=f"{name}-{state}",
                     marks=pytest.mark.xdist_group(f"capacity-{name}-{state}"))
        for name, kinds in (("mixed8", catalog.MIXED), ("rest", catalog.REST))
        for state in STATES]

# (state, kind): tables that no reading of the medium can place. misaligned's
# entries all lie after its ISO 9660 volume in either unit and fit the DVD-sized
# disc in either unit; no El Torito image, no entry at the volume's end: the same
# bytes are a valid 2048-byte table (test_undecidable_is_really_undecidable
# shows it on the host). The series must not guess: no partitions, one line.
UNDECIDABLE: set[tuple[str, str]] = {("dvd", "misaligned")}
NOT_SCANNED = "cannot tell whether the MBR counts 512- or 2048-byte sectors: not scanned"


def _resized(img, state: str, out_dir):
    """A copy of the image as the drive's medium in `state`: zero-padded (sparse) or cut."""
    data = img.path.read_bytes()
    size = STATES[state](len(data))
    out = out_dir / img.path.name
    with open(out, "wb") as fh:
        fh.write(data[:size])
        fh.truncate(size)
    return out, size


@pytest.fixture(scope="module", params=SETS)
def resized(request, partscan_on, tmp_path_factory):
    kinds, state = request.param
    images = catalog.kind_images(kinds)
    out_dir = tmp_path_factory.mktemp(f"capacity-{state}")
    media = [_resized(img, state, out_dir) for img in images]
    want = [oracle.triples(img.table, img.path, disk_bytes=size)
            for img, (_, size) in zip(images, media)]
    with partscan_on([SimpleNamespace(path=path) for path, _ in media], f"capacity-{state}-{kinds[0]}") as vm:
        got = [guest.drive_partitions_of(vm, k) for k in range(len(kinds))]
        sizes = [int(s) for s in vm.check(
            "for d in " + " ".join(f"sr{k}" for k in range(len(kinds))) +
            "; do cat /sys/block/$d/size; done").split()]
        yield state, kinds, [size for _, size in media], want, got, sizes, vm.check("dmesg")


def test_the_drive_reports_the_medium_capacity(resized):
    state, kinds, media, _, _, sizes, _ = resized
    assert sizes == [size // 512 for size in media]


def test_partitions_are_the_oracle_for_the_capacity(resized):
    state, kinds, _, want, got, _, _ = resized
    wrong = [f"sr{k} ({kind}): guest {g} != oracle {w}"
             for k, (kind, w, g) in enumerate(zip(kinds, want, got))
             if g != w and (state, kind) not in UNDECIDABLE]
    assert not wrong, "\n".join(wrong)


def test_an_undecidable_table_gives_no_partitions_and_one_line(resized):
    state, kinds, _, _, got, _, dmesg = resized
    mine = [k for k, kind in enumerate(kinds) if (state, kind) in UNDECIDABLE]
    if not mine:
        pytest.skip(f"no kind of this set is undecidable with a {state} capacity")
    for k in mine:
        assert got[k] == [], f"sr{k} ({kinds[k]}): partitions {got[k]} from an undecidable table"
        lines = [ln for ln in dmesg.splitlines() if f"[sr{k}]" in ln]
        assert any(NOT_SCANNED in ln for ln in lines), f"sr{k}: no line saying why:\n" + "\n".join(lines)
    others = [ln for ln in dmesg.splitlines() if NOT_SCANNED in ln]
    assert len(others) == len(mine), f"{NOT_SCANNED!r} for decidable media too:\n" + "\n".join(others)


def test_undecidable_is_really_undecidable():
    """The host's reading of each UNDECIDABLE image: both units put every entry after
    the ISO volume and inside the disc, none at the volume's end, no El Torito catalog."""
    for state, kind in sorted(UNDECIDABLE):
        img = catalog.kind_images([kind])[0]
        data = img.path.read_bytes()
        disc = STATES[state](len(data)) // 512
        assert data[510:512] == b"\x55\xaa", kind
        entries = [struct.unpack_from("<II", data, 0x1be + 16 * i + 8) for i in range(4)]
        entries = [(s, n) for s, n in entries if n]
        pvd = data[32768:34816]
        assert pvd[0:6] == b"\x01CD001", kind
        volume_end = struct.unpack_from("<I", pvd, 80)[0] * 4
        assert data[34816 + 7:34816 + 30] != b"EL TORITO SPECIFICATION", kind
        for unit in (1, 4):
            for s, n in entries:
                assert volume_end < s * unit < disc and (s + n) * unit != volume_end, (kind, unit, s, n)
