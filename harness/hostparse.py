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
    run(binary, image, limit, env) -> HostRun
                                            one parse of one image (env: entries that
                                            replace ENV's, e.g. ASAN_OPTIONS)
    parse(rc, stdout, stderr) -> HostRun    plain text -> dataclass (unit-tested)
    fuzz(kernel, series, parser, seed, count, coverage) -> HostFuzz
                                            the parser's fuzz kind (fixtures/fuzz.py),
                                            every image through run(); with coverage,
                                            gcov's reading of the parser's file

    /usr/bin/python3 -m harness.hostparse --kernel 6.1 --parser aix --seed 7 --count 1100 \
        [--pristine] [--coverage]
"""
from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import entry, gcov, oracle, paths, source
from .errors import SrpartError
from .lock import locked

SHIM = Path(__file__).resolve().parent / "hostparse-c"
# parser -> (its entry point, its own headers next to it in block/partitions/)
PARSERS = {"sysv68": ("sysv68_partition", ()), "ldm": ("ldm_partition", ("ldm.h",)),
           "aix": ("aix_partition", ()), "karma": ("karma_partition", ()),
           "acorn": ("adfspart_check_ICS", ())}
# The kernel headers the parsers include: empty here, kshim.h (force-included) and
# check.h hold what the parsers use of them.
EMPTY_HEADERS = ("linux/adfs_fs.h", "linux/buffer_head.h", "linux/compiler.h", "linux/fs.h",
                 "linux/kernel.h", "linux/list.h", "linux/msdos_partition.h", "linux/pagemap.h",
                 "linux/slab.h", "linux/stringify.h", "linux/types.h", "linux/uuid.h",
                 "linux/unaligned.h", "asm/byteorder.h", "asm/unaligned.h")
CFLAGS = ["-std=gnu11", "-O1", "-g", "-fno-omit-frame-pointer",
          "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
          # as the kernel's UBSAN on x86 (UBSAN_ALIGNMENT needs an architecture
          # without efficient unaligned access): karma.c's label entries sit at
          # byte 270 of the sector
          "-fno-sanitize=alignment", "-Wall",
          "-Wno-pointer-sign", "-Wno-unused-function", "-Iinc", "-include", "kshim.h",
          # acorn.c: the ICS format only (the one catalog kind of acorn.c)
          "-DCONFIG_ACORN_PARTITION_ICS"]
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

    def oracle_parts(self) -> list[oracle.Part]:
        """The partitions as harness.oracle's readers give theirs, to compare."""
        return [oracle.Part(p.slot, p.start, p.size) for p in self.parts]


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


def build(kernel: str, series: str | None, parser: str = "sysv68", coverage: bool = False) -> Path:
    """Compile `parser` of the pristine tree plus `series` (None: pristine) with
    the shim (and gcc --coverage); reused while the parser's source and the shim
    are unchanged."""
    if parser not in PARSERS:
        raise SrpartError(f"no host build for parser {parser!r}: choose one of {', '.join(PARSERS)}")
    entry, headers = PARSERS[parser]
    files = {name: parser_source(kernel, series, name) for name in (f"{parser}.c", *headers)}
    shim = {p.name: p.read_bytes() for p in sorted(SHIM.iterdir())}
    flags = CFLAGS + (["--coverage"] if coverage else [])
    key = hashlib.sha256(b"".join(k.encode() + v.encode() for k, v in files.items())
                         + b"".join(k.encode() + v for k, v in shim.items())
                         + " ".join(flags).encode()).hexdigest()[:16]
    out = paths.BUILD / "hostparse" / f"{parser}-{key}"
    binary = out / "hostparse"
    # xdist workers ask for the same key at once: one builds, the others wait for
    # it (a binary the linker is still writing is not executable: EACCES, seen in
    # CI). gcc names the .gcda files after -o, so the link writes `hostparse`
    # itself and a failed one is removed.
    with locked(paths.BUILD / "locks" / f"hostparse-{parser}-{key}.lock"):
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
        r = subprocess.run(["gcc", *flags, f"-DPARSER={entry}", "main.c", f"{parser}.c",
                            "-o", "hostparse"], cwd=out, text=True, capture_output=True)
        if r.returncode != 0:
            binary.unlink(missing_ok=True)
            (out / "gcc.log").write_text(r.stderr)
            raise SrpartError(f"gcc could not build {parser}.c of {kernel} {series or 'pristine'} "
                              f"for the host (log: {out}/gcc.log): {first_error(r.stderr)}")
    return binary


def first_error(log: str) -> str:
    """The first line of a gcc log that says error, else its first line."""
    lines = log.strip().splitlines()
    return next((ln for ln in lines if "error" in ln), lines[0] if lines else "no output")


# the whole environment of a run; run(env=...) adds to it or replaces entries
ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}


def run(binary: Path, image: Path, limit: int = DISK_MAX_PARTS,
        env: dict[str, str] | None = None) -> HostRun:
    if not image.is_file():
        raise SrpartError(f"{image}: no such image")
    r = subprocess.run([str(binary), str(image), str(limit)], text=True, capture_output=True,
                       timeout=60, env={**ENV, **(env or {})})
    return parse(r.returncode, r.stdout, r.stderr)


@dataclass
class HostFuzz:
    parser: str
    series: str | None
    images: int
    reports: list[tuple[Path, str]] = field(default_factory=list)   # image, first report line
    coverage: gcov.FileCoverage | None = None

    def summary(self) -> str:
        what = f"{self.parser}.c {'pristine' if self.series is None else 'with patches/' + self.series}"
        line = (f"srpart hostparse: {what}: {self.images} images, "
                f"{len(self.reports)} sanitizer reports")
        if self.coverage:
            c = self.coverage
            line += f", {c.reached}/{c.lines} lines reached ({c.percent:.1f}%)"
        return line


def coverage_of(binary: Path, parser: str) -> gcov.FileCoverage:
    """gcov's reading of what the runs since the build reached in `parser`.c."""
    data = binary.parent / f"hostparse-{parser}.gcda"   # gcc names it after the -o of the link
    if not data.exists():
        raise SrpartError(f"{data}: no coverage data (no image parsed?)")
    cov = [c for c in gcov.gcov_json(binary.parent, data.name, None) if c.source == f"{parser}.c"]
    if not cov:
        raise SrpartError(f"gcov says nothing about {parser}.c")
    return cov[0]


def fuzz(kernel: str, series: str | None, parser: str, seed: int, count: int,
         coverage: bool = False) -> HostFuzz:
    """`count` cases of the parser's own fuzz kind through the host build; the
    images with a sanitizer report are kept in build/fuzz/host-failed/."""
    from fixtures import fuzz as gen

    if parser not in gen.WRITERS:
        raise SrpartError(f"fixtures/fuzz.py has no kind {parser!r} to fuzz {parser}.c with")
    binary = build(kernel, series, parser, coverage)
    for old in binary.parent.glob("*.gcda"):
        old.unlink()
    result = HostFuzz(parser, series, count)
    failed = paths.BUILD / "fuzz" / "host-failed"
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(count):
            c = gen.case(seed, i, Path(tmp), (parser,))
            r = run(binary, c.path)
            if r.sanitizer or r.result is None:
                failed.mkdir(parents=True, exist_ok=True)
                kept = failed / f"{kernel}-{series or 'pristine'}-{c.path.name}"
                shutil.copy2(c.path, kept)
                result.reports.append((kept, r.sanitizer or f"exit {r.rc}, no result"))
            c.path.unlink()
    if coverage:
        result.coverage = coverage_of(binary, parser)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.hostparse",
                                 description="fuzz one kernel partition parser on the host under ASan/UBSan")
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--parser", choices=sorted(PARSERS), required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--pristine", action="store_true", help="the file without the series")
    ap.add_argument("--coverage", action="store_true", help="build with gcov, report the lines reached")
    args = ap.parse_args(argv)
    res = fuzz(args.kernel, None if args.pristine else args.kernel, args.parser, args.seed,
               args.count, args.coverage)
    print(res.summary())
    for img, line in res.reports[:10]:
        print(f"  {img}: {line}")
    if res.coverage and res.coverage.unreached:
        print(f"  not reached: {','.join(map(str, res.coverage.unreached))}")
    return 1 if res.reports else 0


if __name__ == "__main__":
    entry.run(main)
