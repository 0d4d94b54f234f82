"""harness/gcov.py: the guest transfer, the merge and the report, on a program built here."""
from __future__ import annotations

import base64
import subprocess
import textwrap

import pytest

from harness import gcov
from harness.errors import SrpartError


def test_collected_files_are_decoded_by_name():
    a, b = bytes(range(256)) * 3, b"oncf\x00\x01"
    text = (f"noise\n{gcov.BEGIN} msdos.gcda\n" + base64.encodebytes(a).decode() +
            f"{gcov.END}\n{gcov.BEGIN} sun.gcda\n{base64.b64encode(b).decode()}\n{gcov.END}\n")
    assert gcov.parse_collected(text) == {"msdos.gcda": a, "sun.gcda": b}


def test_a_kernel_without_gcov_gives_nothing_and_a_cut_transfer_fails():
    assert gcov.parse_collected("gcov: absent\n") == {}
    with pytest.raises(SrpartError, match="sun.gcda cut short"):
        gcov.parse_collected(f"{gcov.BEGIN} sun.gcda\nAAAA\n")


def test_json_lines_are_counted_per_file_in_the_folder():
    doc = {"files": [
        {"file": "/x/linux/block/partitions/sun.c",
         "lines": [{"line_number": 3, "count": 0}, {"line_number": 3, "count": 2},
                   {"line_number": 5, "count": 0}, {"line_number": 9, "count": 1}]},
        {"file": "/x/linux/include/linux/kernel.h", "lines": [{"line_number": 1, "count": 0}]}]}
    (c,) = gcov.parse_gcov_json(doc)
    assert (c.source, c.lines, c.reached, c.unreached) == ("block/partitions/sun.c", 3, 2, [5])
    assert round(c.percent, 1) == 66.7


def _build(tmp_path, name, body):
    tree, obj = tmp_path / "tree", tmp_path / "obj"
    src = tree / gcov.FOLDER / f"{name}.c"
    src.parent.mkdir(parents=True)
    (obj / gcov.FOLDER).mkdir(parents=True)
    src.write_text(textwrap.dedent(body))
    o = obj / gcov.FOLDER / f"{name}.o"
    subprocess.run(["gcc", "--coverage", "-O0", "-c", str(src), "-o", str(o)], check=True)
    exe = tmp_path / name
    subprocess.run(["gcc", "--coverage", str(o), "-o", str(exe)], check=True)
    return tree, obj, exe


def test_two_runs_merge_and_report_the_line_neither_reached(tmp_path):
    tree, obj, exe = _build(tmp_path, "parser", """\
        int parse(int a)
        {
        \tif (a == 1)
        \t\treturn 10;
        \tif (a == 2)
        \t\treturn 20;
        \treturn 30;
        }
        int main(int argc, char **argv)
        {
        \treturn parse(argc) == 0;
        }
        """)
    runs = []
    for i, args in enumerate(([], ["x"])):              # argc 1, then 2
        subprocess.run([str(exe), *args], check=True)
        gcda = obj / gcov.FOLDER / "parser.gcda"
        run = tmp_path / f"run{i}"
        gcov.save(run, {"parser.gcda": gcda.read_bytes()})
        gcda.unlink()
        runs.append(run)
    one = gcov.report(gcov.merge(runs[:1], tmp_path / "m1"), obj, tree)
    both = gcov.report(gcov.merge(runs, tmp_path / "m2"), obj, tree)
    assert [c.source for c in both] == ["block/partitions/parser.c"]
    assert one[0].unreached == [5, 6, 7]                 # argc 1 only
    assert both[0].unreached == [7]                     # "return 30": no run had argc 3
    assert both[0].reached == one[0].reached + 2
    assert "block/partitions/parser.c" in gcov.render(both)
