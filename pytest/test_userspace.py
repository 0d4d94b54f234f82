"""What a Debian 12 system makes of srNpM: its own udev and util-linux (issue 13).

Each configuration boots once per disc set (catalog.MIXED: 8 drives, one
table kind each; catalog.REST: the other kinds) with the udev userspace
(harness/userspace.py): Debian's systemd-udevd, udevadm trigger, settle.
Configurations: the unpatched kernel with stock rules (what users have
today), the series (sr built in, and sr as modules that udev itself loads by
modalias) with stock rules, and with stock + patches/udev/61-srpart-partitions.rules.

Expected links come from harness/link_oracle.py (blkid, sfdisk, fdisk on the
host, at the offsets harness/oracle.py finds), never from the guest.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from fixtures import catalog
from harness import guest, link_oracle, udev_view

pytestmark = [pytest.mark.vm]


@dataclass(frozen=True)
class Config:
    name: str
    variant: str
    cmdline: tuple[str, ...]
    userspace: str             # harness/userspace.py USERSPACES

    @property
    def partitions(self) -> bool:
        return self.variant != "unpatched"

    @property
    def mended(self) -> bool:
        """The project's rules or the proposed systemd change: a disc keeps the links
        of the volume its covering partition repeats; partitions get by-id links."""
        return self.userspace in ("udev-srpart", "udev-patched")

    @property
    def complete(self) -> bool:
        """Rules that also close the stock gaps (link_oracle.STOCK_GAPS)."""
        return self.userspace == "udev-srpart"


# No srpart.modprobe on module kernels: udev loads sr_mod by modalias, with
# sr_mod.partscan=1 from the command line as libkmod reads it
CONFIGS = (
    Config("unpatched-stock", "unpatched", (), "udev"),
    Config("builtin-stock", "srpart", ("sr_mod.partscan=1",), "udev"),
    Config("builtin-srpart", "srpart", ("sr_mod.partscan=1",), "udev-srpart"),
    Config("module-stock", "srpart-module", ("sr_mod.partscan=1",), "udev"),
    Config("module-srpart", "srpart-module", ("sr_mod.partscan=1",), "udev-srpart"),
)
SETS = {"mixed8": catalog.MIXED, "rest": catalog.REST}
PARAMS = [pytest.param((c, s), id=f"{c.name}-{s}", marks=pytest.mark.xdist_group(f"udev-{c.name}-{s}"))
          for c in CONFIGS for s in SETS]


@dataclass
class View:
    config: Config
    images: list
    devices: list[link_oracle.Device]     # the oracle's
    links: dict[str, str]                 # the guest's: link -> device
    lsblk: dict[str, dict]
    vm: object


@pytest.fixture(scope="module", params=PARAMS)
def view(request, boot):
    config, set_name = request.param
    images = catalog.kind_images(SETS[set_name])
    devices = [d for k, img in enumerate(images)
               for d in link_oracle.devices(img, k, config.partitions)]
    with boot(config.variant, udev_view.drives(images), list(config.cmdline),
              f"udev-{config.name}-{set_name}", userspace=config.userspace) as vm:
        got = udev_view.read(vm)
        yield View(config, images, devices, got.links, got.lsblk, vm)


def _needs(v: View, kinds: tuple[str, ...], what: str) -> list[str]:
    """The kinds of this disc set the catalog declares to hold `what`, or a skip
    saying why this configuration cannot show it: the decision comes from the
    catalog and the configuration, never from what the oracle found; the test
    then asserts the oracle agrees."""
    if not v.config.partitions:
        pytest.skip("the unpatched kernel makes no partitions")
    have = [i.kind for i in v.images if i.kind in kinds]
    if not have:
        pytest.skip(f"the catalog declares no {what} in this disc set")
    return have


def _oracle(v: View) -> dict[str, set[str]]:
    return link_oracle.owners(v.devices, discs_win=v.config.mended)


def test_partitions_exist_as_the_oracle_says(view):
    """The kernel side first: udev can only link what the kernel created."""
    got = sorted(n for n in view.lsblk if n.startswith("sr"))
    assert got == sorted(d.name for d in view.devices)


def test_links_equal_the_oracle(view):
    """by-label, by-uuid, by-partuuid, by-partlabel: every link the oracle names
    leads to one of the devices that claim it, and no other link exists. Stock
    rules may lack what link_oracle.STOCK_GAPS names (and nothing else)."""
    want = _oracle(view)
    got = udev_view.own_links(view.links)
    by_name = {d.name: d for d in view.devices}
    missing = sorted(link for link in set(want) - set(got)
                     if view.config.complete or not any(
                         link_oracle.stock_gap(by_name[d], link) for d in want[link]))
    extra = sorted(set(got) - set(want))
    wrong = sorted(f"{link} -> {got[link]}, oracle {sorted(want[link])}"
                   for link in set(got) & set(want) if got[link] not in want[link])
    assert not (missing or extra or wrong), f"missing {missing}; extra {extra}; wrong {wrong}"


def test_by_id_links_of_partitions(view):
    """srN has by-id from its serial (60-persistent-storage.rules:76); srNpM gets
    srN's with -partM only with the project's or the proposed rules (stock :77
    names sd* alone)."""
    by_id = {}
    for link, dev in view.links.items():
        if link.startswith("by-id/"):
            by_id.setdefault(dev, []).append(link)
    for d in view.devices:
        disc = d.name.split("p")[0]
        if not d.partition:
            assert len(by_id.get(d.name, [])) == 1, f"{d.name}: {by_id.get(d.name)}"
        elif view.config.mended and not d.whole_disk:
            assert by_id.get(d.name) == [f"{by_id[disc][0]}-part{d.name.split('p')[1]}"], d.name
        else:
            assert d.name not in by_id, f"{d.name}: {by_id[d.name]}"


def test_udev_properties_of_partitions(view):
    """`udevadm info` of every srNpM: a partition of its disc, what blkid finds at
    the oracle's offset, and the table entry at the kernel's start and size
    (libblkid's ID_PART_ENTRY_*, or the project rules' where stock has none)."""
    props = guest.parse_all_props(view.vm.check(guest.ALL_PROPS_CMD))
    bad = []
    for d in view.devices:
        if not d.partition:
            continue
        p = props.get(d.name, {})
        # ID_CDROM imported from the disc (60-persistent-storage.rules:27), which
        # a whole-disk slice never reaches (:13)
        want = {"DEVTYPE": "partition", "PARTN": d.name.split("p")[1],
                "ID_CDROM": None if d.whole_disk else "1"}
        if not d.whole_disk:
            want.update({k: d.fs.get(k) for k in ("ID_FS_TYPE", "ID_FS_UUID", "ID_FS_LABEL")})
            if view.config.complete or not link_oracle.stock_gap(d, "parttype"):
                want.update({"ID_PART_ENTRY_OFFSET": str(d.start), "ID_PART_ENTRY_SIZE": str(d.size),
                             "ID_PART_ENTRY_NUMBER": d.name.split("p")[1]})
                if d.part_uuid:
                    want["ID_PART_ENTRY_UUID"] = d.part_uuid
        got = {k: p.get(k) for k in want}
        if got != want:
            bad.append(f"{d.name}: udev {got}, oracle {want}")
    assert not bad, "\n".join(bad)


def test_by_path_links_name_the_partition(view):
    """srN keeps its by-path link; srNpM gets srN's with -partM, as sd partitions do."""
    by_path = {dev: link for link, dev in view.links.items() if link.startswith("by-path/")}
    for d in view.devices:
        disc = d.name.split("p")[0]
        if not d.partition:
            assert d.name in by_path, f"{d.name} has no by-path link"
        elif not d.whole_disk:
            assert by_path.get(d.name) == f"{by_path[disc]}-part{d.name.split('p')[1]}", d.name


def test_whole_disk_slices_get_no_links(view):
    """60-persistent-storage.rules:13 skips them; so must 61-srpart-partitions.rules:
    no link leads to one, and none is claimed for one in udev's database (a claim
    of lower priority than the disc's would not show as a link)."""
    kinds = _needs(view, catalog.WHOLE_DISK_SLICE, "whole-disk slice")
    whole = {d.name for d in view.devices if d.whole_disk}
    assert whole, f"the oracle finds no whole-disk slice on {kinds}"
    assert not [link for link, dev in view.links.items() if dev in whole]
    props = guest.parse_all_props(view.vm.check(guest.ALL_PROPS_CMD))
    assert {n: props[n].get("DEVLINKS") for n in whole} == {n: None for n in whole}


def test_lsblk_equals_the_oracle(view):
    """lsblk -o NAME,MAJ:MIN,TYPE,SIZE,FSTYPE,LABEL,PARTTYPE (what util-linux reads
    from sysfs and the udev database)."""
    bad = []
    for d in view.devices:
        row = view.lsblk[d.name]
        probed = not d.whole_disk      # 60-persistent-storage.rules:13: no blkid, no db entry
        want = {"type": "part" if d.partition else "rom", "size": d.size * 512,
                "fstype": d.fs.get("ID_FS_TYPE") if probed else None,
                "label": d.fs.get("ID_FS_LABEL") if probed else None}
        # stock rules: udisks2 #725, the disc of an HFS+/ISO 9660 hybrid has no file
        # system to udev's blkid (an APM disc without HFS+ has its ISO 9660:
        # apm-xorriso, seen in the guest); declared per kind, never read back
        if not view.config.complete and not d.partition and \
                view.images[int(d.name[2:])].kind in catalog.MAC_HYBRID:
            want["fstype"] = want["label"] = None
        if d.partition and d.part_type and (view.config.complete or
                                            not link_oracle.stock_gap(d, "parttype")):
            want["parttype"] = d.part_type
        got = {k: row.get(k) for k in want}
        if got != want:
            bad.append(f"{d.name}: lsblk {got}, oracle {want}")
        major = row["maj:min"].split(":")[0]
        if major != ("259" if d.partition else "11"):
            bad.append(f"{d.name}: {row['maj:min']}")
    assert not bad, "\n".join(bad)


def test_mount_by_label(view):
    """`mount LABEL=…` finds each partition's file system through udev's links."""
    if not view.config.partitions:
        pytest.skip("the unpatched kernel makes no partitions")
    labels = link_oracle.claims(view.devices)
    todo = [(d, d.fs["ID_FS_LABEL"]) for d in view.devices
            if d.partition and link_oracle.mountable(d)
            and d.fs.get("ID_FS_LABEL") and len(labels[f"by-label/{d.fs['ID_FS_LABEL_ENC']}"]) == 1]
    # every disc set holds labelled ext2/ext4 partitions (catalog.NO_DATA aside)
    assert todo, "no partition with a uniquely labelled file system to mount"
    for d, label in todo:
        src = view.vm.check(guest.mount_label_cmd(label)).strip()
        assert src == f"/dev/{d.name}", label


def test_cdrom_id_runs_on_discs_only(view):
    """60-cdrom_id.rules:6 stops at partitions: `udevadm test` of srN runs
    cdrom_id, of its partitions never (it would lock the tray through them)."""
    parts = [d.name for d in view.devices if d.partition][:2]
    out = view.vm.check("udevadm test --action=change /sys/class/block/sr0 2>&1")
    assert "'cdrom_id " in out        # "Importing properties from results of 'cdrom_id --lock-media …'"
    for p in parts:
        out = view.vm.check(f"udevadm test --action=change /sys/class/block/{p} 2>&1")
        assert "'cdrom_id " not in out, p


def test_partitions_are_group_cdrom(view):
    """50-udev-default.rules:86 (KERNEL=="sr[0-9]*") gives srNpM the disc's group."""
    names = [d.name for d in view.devices]
    out = view.vm.check("ls -ln " + " ".join(f"/dev/{n}" for n in names))
    groups = {ln.split()[-1].rsplit("/", 1)[-1]: ln.split()[3] for ln in out.splitlines()}
    assert groups == {n: "24" for n in names}


def test_covering_partition_leaves_the_iso_label_to_the_disc(view):
    """A partition at sector 0 (isohybrid partition 1, Sun slice 0) holds the
    disc's own ISO 9660: with the project's rules the disc keeps by-label."""
    if not view.config.mended:
        pytest.skip("stock rules: srN and its covering partition race for the link")
    kinds = _needs(view, catalog.COVERING, "covering partition")
    pairs = [(disc, p) for disc in view.devices if not disc.partition
             for p in view.devices if p.partition and p.name.startswith(disc.name + "p")
             and link_oracle.covering(disc, p)]
    assert pairs, f"the oracle finds no covering partition on {kinds}"
    for disc, p in pairs:
        assert view.links.get(f"by-label/{disc.fs['ID_FS_LABEL_ENC']}") == disc.name, p.name


def test_mac_hybrid_disc_gets_its_iso_label(view):
    """udisks2 #725: udev's blkid sees only the Mac partition map of a hybrid disc,
    so neither the ISO 9660 nor (without partitions) the HFS+ volume gets a link.
    With the project's rules the disc gets its ISO 9660 by-label and by-uuid, the
    HFS+ partition (named like the ISO 9660 volume by xorriso) yields the label to
    it and stays reachable by by-path."""
    if not view.config.complete:
        pytest.skip("stock rules: the disc's ISO 9660 gets no link (udisks2 #725)")
    kind = _needs(view, catalog.MAC_HYBRID, "HFS+/ISO 9660 hybrid")[0]
    k = next(k for k, i in enumerate(view.images) if i.kind == kind)
    disc = next(d for d in view.devices if d.name == f"sr{k}")
    assert view.links.get(f"by-label/{view.images[k].volume_label}") == f"sr{k}"
    assert view.links.get(f"by-uuid/{disc.fs['ID_FS_UUID_ENC']}") == f"sr{k}"
    hfs = [d for d in view.devices if d.fs.get("ID_FS_TYPE") == "hfsplus"]
    assert hfs, f"the oracle finds no HFS+ partition on {kind}"
    assert all(any(dev == d.name and link.startswith("by-path/") for link, dev in view.links.items())
               for d in hfs)


def test_negative_control_the_unpatched_kernel_fails_the_partition_oracle(view):
    """The udev tests' negative control: the unpatched kernel's guest, read the
    same way, against the oracle of a kernel with partitions, must differ (the
    kernel-side comparison above would fail on it), and no srNpM link exists."""
    if view.config.partitions:
        pytest.skip("a control for the unpatched kernel's boots")
    with_parts = [d for k, img in enumerate(view.images) for d in link_oracle.devices(img, k, True)]
    got = sorted(n for n in view.lsblk if n.startswith("sr"))
    assert any(d.partition for d in with_parts), "the oracle finds no partition in this set"
    assert got != sorted(d.name for d in with_parts)
    assert not [dev for dev in view.links.values() if "p" in dev], view.links
