"""A trace merged into a recording keeps its shared rows.

Were ``recording.folder.merge_trace`` to copy only each slice's own args row, rows stored
once and referred to (XPlane metadata stats, interned strings) would point at unrelated
rows of the merged trace, and names cut in the string table would lose their full text.
"""

from __future__ import annotations

import attacks

from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.importers import load_trace
from sofa_gui.core.importers.recording.folder import merge_trace

SHIFT = 10 ** 12  # ns; the parts' own times do not overlap after it


def _args(trace, i: int) -> dict:
    return trace.args.get(int(trace.slices.args[i]))


def _merged(*traces):
    b = TraceBuilder("recording", "recording")
    b.add_slices([0], [5], [b.lane("host", "host", 0)], ["first"], args=[b'{"own": 1}'])
    for k, t in enumerate(traces):
        merge_trace(b, t, SHIFT * (k + 1), ("part", k))
    return b.finish()


def _by_start(trace):
    return {int(trace.slices.start[i]): i for i in range(len(trace.slices))}


def test_shared_args_rows_follow_a_merged_trace(tmp_path):
    meta = load_trace(attacks.xplane_shared_stats(tmp_path, 5000, 4), use_cache=False)
    ref = load_trace(attacks.xplane_shared_stats(tmp_path, 6000, 3, "ref"), use_cache=False)
    merged = _merged(meta, ref)
    where = _by_start(merged)
    for k, t in enumerate((meta, ref)):
        for i in range(len(t.slices)):
            j = where[int(t.slices.start[i]) + SHIFT * (k + 1)]
            assert _args(merged, j) == _args(t, i)  # the 5-6 kB value, resolved
            assert any(len(str(v)) >= 5000 for v in _args(merged, j).values())
    assert _args(merged, where[0]) == {"own": 1}


def test_a_cut_name_keeps_its_full_text_when_merged(tmp_path):
    huge = load_trace(attacks.huge_name(tmp_path, 50_000, 3), use_cache=False)
    full = {huge.full_name(i) for i in range(len(huge.slices))}
    assert max(map(len, full)) >= 50_000
    merged = _merged(huge)
    got = {merged.full_name(i) for i in range(len(merged.slices))}
    assert full <= got
    cut = [i for i in range(len(merged.slices)) if merged.name_is_cut(i)]
    assert cut and all(len(merged.name_of(i)) <= 4096 for i in cut)


def test_a_value_that_only_looks_like_a_reference_is_kept_as_is():
    """The merge re-points ``{SHARED: row}`` values; a one-key dict under that key whose
    value is not a row number is the event's own data (``ArgsStore.get`` leaves it alone)
    and must survive the merge unchanged, not turn into an empty text."""
    import json

    from sofa_gui.core.trace import SHARED

    b = TraceBuilder("part", "chrome")
    text = b.share_text("shared long text")
    lane = b.lane("host", "host", 0)
    look_alike = {"v": {SHARED: "not a row"}}
    rows = [json.dumps({"t": {SHARED: text}}).encode(), json.dumps(look_alike).encode()]
    b.add_slices([0, 10], [5, 5], [lane, lane], ["real", "fake"], args=rows)
    part = b.finish()
    assert _args(part, 0) == {"t": "shared long text"}
    assert _args(part, 1) == look_alike
    merged = _merged(part)
    where = _by_start(merged)
    assert _args(merged, where[SHIFT]) == {"t": "shared long text"}
    assert _args(merged, where[SHIFT + 10]) == look_alike
