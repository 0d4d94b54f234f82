"""harness/dkms.py's host-side logic (issue 28), without building anything."""
from __future__ import annotations

import pytest

from harness import dkms
from harness.errors import SrpartError


def test_the_package_version_is_the_series():
    """[PATCH v5 00/16] -> 5.0: the package says which series it carries."""
    cover = (dkms.paths.PATCHES / "6.1" / "0000-cover-letter.patch").read_text()
    n = cover.split("[PATCH v", 1)[1].split(" ", 1)[0]
    assert dkms.series_version() == f"{n}.0"


def test_the_stock_adaptation_replaces_exactly_the_unit_decision():
    src = (dkms.paths.SRC / "linux-source-6.1").exists()
    if not src:
        pytest.skip("no extracted 6.1 tree (make kernels)")
    from harness import source
    tree = dkms.paths.SRC / "linux-source-6.1"
    text = dkms._git_show(tree, source.apply_series(source.extract("6.1"), "6.1"),
                          "drivers/scsi/sr.c")
    out = dkms.stock_sr(text, "6.1")
    assert out.count("#ifdef SRPART_STOCK_BLOCK") == 1
    assert out.replace(dkms.STOCK_NEW, dkms.STOCK_OLD) == text
    assert dkms.STOCK_LINE in out


def test_a_sr_c_without_the_decision_is_refused_in_one_line():
    with pytest.raises(SrpartError, match="no GD_512_TABLES decision"):
        dkms.stock_sr("static int sr_probe(void) { return 0; }\n", "6.1")


def test_the_newest_abi_is_chosen_numerically(monkeypatch):
    class R:
        stdout = ("linux-image-6.1.0-9-amd64 linux-image-6.1.0-57-amd64 linux-image-6.1.0-10-amd64 "
                  "linux-image-6.12.99+deb12-amd64 linux-image-6.12.118+deb12-amd64 "
                  "linux-image-6.12.118+deb12-amd64-unsigned linux-image-6.1.0-57-rt-amd64")
    monkeypatch.setattr(dkms.subprocess, "run", lambda *a, **k: R)
    assert dkms.newest_abis() == {"6.1": "6.1.0-57-amd64", "6.12": "6.12.118+deb12-amd64"}
