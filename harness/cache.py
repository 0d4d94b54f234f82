"""The one stamp cache: an output is current when its stamp holds the key of
the inputs it was made from (and the outputs exist).

    s = Stamp(outdir / "stamp", key)
    if not s.fresh(image):
        ...make image...
        s.write()

Write the stamp last: a run that dies half-way leaves a stale or no stamp,
never a fresh one over a half-made output.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path


def key_of(*parts: str | bytes, sep: bytes = b"\n", length: int = 16) -> str:
    """A short sha256 of the inputs joined by `sep`."""
    return hashlib.sha256(sep.join(p.encode() if isinstance(p, str) else p for p in parts)
                          ).hexdigest()[:length]


@dataclass(frozen=True)
class Stamp:
    path: Path
    key: str

    def fresh(self, *outputs: Path) -> bool:
        try:
            held = self.path.read_text()
        except FileNotFoundError:
            return False
        return held == self.key and all(o.exists() for o in outputs)

    def exists(self) -> bool:
        return self.path.exists()

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(self.key)
        os.replace(tmp, self.path)

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)
