"""Parsers for what the guest prints, and the commands that print it."""
from __future__ import annotations

from dataclasses import dataclass

def partitions_cmd(disk: str = "sr") -> str:
    """One line per partition of the `disk`* disks: name major:minor start size."""
    return (f"for p in /sys/block/{disk}*/{disk}*[0-9]; do [ -e \"$p/partition\" ] || continue; "
            "read d < $p/dev; read s < $p/start; read n < $p/size; echo \"${p##*/} $d $s $n\"; "
            "done")   # `read`, not $(cat ...): no fork per value (a KASAN guest has hundreds)


PARTITIONS_CMD = partitions_cmd("sr")
DEFAULT_CMD = f"cat /proc/partitions; echo; echo 'name dev start size'; {PARTITIONS_CMD}"

# What udev made of the drives (`srpart boot --userspace udev`, tests of
# the udev userspace): util-linux's view, and every /dev/disk link that leads
# to an sr device
LSBLK_COLUMNS = "NAME,MAJ:MIN,TYPE,SIZE,FSTYPE,LABEL,PARTTYPE"
SR_NODES = "$(for d in /sys/block/sr*; do echo /dev/${d##*/}; done)"
LINKS_CMD = ("for l in /dev/disk/by-*/* /dev/cdrom; do [ -L \"$l\" ] || continue; "
             "t=$(readlink -f \"$l\"); case \"$t\" in /dev/sr*) echo \"${l#/dev/disk/} -> ${t#/dev/}\" ;; "
             "esac; done")
LSBLK_JSON_CMD = f"lsblk -J -b -o {LSBLK_COLUMNS} {SR_NODES}"


def parse_links(text: str) -> dict[str, str]:
    """LINKS_CMD's output: link under /dev/disk ("by-label/X", or "/dev/cdrom") -> device."""
    out = {}
    for line in text.splitlines():
        if " -> " in line:
            link, dev = line.rsplit(" -> ", 1)
            out[link.strip()] = dev.strip()
    return out


def parse_lsblk(text: str) -> dict[str, dict]:
    """LSBLK_JSON_CMD's output: device name -> its columns (children flattened)."""
    import json

    out: dict[str, dict] = {}

    def walk(devs):
        for d in devs:
            out[d["name"]] = {k: v for k, v in d.items() if k != "children"}
            walk(d.get("children", []))
    walk(json.loads(text)["blockdevices"])
    return out


def mount_label_cmd(label: str, mnt: str = "/mnt/l") -> str:
    """util-linux's mount by LABEL= (absolute paths: busybox sh runs its own applet
    for a bare `mount`), then the device findmnt says it mounted; unmounts."""
    return (f"mkdir -p {mnt} && /bin/mount -o ro LABEL='{label}' {mnt} && "
            f"/bin/findmnt -n -o SOURCE {mnt}; /bin/umount {mnt}")


ALL_PROPS_CMD = ("for d in /sys/class/block/sr*; do echo \"@@ ${d##*/}\"; "
                 "udevadm info --query=property --path=$d; done")


def parse_all_props(text: str) -> dict[str, dict[str, str]]:
    """ALL_PROPS_CMD's output: device -> its udev properties."""
    out: dict[str, dict[str, str]] = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("@@ "):
            cur = out.setdefault(line[3:].strip(), {})
        elif cur is not None and "=" in line:
            k, v = line.split("=", 1)
            cur[k] = v
    return out


UDEV_DEFAULT_CMD = f"lsblk -o {LSBLK_COLUMNS} {SR_NODES}; echo; {LINKS_CMD}"


@dataclass(frozen=True, order=True)
class ProcPartition:
    major: int
    minor: int
    blocks: int       # 1 KiB blocks
    name: str


@dataclass(frozen=True, order=True)
class SysPartition:
    name: str
    major: int
    minor: int
    start: int        # 512-byte sectors
    size: int


def parse_proc_partitions(text: str) -> list[ProcPartition]:
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) != 4 or not f[0].isdigit():
            continue
        rows.append(ProcPartition(int(f[0]), int(f[1]), int(f[2]), f[3]))
    return rows


def parse_sys_partitions(text: str) -> list[SysPartition]:
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) != 4 or ":" not in f[1]:
            continue
        major, minor = f[1].split(":")
        rows.append(SysPartition(f[0], int(major), int(minor), int(f[2]), int(f[3])))
    return rows


def volume_label_cmd(dev: str) -> str:
    """Print the ISO 9660 volume id (32 bytes at 32768 + 40) read from `dev`."""
    return f"dd if={dev} bs=2048 skip=16 count=1 2>/dev/null | dd bs=1 skip=40 count=32 2>/dev/null"


def drive_partitions(sysparts: list[SysPartition], k: int,
                     disk: str = "sr") -> list[tuple[int, int, int]]:
    """(number, start, size) of <disk>K's partitions (srK's unless told), by number."""
    return sorted((int(p.name[len(f"{disk}{k}p"):]), p.start, p.size)
                  for p in sysparts if p.name.startswith(f"{disk}{k}p"))


DISKS_CMD = "for d in /sys/block/sr*; do echo ${d##*/} $(cat $d/dev) $(cat $d/size); done"


@dataclass(frozen=True)
class Disk:
    name: str          # sr0
    dev: str           # 11:0
    size: int          # 512-byte sectors


def parse_disks(text: str) -> list[Disk]:
    """DISKS_CMD's output: every sr whole disk."""
    return [Disk(n, d, int(s)) for n, d, s in (line.split() for line in text.splitlines()
                                               if line.strip())]


def drive_partitions_of(vm, k: int) -> list[tuple[int, int, int]]:
    """srK's partitions read from a guest (anything with check(command) -> output)."""
    return drive_partitions(parse_sys_partitions(vm.check(PARTITIONS_CMD)), k)


def layout_cmd(k: int) -> str:
    """srK's partitions on one line, "number:start:size" each (512-byte sectors)."""
    return (f"for p in /sys/block/sr{k}/sr{k}p*; do [ -e $p/start ] && "
            f"read s < $p/start && read n < $p/size && echo ${{p##*/sr{k}p}}:$s:$n; done | sort -n | xargs")


def wait_cmd(condition: str, seconds: float = 10) -> str:
    """A guest command that polls the shell `condition` every 0.1 s; status 1 on timeout."""
    n = int(seconds * 10)
    return f"i=0; until {condition}; do sleep 0.1; i=$((i+1)); [ $i -ge {n} ] && exit 1; done; true"


def reprobe_with_tray_open(vm, dev: str, k: int, target: int) -> None:
    """Remove srK in the guest, open drive `dev`'s tray over QMP, rescan SCSI target
    `target`: sr probes a drive whose tray is open, after the boot (SeaBIOS closes
    trays while it looks for boot media). The scan write returns once the probe
    is done (the host's scan_mutex), so srK exists when it returns."""
    vm.check(f"echo 1 > /sys/block/sr{k}/device/delete")
    vm.check(wait_cmd(f"[ ! -e /sys/block/sr{k} ]"))
    vm.qmp.open_tray(dev)
    assert vm.qmp.tray_open(dev), f"{dev}: QMP opened the tray, QEMU says it is closed"
    vm.check(f"echo '0 {target} 0' > /sys/class/scsi_host/host0/scan")
    vm.check(f"[ -e /sys/block/sr{k} ]")


# What must never appear in dmesg for an empty drive or a drive whose
# medium just went away: reads of a medium that is not there.
# scsi-hd disks, keyed by SCSI target (stable across kernels, unlike sdX names):
# per disk "disk <target> <name> <size>", per partition "part <target> <partno> <start> <size>"
# `read` is a shell builtin: no fork per sysfs file (a disk of 255 partitions
# took 765 `cat`s, over 120 s on a KASAN kernel under TCG next to other VMs)
SD_CMD = ("for d in /sys/block/sd*; do t=$(readlink -f $d/device); t=${t##*/}; "
          "read s < $d/size; echo disk $t ${d##*/} $s; for p in $d/${d##*/}*; do "
          "[ -e $p/partition ] || continue; read n < $p/partition; read a < $p/start; "
          "read z < $p/size; echo part $t $n $a $z; done; done")


@dataclass(frozen=True)
class SdDisk:
    target: str                                  # "0:0:3:0"
    size: int                                    # 512-byte sectors
    parts: tuple[tuple[int, int, int], ...]      # (partno, start, size), sorted
    name: str = ""                               # "sdc" in this boot


def parse_sd(text: str) -> dict[str, SdDisk]:
    sizes, names, parts = {}, {}, {}
    for line in text.splitlines():
        f = line.split()
        if f[:1] == ["disk"] and len(f) == 4:
            names[f[1]], sizes[f[1]] = f[2], int(f[3])
            parts.setdefault(f[1], [])
        elif f[:1] == ["part"] and len(f) == 5:
            parts.setdefault(f[1], []).append((int(f[2]), int(f[3]), int(f[4])))
    return {t: SdDisk(t, sizes[t], tuple(sorted(parts[t])), names[t]) for t in sizes}


MEDIA_NOISE = ("I/O error", "unable to read partition table", "Sense Key", "Buffer I/O",
               "ASC=0x3a", "beyond EOD", "unaligned transfer")


KMEMLEAK = "/sys/kernel/debug/kmemleak"


def kmemleak_cmd(settle: int = 5) -> str:
    """Scan for leaks (kernels with CONFIG_DEBUG_KMEMLEAK) and print the report.

    kmemleak only reports objects older than 5 s and a single scan can see a
    pointer in flight, so: wait, scan twice, read (as syzkaller does). Prints
    'kmemleak: absent' on a kernel without it."""
    return (f"[ -e {KMEMLEAK} ] || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null; "
            f"if [ -e {KMEMLEAK} ]; then sleep {settle}; echo scan > {KMEMLEAK}; "
            f"echo scan > {KMEMLEAK}; cat {KMEMLEAK}; else echo 'kmemleak: absent'; fi")


def parse_kmemleak(text: str) -> tuple[bool, list[str]]:
    """(kmemleak present, one block per unreferenced object)."""
    if "kmemleak: absent" in text:
        return False, []
    blocks: list[str] = []
    for line in text.splitlines():
        if line.startswith("unreferenced object"):
            blocks.append(line)
        elif blocks:
            blocks[-1] += "\n" + line
    return True, blocks


def ext_minors_cmd() -> str:
    """The extended-dev_t minors in use (major 259), one per line, sorted."""
    return "ls /sys/dev/block | sed -n 's/^259://p' | sort -n"


def parse_ext_minors(text: str) -> list[int]:
    return [int(x) for x in text.split()]


# A dropped partition's /sys/dev/block/259:M link goes at device_del(), but its
# minor returns to the IDA only when the block device's inode is freed, after
# an RCU grace period (bdev_free_inode()), or never if it leaked. Counting the
# links cannot tell; re-creating the partitions after this long with nothing
# of them left open and comparing the minors they get can: IDA hands out the
# lowest free ones again.
MINOR_SETTLE_S = 3
