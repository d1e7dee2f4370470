"""The typed events msgspec decodes a piece of ``traceEvents`` into, and a decoded piece.

:class:`Event` holds only the fields the importer reads (``args`` stays raw JSON);
:class:`KnownEvent` / :class:`Layout` let msgspec check the usual phases and categories
while decoding, so the common file needs no per-event checks in Python. The decoders are
tried in the order of :data:`DECODERS`, the strictest first.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from functools import reduce
from typing import Any, Literal, get_args

import msgspec


class Event(msgspec.Struct, gc=False):
    """The fields of one trace event the importer reads; the rest are skipped."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | None = None
    dur: float | None = None
    id: int | str | None = None
    bp: str = ""
    s: str = ""
    args: msgspec.Raw = msgspec.Raw(b"")
    bind_id: int | str | None = None
    flow_in: bool = False
    flow_out: bool = False


# Known phases and Kineto categories decode to the one interned str object each,
# which makes the per-event hashing and joining downstream cheaper; a piece with
# any other value is decoded again with plain ``str`` fields (:class:`Event`).
_PHASES = Literal["X", "B", "E", "i", "I", "C", "M", "s", "t", "f", "b", "n", "e", "P", "N",
                  "O", "D", "V", "v", "R", "c", "(", ")", "S", "T", "p", "F"]
_CATEGORIES = Literal[
    "", "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset",
    "kernel", "cuda_runtime", "cuda_driver", "cuda_sync", "python_function", "overhead",
    "ac2g", "fwdbwd", "async_cpu_to_gpu", "Trace", "cpu_instant_event", "external_correlation",
    "cuda_profiler_range", "mtia_runtime", "mtia_ccp_events", "xpu_runtime", "xpu_driver",
    "hpu_op", "collective_comm", "privateuse1_runtime", "privateuse1_driver", "glow_runtime",
    "Operator", "Runtime", "Kernel", "Memcpy", "Memset", "async", "Python", "python"]


class KnownEvent(msgspec.Struct, gc=False):
    """:class:`Event` with known phases and categories as literals."""

    ph: _PHASES = "X"
    name: str = ""
    cat: _CATEGORIES = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | None = None
    dur: float | None = None
    id: int | str | None = None
    bp: str = ""
    s: str = ""
    args: msgspec.Raw = msgspec.Raw(b"")
    bind_id: int | str | None = None
    flow_in: bool = False
    flow_out: bool = False


class Layout:
    """A tagged union of event structs, one class per phase (msgspec picks it by ``ph``).

    X events and flow events (s/t/f) get classes with only the fields they use,
    so they decode faster and the reader handles each group with no per-event
    branching; other phases get every :class:`Event` field. Each class has a
    class attribute ``ph``. Used when events start with their ``ph`` key
    (Kineto writes it first), where msgspec finds the class without looking ahead.
    """

    def __init__(self, cat_type):
        base = msgspec.defstruct("TaggedEvent", [], gc=False, tag_field="ph")
        common = [("cat", cat_type, ""), ("pid", int | str, 0), ("tid", int | str, 0),
                  ("ts", float | None, None)]
        x_fields = [("name", str, ""), *common, ("dur", float | None, None),
                    ("args", msgspec.Raw, msgspec.Raw(b"")), ("bind_id", int | str | None, None),
                    ("flow_in", bool, False), ("flow_out", bool, False)]
        flow_fields = [*common, ("id", int | str | None, None), ("bp", str, "")]
        all_fields = [(f.name, cat_type if f.name == "cat" else f.type, f.default)
                      for f in _EVENT_FIELDS if f.name != "ph"]

        def make(ph: str, fields: list) -> type:
            return msgspec.defstruct(f"Event{ord(ph)}", fields, bases=(base,), tag=ph,
                                     gc=False, namespace={"ph": ph})

        self.x = make("X", x_fields)
        self.flows = {make(ph, flow_fields): ord(ph) for ph in "stf"}
        others = [make(ph, all_fields) for ph in _PHASE_LIST if ph not in "Xstf"]
        classes = (self.x, *self.flows, *others)
        self.phase = {c: ord(c.ph) for c in classes}  # class -> ASCII code of its phase
        self.decoder = msgspec.json.Decoder(list[reduce(operator.or_, classes)])


_PHASE_LIST = get_args(_PHASES)
_EVENT_FIELDS = msgspec.structs.fields(Event)
_DECODE_KNOWN = msgspec.json.Decoder(list[KnownEvent])
_DECODE_EVENTS = msgspec.json.Decoder(list[Event])
TAGGED_KNOWN = Layout(_CATEGORIES)
TAGGED = Layout(str)
# most specific first; a stream starts at the first that fits its first piece and only
# moves down the list when a piece fails to decode with the current one
DECODERS = ((TAGGED_KNOWN.decoder, TAGGED_KNOWN), (TAGGED.decoder, TAGGED),
             (_DECODE_KNOWN, None), (_DECODE_EVENTS, None))
PH_FIRST = re.compile(rb'\[\s*\{\s*"ph"\s*:')
DECODE_EVENT = msgspec.json.Decoder(Event)
DECODE_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_DECODE_TS = None  # built lazily: see exact_ts_strings


class _TsOnly(msgspec.Struct, gc=False):
    ts: Any = None


def exact_ts_strings(piece: bytes) -> list:
    """The ``ts`` of each event in a decoded piece as written (str for floats).

    Used when float64 cannot hold ``ts * 1000`` exactly (sub-µs epoch stamps).
    """
    global _DECODE_TS
    if _DECODE_TS is None:
        _DECODE_TS = msgspec.json.Decoder(list[_TsOnly], float_hook=str)
    return [e.ts for e in _DECODE_TS.decode(piece)]


class Piece:
    """One decoded slice of the events array."""

    __slots__ = ("events", "skipped", "text", "layout", "span")

    def __init__(self, events: list, skipped: Counter, text: bytes | None,
                 layout: Layout | None = None, span: tuple | None = None):
        self.events = events  # Event or KnownEvent structs, or a Layout's classes
        self.skipped = skipped  # array items that are not usable events
        self.text = text  # the JSON array text (fast path only), for exact_ts_strings
        self.layout = layout  # the tagged union the events were decoded with, if any
        #: (lo, hi, items, tag): ``text`` is ``[`` + the file's bytes [lo, hi) + ``]``,
        #: decodes to ``items`` events and has fingerprint ``tag`` (source_args.piece_tag),
        #: so an event's args can be read again from the file later; None when that does
        #: not hold (gzip, lenient pieces)
        self.span = span
