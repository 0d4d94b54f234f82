"""The udev userspace's pieces on the host: library resolution, the link
oracle's rules, the guest parsers, udev's bad patterns (issue 13)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness import console, guest, link_oracle, userspace
from harness.errors import SrpartError
from harness.link_oracle import Device

ISO = {"ID_FS_TYPE": "iso9660", "ID_FS_USAGE": "filesystem", "ID_FS_UUID": "2026-12-05-00",
       "ID_FS_UUID_ENC": "2026-12-05-00", "ID_FS_LABEL": "DISC", "ID_FS_LABEL_ENC": "DISC"}
EXT = {"ID_FS_TYPE": "ext2", "ID_FS_USAGE": "filesystem", "ID_FS_UUID": "u-1",
       "ID_FS_UUID_ENC": "u-1", "ID_FS_LABEL": "P2", "ID_FS_LABEL_ENC": "P2"}


def test_device_links_follow_60_persistent_storage():
    d = Device("sr0p2", 136, 4096, EXT, "d5698715-e4", "Appended2", "0x83")
    assert d.links() == ["by-uuid/u-1", "by-label/P2", "by-partuuid/d5698715-e4",
                         "by-partlabel/Appended2"]
    assert Device("sr0p11", 0, 4096, ISO, whole_disk=True).links() == []
    assert Device("sr0p1", 4, 16, {"ID_FS_TYPE": "x", "ID_FS_USAGE": "raid",
                                   "ID_FS_LABEL_ENC": "L"}).links() == []


def test_a_covering_partition_races_with_stock_rules_and_loses_with_the_project_s():
    devs = [Device("sr0", 0, 13024, ISO), Device("sr0p1", 0, 136, ISO, "00000001-01"),
            Device("sr0p2", 136, 4096, EXT)]
    assert link_oracle.owners(devs, discs_win=False)["by-label/DISC"] == {"sr0", "sr0p1"}
    assert link_oracle.owners(devs, discs_win=True)["by-label/DISC"] == {"sr0"}
    assert link_oracle.owners(devs, discs_win=True)["by-label/P2"] == {"sr0p2"}


def test_two_partitions_with_one_label_race_either_way():
    devs = [Device("sr0", 0, 100, ISO), Device("sr0p1", 8, 8, EXT), Device("sr1p1", 8, 8, EXT)]
    for win in (False, True):
        assert link_oracle.owners(devs, win)["by-label/P2"] == {"sr0p1", "sr1p1"}


def test_a_partition_elsewhere_holding_the_same_volume_is_not_covering():
    assert not link_oracle.covering(Device("sr0", 0, 100, ISO), Device("sr0p1", 4, 8, ISO))


def test_parse_links():
    text = ("by-label/SRPART_D0_P1 -> sr0p1\nby-path/pci-0000:00:03.0-scsi-0:0:0:0 -> sr0\n"
            "/dev/cdrom -> sr0\nnoise\n")
    assert guest.parse_links(text) == {"by-label/SRPART_D0_P1": "sr0p1",
                                       "by-path/pci-0000:00:03.0-scsi-0:0:0:0": "sr0",
                                       "/dev/cdrom": "sr0"}


def test_parse_lsblk_flattens_children():
    text = ('{"blockdevices": [{"name": "sr0", "maj:min": "11:0", "type": "rom", "size": 6668288,'
            ' "children": [{"name": "sr0p1", "maj:min": "259:0", "type": "part", "size": 2097152}]}]}')
    got = guest.parse_lsblk(text)
    assert set(got) == {"sr0", "sr0p1"} and got["sr0p1"]["maj:min"] == "259:0"
    assert "children" not in got["sr0"]


@pytest.mark.parametrize("line,name", [
    ("systemd-udevd[91]: sr0: Process '/lib/udev/x' failed with exit code 1.", "udev RUN failed"),
    ("systemd-udevd[91]: sr0p1: Spawned process 'blkid' [99] timed out after 3min, killing",
     "udev timeout"),
    ("systemd-udevd[91]: Worker [93] processing SEQNUM=1234 killed", "udev timeout"),
    ("Timed out for waiting the udev queue being empty.", "udev timeout"),
    ("srpart init: udev: udevadm settle (after the drives) failed twice", "udev init"),
    ("srpart init: note: udevadm settle (after trigger) exited 1: Timed out for waiting the udev "
     "queue being empty.; udevd answers", "udev timeout"),
    ("systemd-udevd[91]: /lib/udev/rules.d/61-srpart-partitions.rules:48 Invalid operator for SYMLINK.",
     "udev rules"),
])
def test_udev_errors_are_bad_patterns(line, name):
    assert console.find_bad(f"[    2.5] {line}") == name


def test_a_settle_retried_after_a_quick_failure_is_not_a_bad_pattern():
    # guest-files/init's note when settle failed without timing out and is tried again
    line = ("srpart init: note: udevadm settle (after trigger) exited 1: Failed to wait for daemon "
            "to reply: Broken pipe; udevd answers")
    assert console.find_bad(f"[    7.8] {line}") is None


def test_unknown_userspace_is_one_line():
    with pytest.raises(SrpartError, match="unknown userspace 'systemd': choose one of busybox"):
        userspace.userspace("systemd")


def _elf_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    shutil.copy("/bin/true", root / "bin" / "true")
    return root


def test_resolve_names_the_missing_library(tmp_path):
    root = _elf_root(tmp_path)
    with pytest.raises(SrpartError, match=r"libc\.so\.6, needed by bin/true, is in none of "):
        userspace.resolve(root, ["bin/true"])


def test_resolve_follows_needed_entries_transitively(tmp_path):
    root = _elf_root(tmp_path)
    lib = root / "lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    shutil.copy(Path("/lib/x86_64-linux-gnu/libc.so.6").resolve(), lib / "libc.so.6")
    with pytest.raises(SrpartError, match=r"ld-linux-x86-64\.so\.2, needed by "
                                          r"lib/x86_64-linux-gnu/libc\.so\.6"):
        userspace.resolve(root, ["bin/true"])
    shutil.copy(Path("/lib64/ld-linux-x86-64.so.2").resolve(), lib / "ld-linux-x86-64.so.2")
    assert set(userspace.resolve(root, ["bin/true"])) == {
        "bin/true", "lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"}


def test_resolve_names_a_program_no_package_ships(tmp_path):
    with pytest.raises(SrpartError, match="bin/udevadm is not in the unpacked packages"):
        userspace.resolve(_elf_root(tmp_path), ["bin/udevadm"])


def test_a_rules_patch_that_no_longer_applies_is_one_line(tmp_path):
    patch = tmp_path / "x.patch"
    patch.write_text("--- a/rules.d/60-x.rules\n+++ b/rules.d/60-x.rules\n@@ -1 +1 @@\n-old\n+new\n")
    rules = {"lib/udev/rules.d/60-x.rules": b"something else\n"}
    with pytest.raises(SrpartError, match=r"^x\.patch does not apply to the stock rules .*: "
                                          r"error: patch failed: rules\.d/60-x\.rules:1$"):
        userspace.patched(rules, patch)
    rules = {"lib/udev/rules.d/60-x.rules": b"old\n"}
    assert userspace.patched(rules, patch) == {"lib/udev/rules.d/60-x.rules": b"new\n"}

