"""One kernel partition parser compiled for the host, under ASan and UBSan.

A finding in a parser needs a reproducer that `make check` runs, but the
plain kernels have no KASAN (an over-read there changes nothing a test can
see) and some parsers only the debug kernels have (sysv68 is off in
Debian). This stage takes the parser's .c file from the pristine extracted tree,
applies what a series changes in it (`git apply --include`), puts it next
to harness/hostparse-c (check.h with the kernel's read_part_sector()
semantics: the 4 KiB page that holds the sector is its own heap block;
kshim.h with the lists, allocation, byte order and uuid helpers ldm.c uses)
and builds `hostparse` with gcc -fsanitize=address,undefined. Reading past the
page the kernel would have mapped is a heap-buffer-overflow report here, as
it is a KASAN report in the guest.

    build(kernel, series, parser) -> Path   source -> binary (cached by content)
    run(binary, image, limit) -> HostRun    one parse of one image
    parse(rc, stdout, stderr) -> HostRun    plain text -> dataclass (unit-tested)
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import paths, source
from .errors import SrpartError

SHIM = Path(__file__).resolve().parent / "hostparse-c"
# parser -> (its entry point, its own headers next to it in block/partitions/)
PARSERS = {"sysv68": ("sysv68_partition", ()), "ldm": ("ldm_partition", ("ldm.h",))}
# The kernel headers the parsers include: empty here, kshim.h (force-included) and
# check.h hold what the parsers use of them.
EMPTY_HEADERS = ("linux/fs.h", "linux/kernel.h", "linux/list.h", "linux/msdos_partition.h",
                 "linux/pagemap.h", "linux/slab.h", "linux/stringify.h", "linux/types.h",
                 "linux/uuid.h", "linux/unaligned.h", "asm/byteorder.h", "asm/unaligned.h")
CFLAGS = ["-std=gnu11", "-O1", "-g", "-fno-omit-frame-pointer",
          "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-Wall",
          "-Wno-pointer-sign", "-Wno-unused-function", "-Iinc", "-include", "kshim.h"]
DISK_MAX_PARTS = 256


@dataclass(frozen=True)
class HostPart:
    slot: int
    start: int    # 512-byte sectors, as the kernel counts
    size: int


@dataclass(frozen=True)
class HostRun:
    rc: int
    result: int | None                 # the parser's return value; None if it never returned
    parts: list[HostPart] = field(default_factory=list)
    line: str = ""                     # what the kernel prints after the disk name
    sanitizer: str = ""                # first ASan/UBSan report line, "" when clean
    stderr: str = ""


_SAN = re.compile(r"(ERROR: AddressSanitizer: .*|runtime error: .*|ERROR: LeakSanitizer: .*)")


def parse(rc: int, stdout: str, stderr: str) -> HostRun:
    result = None
    parts: list[HostPart] = []
    line = ""
    for ln in stdout.splitlines():
        if m := re.fullmatch(r"result (-?\d+)", ln):
            result = int(m.group(1))
        elif m := re.fullmatch(r"part (\d+) (\d+) (\d+)", ln):
            parts.append(HostPart(int(m.group(1)), int(m.group(2)), int(m.group(3))))
        elif ln.startswith("line "):
            line = ln[5:]
    m = _SAN.search(stderr)
    return HostRun(rc, result, parts, line, m.group(1).strip() if m else "", stderr)


def parser_source(kernel: str, series: str | None, name: str) -> str:
    """block/partitions/<name> of the pristine tree, with the patches of `series`
    (None: none) that touch it applied; never touches the work tree, so it can
    run while a kernel builds from it."""
    src = source.extract(kernel)
    rel = f"block/partitions/{name}"
    text = source.git_out(src, "show", f"srpart-base:{rel}")
    if series is None:
        return text
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / rel
        f.parent.mkdir(parents=True)
        f.write_text(text)
        for patch in source.series_files(series):
            r = subprocess.run(["git", "apply", f"--include={rel}", str(patch.resolve())],
                               cwd=tmp, text=True, capture_output=True)
            if r.returncode != 0:
                raise SrpartError(f"{patch.relative_to(paths.ROOT)} does not apply to {rel} of "
                                  f"linux-source-{kernel}: {r.stderr.strip()[:200]}")
        return f.read_text()


def build(kernel: str, series: str | None, parser: str = "sysv68") -> Path:
    """Compile `parser` of the pristine tree plus `series` (None: pristine) with
    the shim; reused while the parser's source and the shim are unchanged."""
    if parser not in PARSERS:
        raise SrpartError(f"no host build for parser {parser!r}: choose one of {', '.join(PARSERS)}")
    entry, headers = PARSERS[parser]
    files = {name: parser_source(kernel, series, name) for name in (f"{parser}.c", *headers)}
    shim = {p.name: p.read_bytes() for p in sorted(SHIM.iterdir())}
    key = hashlib.sha256(b"".join(k.encode() + v.encode() for k, v in files.items())
                         + b"".join(k.encode() + v for k, v in shim.items())
                         + " ".join(CFLAGS).encode()).hexdigest()[:16]
    out = paths.BUILD / "hostparse" / f"{parser}-{key}"
    binary = out / "hostparse"
    if binary.exists():
        return binary
    out.mkdir(parents=True, exist_ok=True)
    for name, data in shim.items():
        (out / name).write_bytes(data)
    for name, text in files.items():
        (out / name).write_text(text)
    for h in EMPTY_HEADERS:
        (out / "inc" / h).parent.mkdir(parents=True, exist_ok=True)
        (out / "inc" / h).write_text("/* srpart host build: see kshim.h */\n")
    r = subprocess.run(["gcc", *CFLAGS, f"-DPARSER={entry}", "main.c", f"{parser}.c",
                        "-o", "hostparse"], cwd=out, text=True, capture_output=True)
    if r.returncode != 0:
        (out / "gcc.log").write_text(r.stderr)
        raise SrpartError(f"gcc could not build {parser}.c of {kernel} {series or 'pristine'} for the host "
                          f"(log: {out}/gcc.log): {first_error(r.stderr)}")
    return binary


def first_error(log: str) -> str:
    """The first line of a gcc log that says error, else its first line."""
    lines = log.strip().splitlines()
    return next((ln for ln in lines if "error" in ln), lines[0] if lines else "no output")


def run(binary: Path, image: Path, limit: int = DISK_MAX_PARTS) -> HostRun:
    if not image.is_file():
        raise SrpartError(f"{image}: no such image")
    r = subprocess.run([str(binary), str(image), str(limit)], text=True, capture_output=True,
                       timeout=60, env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
                                        "UBSAN_OPTIONS": "print_stacktrace=1"})
    return parse(r.returncode, r.stdout, r.stderr)
