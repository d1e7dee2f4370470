"""The importer table: each importer declares its suffixes and answers in named tiers."""

from __future__ import annotations

from tracedata import DATA

from sofa_gui.core.importers import importers, pick_importer, trace_file_filter
from sofa_gui.core.importers.confidence import Confidence

KINETO = DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def test_every_importer_declares_suffixes_and_the_filter_is_made_of_them():
    flt = trace_file_filter()
    assert flt.startswith("Traces (") and flt.endswith(";;All files (*)")
    for imp in importers():
        assert isinstance(imp.suffixes, tuple)
        for suffix in imp.suffixes:
            assert f"*{suffix} " in flt or f"*{suffix})" in flt
    assert "*.json.gz" in flt and "*.sqlite" in flt and "*.xplane.pb" in flt


def test_sniffers_answer_with_a_named_tier(tmp_path):
    not_json = tmp_path / "notes.json"
    not_json.write_text("hello")
    for imp in importers():
        for path in (KINETO, not_json, tmp_path):
            assert isinstance(imp.can_open(path), Confidence), (imp.name, path)
    assert pick_importer(KINETO).can_open(KINETO) is Confidence.SIGNATURE


def test_tiers_are_ordered_as_their_meaning():
    order = [Confidence.NO, Confidence.NAME_ONLY, Confidence.CONTAINER, Confidence.OWN_SUFFIX,
             Confidence.OWN_NAMES, Confidence.CONTENT, Confidence.SIGNATURE, Confidence.DECLARED]
    assert order == sorted(order) and len(set(order)) == len(order)
