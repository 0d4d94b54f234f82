"""A small QMP client: JSON lines over QEMU's `-qmp unix:` socket.

Debian ships no QMP client library; this is the part of the protocol srpart
needs: the greeting and capabilities handshake, commands with their return
value or error, and asynchronous events kept until someone waits for them.
"""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from .errors import SrpartError


SUN_PATH_MAX = 108       # sizeof(sockaddr_un.sun_path) on Linux, with its NUL


class QmpError(SrpartError):
    pass


class QMP:
    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        self.path = Path(path)
        if len(bytes(self.path)) >= SUN_PATH_MAX:
            raise QmpError(f"QMP socket path is {len(bytes(self.path))} bytes, a Unix socket "
                           f"takes at most {SUN_PATH_MAX - 1}: {self.path}")
        self.events: list[dict] = []
        self._buf = b""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(str(self.path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                self.sock.close()
                if time.monotonic() > deadline:
                    raise QmpError(f"no QMP socket at {self.path} after {timeout:.0f} s") from None
                time.sleep(0.05)
        # The greeting comes first, but an event (RESUME) can arrive around it
        # when QEMU is still starting: keep events, wait for the greeting.
        while True:
            msg = self._read(timeout)
            if "QMP" in msg:
                break
            if "event" not in msg:
                raise QmpError(f"unexpected QMP greeting: {msg}")
            self.events.append(msg)
        self.cmd("qmp_capabilities")

    def close(self) -> None:
        self.sock.close()

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise QmpError(f"QMP: nothing from QEMU for {timeout:.0f} s")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                raise QmpError("QMP: QEMU closed the socket")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def cmd(self, name: str, timeout: float = 10.0, **arguments) -> object:
        """Run one command; return its "return" value or raise QmpError."""
        msg = {"execute": name}
        if arguments:
            msg["arguments"] = {k.replace("_", "-") if k in _DASHED else k: v
                                for k, v in arguments.items()}
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            r = self._read(timeout)
            if "event" in r:
                self.events.append(r)
            elif "error" in r:
                e = r["error"]
                raise QmpError(f"QMP {name}: {e.get('class')}: {e.get('desc')}")
            elif "return" in r:
                return r["return"]

    def wait_event(self, name: str, timeout: float = 10.0, **data) -> dict:
        """The first event `name` whose data contains `data`, queued or still to come."""
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev["event"] == name and all(ev.get("data", {}).get(k) == v
                                               for k, v in data.items()):
                    return self.events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise QmpError(f"QMP: no {name} event {data or ''} within {timeout:.0f} s")
            self.events.append(self._read(left))

    # The operations the tests use.

    def tray_and_lock(self, dev: str) -> tuple[bool, bool]:
        """(tray open, door locked by the guest) of drive `dev`, as QEMU's drive has them."""
        for b in self.cmd("query-block"):
            if b.get("qdev") == dev or b.get("device") == dev:
                return bool(b.get("tray_open")), bool(b.get("locked"))
        raise QmpError(f"QMP: no block device {dev}")

    def tray_open(self, dev: str) -> bool:
        return self.tray_and_lock(dev)[0]

    def open_tray(self, dev: str) -> None:
        self.cmd("blockdev-open-tray", id=dev, force=True)

    def close_tray(self, dev: str) -> None:
        self.cmd("blockdev-close-tray", id=dev)

    def change_medium(self, dev: str, image: Path | None, force: bool = False) -> None:
        """Put `image` in drive `dev` (tray closed afterwards); None: eject and leave empty.
        `force` opens the tray even while the guest holds the door locked."""
        if image is None:
            self.cmd("blockdev-open-tray", id=dev, force=True)
            self.cmd("blockdev-remove-medium", id=dev)
            self.cmd("blockdev-close-tray", id=dev)
            return
        # force (QEMU >= 7.1) opens a tray the guest keeps locked in the same
        # command: a guest that opens the drive meanwhile (cdrom_open() closes
        # an open tray) cannot slip in between
        self.cmd("blockdev-change-medium", id=dev, filename=str(Path(image).resolve()),
                 format="raw", read_only_mode="read-only", force=force)

    def add_cd(self, dev: str, image: Path, scsi_id: int) -> None:
        """Hot-plug a scsi-cd holding `image` at target `scsi_id` of scsi0."""
        node = f"hp-{dev}"
        self.cmd("blockdev-add", driver="raw", node_name=node, read_only=True,
                 file={"driver": "file", "filename": str(Path(image).resolve()), "read-only": True})
        self.cmd("device_add", driver="scsi-cd", id=dev, drive=node, bus="scsi0.0",
                 channel=0, scsi_id=scsi_id, lun=0)

    def del_device(self, dev: str, timeout: float = 30.0) -> None:
        """Unplug `dev` and wait until QEMU says it is gone (the guest let go of it)."""
        self.cmd("device_del", id=dev)
        self.wait_event("DEVICE_DELETED", timeout, device=dev)
        node = f"hp-{dev}"
        if any(b.get("node-name") == node for b in self.cmd("query-named-block-nodes")):
            self.cmd("blockdev-del", node_name=node)


# Python keyword arguments cannot contain '-'; these are QMP's dashed names.
_DASHED = {"read_only_mode", "node_name", "read_only", "scsi_id"}
