"""The build stage's runner and the series check's warning reader, on recorded
kbuild output and a stand-in Makefile (no kernel build)."""
from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

from harness import kbuild, series
from harness.errors import SrpartError

DATA = Path(__file__).parent / "data"


def test_progress_counts_what_kbuild_compiled():
    log = (DATA / "kbuild/incremental.log").read_text().splitlines()
    p = kbuild.Progress("t", Path("x.log"))
    for line in log:
        p.feed(line + "\n")
    # independent count: the quiet-mode lines of the compiler and the assembler
    assert p.files == sum(1 for ln in log if ln[:5] in ("  CC ", "  AS "))
    assert p.step == "BUILD arch/x86/boot/bzImage"


def test_progress_line_says_count_elapsed_step_and_log():
    p = kbuild.Progress("6.1 srpart", Path("build/logs/b.log"), expected=1046, files=412,
                        step="CC fs/ext4/super.o", started=100.0)
    line = p.line(100.0 + 161)
    assert "412/1046 files compiled" in line and "2:41 elapsed" in line
    assert "CC fs/ext4/super.o" in line and "build/logs/b.log" in line


def _makefile(tmp_path: Path, fail: bool) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "Makefile").write_text(textwrap.dedent(f"""\
        bzImage:
        \t@echo '  CC      a.o'
        \t@echo '  CC      b.o'
        \t@echo '  LD      vmlinux'
        \t@{'false' if fail else 'true'}
        """))
    return tree


def test_make_prints_progress_and_remembers_the_count(tmp_path, monkeypatch):
    monkeypatch.setattr(kbuild, "PLAIN_EVERY", 0.0)
    tree, obj, out = _makefile(tmp_path, False), tmp_path / "obj", io.StringIO()
    obj.mkdir()
    p = kbuild.make(tree, obj, ["bzImage"], 1, tmp_path / "b.log", "demo", out=out)
    assert p.files == 2
    assert "srpart: demo: " in out.getvalue() and str(tmp_path / "b.log") in out.getvalue()
    assert "  LD      vmlinux" in (tmp_path / "b.log").read_text()
    again = kbuild.make(tree, obj, ["bzImage"], 1, tmp_path / "b.log", "demo", out=out)
    assert again.expected == 2


def test_failed_make_names_its_log(tmp_path):
    tree, obj, out = _makefile(tmp_path, True), tmp_path / "obj", io.StringIO()
    obj.mkdir()
    with pytest.raises(SrpartError, match=r"kernel build demo failed; full log: .*b\.log"):
        kbuild.make(tree, obj, ["bzImage"], 1, tmp_path / "b.log", "demo", out=out, quiet=True)
    assert "LD      vmlinux" in out.getvalue()        # the log's tail, printed


def test_series_check_reads_warnings_relative_to_the_tree():
    tree = Path("/w/src/linux-source-6.1")
    log = textwrap.dedent("""\
          CC      block/partitions/efi.o
        /w/src/linux-source-6.1/block/partitions/efi.c:240:6: warning: no previous prototype for 'f' [-Wmissing-prototypes]
        /w/src/linux-source-6.1/include/linux/blkdev.h:12:1: warning: 'x' defined but not used [-Wunused-function]
        drivers/scsi/sr.c:5:1: warning: old-style definition
        /w/src/linux-source-6.1/block/partitions/efi.c:240:6: note: not a warning
        """)
    assert series.warnings_in(log, tree) == {
        ("block/partitions/efi.c", "no previous prototype for 'f' [-Wmissing-prototypes]"),
        ("include/linux/blkdev.h", "'x' defined but not used [-Wunused-function]"),
        ("drivers/scsi/sr.c", "old-style definition"),
    }


def test_series_check_reads_kernel_doc_warnings_too():
    """W=1 runs kernel-doc, whose warnings have no column: patch 0004 added two
    that series-check did not see."""
    tree = Path("/w/src/linux-source-6.1")
    log = ("/w/src/linux-source-6.1/block/partitions/aix.c:140: warning: Function parameter "
           "or member 'lba' not described in 'alloc_lvd'\n")
    assert series.warnings_in(log, tree) == {
        ("block/partitions/aix.c", "Function parameter or member 'lba' not described in 'alloc_lvd'")}


def test_bench_splits_a_boot_into_phases_that_add_up():
    from harness import bench
    log = (DATA / "kernel-boot-8drives.log").read_text()
    run_init = float(bench.RUN_INIT.search(log).group(1))
    p = bench.phases(ready=2.0, cmd_start=2.05, cmd_end=2.15, total=2.6, uptime=1.7,
                     kernel_log=log)
    assert p.firmware == pytest.approx(0.35)
    assert p.kernel == run_init
    assert p.init == pytest.approx(2.0 - 0.35 - run_init)
    assert (p.command, p.poweroff) == (pytest.approx(0.15), pytest.approx(0.45))
    assert p.ready == pytest.approx(2.0) and p.total == pytest.approx(2.6)
    with pytest.raises(ValueError, match="Run /init"):
        bench.phases(2.0, 2.05, 2.15, 2.6, 1.7, "[    0.1] no init here\n")
