"""Test-kernel configuration: tinyconfig + Kconfig.fragment, then validated.

Modelled on kunit_tool's kunit_config: a Kconfig is a dict of options;
the requested fragment must be a subset of the resulting .config, where
`# CONFIG_X is not set` is satisfied by an absent option.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .cache import Stamp
from .errors import SrpartError

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


@dataclass
class Kconfig:
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> "Kconfig":
        opts: dict[str, str] = {}
        for line in text.splitlines():
            line = line.strip()
            if m := _SET.match(line):
                opts[m.group(1)] = m.group(2)
            elif m := _UNSET.match(line):
                opts[m.group(1)] = "n"
            elif line and not line.startswith("#"):
                raise SrpartError(f"not a Kconfig line: {line!r}")
        return cls(opts)

    @classmethod
    def read(cls, path: Path) -> "Kconfig":
        return cls.parse(path.read_text())

    def lost_in(self, other: "Kconfig") -> list[str]:
        """Options requested here that `other` does not have as requested."""
        lost = []
        for name, want in self.options.items():
            got = other.options.get(name, "n")
            if got != want:
                lost.append(f"{name}={want} (got {got if name in other.options else 'absent'})")
        return lost

    def with_options(self, extra: dict[str, str]) -> "Kconfig":
        return Kconfig({**self.options, **extra})

    def render(self) -> str:
        out = []
        for name, val in self.options.items():
            out.append(f"# {name} is not set" if val == "n" else f"{name}={val}")
        return "\n".join(out) + "\n"


def validate_config(requested: Kconfig, dotconfig: Path) -> None:
    """Fail naming every requested option that olddefconfig dropped or changed."""
    lost = requested.lost_in(Kconfig.read(dotconfig))
    if lost:
        raise SrpartError(f"{dotconfig}: requested options lost after olddefconfig: {', '.join(lost)}")


def configure(tree: Path, obj: Path, requested: Kconfig) -> None:
    """tinyconfig, merge the fragment with merge_config.sh, olddefconfig, validate."""
    obj.mkdir(parents=True, exist_ok=True)
    frag = obj / "srpart.fragment"
    text = requested.render()
    stamp = Stamp(obj / "srpart.fragment.stamp", text)
    if stamp.fresh(obj / ".config"):
        # same fragment, maybe another variant's Kconfig: olddefconfig adds or
        # drops that variant's symbols (about 1 s instead of 7)
        steps = [["make", "-s", f"O={obj}", "olddefconfig"]]
    else:
        stamp.drop()
        frag.write_text(text)
        steps = [
            ["make", "-s", f"O={obj}", "tinyconfig"],
            ["scripts/kconfig/merge_config.sh", "-m", "-O", str(obj), str(obj / ".config"), str(frag)],
            ["make", "-s", f"O={obj}", "olddefconfig"],
        ]
    for cmd in steps:
        r = subprocess.run(cmd, cwd=tree, text=True, capture_output=True)
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
            raise SrpartError(f"{' '.join(cmd[:3])} failed in {tree}: {tail[0]}")
    validate_config(requested, obj / ".config")
    stamp.write()
