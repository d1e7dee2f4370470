"""Search every slice name of the whole trace (not only what is on screen).

Matching runs over the interned name table (one test per distinct name), then a
lookup table maps the hits onto all slices, so a million slices cost one numpy
gather, whatever part of the timeline is visible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..core.trace import Trace


@dataclass(frozen=True)
class SearchQuery:
    text: str
    regex: bool = False
    case_sensitive: bool = False


def name_predicate(query: SearchQuery):
    """A ``str -> bool`` test for ``query``; ValueError for a bad regular expression."""
    if query.regex:
        try:
            pat = re.compile(query.text, 0 if query.case_sensitive else re.IGNORECASE)
        except re.error as exc:
            raise ValueError(f"bad regular expression: {exc}") from None
        return lambda name: pat.search(name) is not None
    if query.case_sensitive:
        needle = query.text
        return lambda name: needle in name
    needle = query.text.casefold()
    return lambda name: needle in name.casefold()


def find_matches(trace: Trace, query: SearchQuery) -> np.ndarray:
    """Indexes (in time order) of every slice whose name matches ``query``."""
    if not query.text:
        return np.zeros(0, np.int64)
    ids = trace.name_ids(name_predicate(query))
    if len(ids) == 0:
        return np.zeros(0, np.int64)
    hit = np.zeros(len(trace.names), bool)
    hit[ids] = True
    return np.flatnonzero(hit[trace.slices.name]).astype(np.int64)


def slice_at_span(trace: Trace, start_ns: int, end_ns: int, lanes=()) -> int:
    """The slice a link names by its span (a finding's evidence or cause instance): the
    one that starts and ends exactly there, on the first of ``lanes`` that has one (any
    lane when ``lanes`` is empty), outermost first; -1 when the span is no slice's (an
    evidence about a stretch of time)."""
    s = trace.slices
    hit = np.flatnonzero((s.start == int(start_ns)) & (s.end == int(end_ns)))
    if not len(hit):
        return -1
    for lane in lanes or (None,):
        on = hit if lane is None else hit[s.lane[hit] == int(lane)]
        if len(on):
            return int(on[np.argmin(s.depth[on])])
    return -1
