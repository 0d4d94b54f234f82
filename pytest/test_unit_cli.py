"""What the CLI says to a new user's mistakes, and the one exit-code wrapper (no VM)."""
from __future__ import annotations

import pytest

from harness import cli, entry, images
from harness.console import GuestError
from harness.errors import SrpartError


def _img(tmp_path, size, at=None):
    data = bytearray(size)
    if at:
        off, magic = at
        data[off:off + len(magic)] = magic
    p = tmp_path / "x.img"
    p.write_bytes(bytes(data))
    return p


def test_boot_without_a_cd_is_one_line(capsys):
    assert cli.main(["boot", "--kernel", "6.1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no --cd" in err


@pytest.mark.parametrize("size", [0, 1221, 2047])
def test_less_than_one_block_is_refused(tmp_path, size):
    with pytest.raises(SrpartError, match=f"is {size} bytes, less than one 2048-byte"):
        images.check_cd_image(_img(tmp_path, size))


def test_not_a_file_and_missing_are_refused(tmp_path):
    with pytest.raises(SrpartError, match="not a regular file"):
        images.check_cd_image(tmp_path)
    with pytest.raises(SrpartError, match="image not found"):
        images.check_cd_image(tmp_path / "nope.iso")


def test_a_partial_last_block_and_no_layout_are_warnings(tmp_path):
    w = images.check_cd_image(_img(tmp_path, 4097))
    assert len(w) == 2
    assert "4097 bytes, not a whole number" in w[0] and "reads 2 blocks, the last 1 bytes" in w[0]
    assert "no ISO 9660 volume" in w[1]


@pytest.mark.parametrize("what, at", [(s[0], s[1:]) for s in images.SIGNATURES])
def test_a_known_signature_is_no_warning(tmp_path, what, at):
    assert images.check_cd_image(_img(tmp_path, 36864, at)) == []
    assert images.signatures(_img(tmp_path, 36864, at).read_bytes()) == [what]


@pytest.mark.parametrize("exc, code, first", [
    (SrpartError("bad input"), 2, "srpart: error: bad input"),
    (GuestError("kernel printed a bad pattern (WARNING)"), 3, "srpart: guest failed: kernel"),
    (KeyboardInterrupt(), 130, None)])
def test_every_entry_point_ends_the_same_way(capsys, exc, code, first):
    def main():
        raise exc
    assert entry.call(main) == code
    err = capsys.readouterr().err
    assert (err.startswith(first) and "Traceback" not in err) if first else err == ""


def test_the_report_and_run_modules_use_the_wrapper():
    """Seen failing before this change: media_report, abi_report, fuzz_run, series and
    stress_run had their own try/except (exit 1 or 2), bench none (a traceback)."""
    from pathlib import Path
    for f in sorted(Path(entry.__file__).parent.glob("*.py")):
        text = f.read_text()
        if f.name == "entry.py":
            continue
        if '__name__ == "__main__"' in text:
            assert "entry.run(main)" in text, f.name
            assert "except SrpartError as e:\n        print(" not in text, f.name
