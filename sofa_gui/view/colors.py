"""Timeline colours: stable per name, distinct per category, readable text on top.

Names hash (crc32, so the same kernel has the same colour in every trace and
run) into a muted qualitative palette without reds; reds, greens and purples
of high saturation are reserved for communication and copy directions so they
never collide with a hashed name.  Slices drawn narrower than a couple of
pixels use their *category* colour instead, so a zoomed-out stream reads as
calm bands (kernel / copy / collective) rather than confetti.

The id arrays are computed with numpy only (no Qt), so they can be built in a
worker thread together with :class:`sofa_gui.view.lod.TimelineIndex`.
"""

from __future__ import annotations

import zlib
from functools import cache

import numpy as np

from ..core.kinds import is_sync_call
from ..core.trace import CopyKind, Kind

#: Qualitative palette for names (Tableau-20 family, reds removed).
NAME_COLORS = (
    "#4e79a7", "#a0cbe8", "#f28e2b", "#ffbe7d", "#59a14f", "#8cd17d", "#b6992d",
    "#f1ce63", "#499894", "#86bcb6", "#79706e", "#bab0ac", "#d37295", "#fabfd2",
    "#b07aa1", "#d4a6c8", "#9d7660", "#d7b5a6", "#6b8fb8", "#c9b458",
)
#: Category colours, least important first.  Slices narrower than a couple of pixels
#: show their category colour; a merged block shows its longest slice's category, and
#: a thin marker below it shows any more important category hidden inside (so a
#: sub-pixel copy, sync or collective stays visible among kernels when zoomed out).
#: Kinds are keyed by :class:`Kind`; the named entries are fixed colours that also
#: serve as the slice's own colour (their meaning matters more than a name).
CATEGORIES: dict = {
    Kind.OTHER: "#9e9e9e",
    Kind.RUNTIME: "#b0a18f",
    Kind.PYTHON: "#a3b18a",
    Kind.ANNOTATION: "#9c8fb3",
    Kind.CPU_OP: "#8e9aaf",
    Kind.NETWORK: "#7c9c9a",
    "memset": "#546e7a",
    Kind.KERNEL: "#5b7fa6",
    "memcpy_other": "#5d4037",
    "memcpy_d2d": "#ef6c00",
    "memcpy_p2p": "#6a1b9a",
    "memcpy_d2h": "#ad1457",
    "memcpy_h2d": "#2e7d32",
    "sync": "#37474f",
    "communication": "#c62828",
}
#: The fixed colours by name (a view of CATEGORIES).
RESERVED = {k: v for k, v in CATEGORIES.items() if isinstance(k, str)}

PALETTE: tuple[str, ...] = NAME_COLORS + tuple(CATEGORIES.values())
_IDS = {k: len(NAME_COLORS) + i for i, k in enumerate(CATEGORIES)}
_CATEGORY_ID = {k: i for k, i in _IDS.items() if not isinstance(k, str)}
_RESERVED_ID = {k: i for k, i in _IDS.items() if isinstance(k, str)}
#: Categories from here up (copies, syncs, collectives) get presence markers when they
#: are merged into a block of another category (see ``core.viewport.Markers``).
MARKER_FROM = _RESERVED_ID["memcpy_other"]
_COPY_KEY = {
    CopyKind.H2D: "memcpy_h2d", CopyKind.D2H: "memcpy_d2h", CopyKind.D2D: "memcpy_d2d",
    CopyKind.P2P: "memcpy_p2p", CopyKind.OTHER: "memcpy_other", CopyKind.NONE: "memcpy_other",
}


def name_color_id(name: str) -> int:
    """Stable palette index of a name (same in every run and trace)."""
    return zlib.crc32(name.encode("utf-8", "replace")) % len(NAME_COLORS)


def name_color(name: str) -> str:
    return PALETTE[name_color_id(name)]


def slice_color_ids(trace) -> tuple[np.ndarray, np.ndarray]:
    """``(own, category)`` palette indexes (uint8) for every slice of ``trace``."""
    sl = trace.slices
    by_name = np.fromiter((name_color_id(n) for n in trace.names), np.uint8, len(trace.names))
    own = by_name[sl.name] if len(sl) else np.zeros(0, np.uint8)
    kind_cat = np.array([_CATEGORY_ID.get(Kind(k), _CATEGORY_ID[Kind.OTHER])
                         for k in range(len(Kind))], np.uint8)
    cat = kind_cat[sl.kind.astype(np.int64)]
    fixed = _reserved_per_slice(sl)
    sync_names = np.fromiter((is_sync_call(n) for n in trace.names), bool, len(trace.names))
    if sync_names.any() and len(sl):  # blocking runtime calls stand out like GPU syncs
        fixed[(sl.kind == Kind.RUNTIME) & sync_names[sl.name]] = _RESERVED_ID["sync"]
    has = fixed < 255
    own = np.where(has, fixed, own).astype(np.uint8)
    cat = np.where(has, fixed, cat).astype(np.uint8)
    return own, cat


def _reserved_per_slice(sl) -> np.ndarray:
    out = np.full(len(sl), 255, np.uint8)
    kind = sl.kind
    out[kind == Kind.COMMUNICATION] = _RESERVED_ID["communication"]
    out[kind == Kind.MEMSET] = _RESERVED_ID["memset"]
    out[kind == Kind.SYNC] = _RESERVED_ID["sync"]
    memcpy = kind == Kind.MEMCPY
    if memcpy.any():
        copy_ids = np.array([_RESERVED_ID[_COPY_KEY.get(CopyKind(k), "memcpy_other")]
                             for k in range(len(CopyKind))], np.uint8)
        ck = np.clip(sl.copy_kind[memcpy].astype(np.int64), 0, len(CopyKind) - 1)
        out[memcpy] = copy_ids[ck]
    return out


def luminance(hex_color: str) -> float:
    """Relative luminance (WCAG) of ``#rrggbb``."""
    rgb = [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


@cache
def text_color(hex_color: str) -> str:
    """Black or white, whichever contrasts more with the fill (WCAG ratio)."""
    lum = luminance(hex_color)
    return "#000000" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "#ffffff"


def legend() -> list[tuple[str, str]]:
    """(label, colour) pairs of the fixed colours, for a legend or the docs."""
    labels = {
        "communication": "collective / NCCL", "memcpy_h2d": "copy host→device",
        "memcpy_d2h": "copy device→host", "memcpy_d2d": "copy device→device",
        "memcpy_p2p": "copy peer→peer", "memcpy_other": "copy (other)",
        "memset": "memset", "sync": "synchronize",
    }
    return [(labels[k], RESERVED[k]) for k in reversed(RESERVED)]
