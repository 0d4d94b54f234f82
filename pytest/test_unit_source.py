"""Series application: a patch that does not apply names its file and hunk (no kernel tree)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness import source


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *source.GIT_ID, *args], cwd=cwd, check=True, text=True,
                          capture_output=True).stdout


@pytest.fixture
def tree(tmp_path):
    t = tmp_path / "tree"
    t.mkdir()
    (t / "Makefile").write_text("VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 192\n")
    (t / "sr.c").write_text("".join(f"line {i}\n" for i in range(1, 41)))
    git(t, "init", "-q")
    git(t, "add", "-A")
    git(t, "commit", "-q", "-m", "base")
    return t


def make_patch(tree: Path, tmp: Path) -> Path:
    text = (tree / "sr.c").read_text()
    (tree / "sr.c").write_text(text.replace("line 5\n", "line five\n").replace("line 30\n", "line thirty\n"))
    patch = tmp / "0001-x.patch"
    patch.write_text(git(tree, "diff"))
    git(tree, "checkout", "-q", "sr.c")
    return patch


def test_version_is_read_from_the_makefile(tree):
    assert source.makefile_version(tree) == "6.1.192"


def test_failure_names_the_second_hunk(tree, tmp_path):
    patch = make_patch(tree, tmp_path)
    (tree / "sr.c").write_text((tree / "sr.c").read_text().replace("line 29\n", "changed 29\n"))
    assert source.describe_failure(tree, patch) == "hunk #2 of sr.c (at line 27)"


def test_failure_names_the_first_hunk(tree, tmp_path):
    patch = make_patch(tree, tmp_path)
    (tree / "sr.c").write_text((tree / "sr.c").read_text().replace("line 4\n", "changed 4\n"))
    assert source.describe_failure(tree, patch) == "hunk #1 of sr.c (at line 2)"


def test_missing_file(tree, tmp_path):
    patch = make_patch(tree, tmp_path)
    (tree / "sr.c").unlink()
    assert "sr.c" in source.describe_failure(tree, patch)


def test_unknown_kernel_is_one_line():
    with pytest.raises(source.SrpartError, match=r"^unknown kernel '5.10': choose one of"):
        source.tarball_for("5.10")


def test_series_excludes_the_cover_letter():
    names = [p.name for p in source.series_files("6.1")]
    assert names and not any(n.startswith("0000-") for n in names)


def test_no_patch_line_ends_in_whitespace():
    from harness import paths, series

    for f in sorted(paths.PATCHES.glob("*/*.patch")):
        assert series.trailing_whitespace(f) == [], f.name


def test_trailing_whitespace_check_flags_every_line(tmp_path):
    from harness import series

    f = tmp_path / "0001-x.patch"
    f.write_text("Subject: [PATCH] x \n\nwhy\n---\ndiff --git a/f b/f\n--- a/f\n+++ b/f\n"
                 "@@ -1,3 +1,3 @@\n * upstream \n \n-old \n+new \n")
    assert series.trailing_whitespace(f) == ["0001-x.patch:1", "0001-x.patch:9",
                                             "0001-x.patch:10", "0001-x.patch:11",
                                             "0001-x.patch:12"]


def test_cover_letter_maintainer_block_round_trip():
    from harness import series

    cover = "Subject: x\n\nbody\n\nsrpart developers (2):\n  a\n  b\n"
    assert series.cover_maintainers(cover) is None
    c2 = series.set_cover_maintainers(cover, ["A <a@x> (maintainer:SCSI)", "list@x (open list)"])
    assert series.cover_maintainers(c2) == ["A <a@x> (maintainer:SCSI)", "list@x (open list)"]
    assert c2.index(series.MAINTAINERS_HEAD) < c2.index("srpart developers (2):")
    c3 = series.set_cover_maintainers(c2, ["B <b@x>"])
    assert series.cover_maintainers(c3) == ["B <b@x>"] and c3.count(series.MAINTAINERS_HEAD) == 1


def test_every_series_has_the_same_patches_for_both_kernels():
    a = [p.name for p in source.series_files("6.1")]
    b = [p.name for p in source.series_files("6.12")]
    assert a == b
