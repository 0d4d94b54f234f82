"""Generated docs say which series they were made from, and are remade when it changes."""
from __future__ import annotations

import pytest

from harness import docstamp, paths


@pytest.mark.parametrize("doc", sorted(docstamp.DOCS))
def test_generated_doc_is_from_the_current_series(doc):
    why = docstamp.stale(paths.ROOT / doc)
    assert why is None, why


def test_a_changed_patch_makes_a_doc_stale(tmp_path, monkeypatch):
    (tmp_path / "patches" / "9.9").mkdir(parents=True)
    patch = tmp_path / "patches" / "9.9" / "0001-x.patch"
    patch.write_text("one\n")
    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    monkeypatch.setattr(paths, "PATCHES", tmp_path / "patches")
    doc = tmp_path / "docs" / "media.md"
    doc.write_text("# x\n" + docstamp.line(["9.9"]))
    assert docstamp.stale(doc) is None
    patch.write_text("two\n")
    assert "run `make media-report`" in docstamp.stale(doc)
    doc.write_text("# x\n")
    assert "does not say which series" in docstamp.stale(doc)
