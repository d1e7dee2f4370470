"""One colour per breakdown category, shared by the HTML report and the GUI.

Busy categories get saturated colours; idle causes get light tints of the
colour of what they wait for (input: amber like data loading, copy call: orange
like H2D copies, sync: red like host sync, launch: light blue like runtime,
host-bound: light violet), so idle reads as "not working".
"""

from __future__ import annotations

CATEGORY_COLORS: dict[str, str] = {
    # device
    "compute": "#4C72B0",
    "communication": "#8172B2",
    "memcpy_h2d": "#DD8452",
    "memcpy_d2h": "#C44E52",
    "memcpy_d2d": "#937860",
    "memcpy_p2p": "#DA8BC3",
    "memcpy_other": "#8C8C8C",
    "memset": "#CCB974",
    "idle_input": "#F5D08A",
    "idle_copy": "#F3C6A5",
    "idle_sync": "#F2AAAA",
    "idle_launch": "#A9D2EA",
    "idle_host": "#CDBFE3",
    "idle_other": "#DDDDDD",
    # host
    "data_loading": "#E8A33D",
    "forward": "#4C72B0",
    "backward": "#55A868",
    "optimizer": "#8172B2",
    "memcpy": "#DD8452",
    "runtime": "#64B5CD",
    "sync": "#C44E52",
    "python": "#CCB974",
    "other": "#DDDDDD",
}


def _bare(category: str) -> str:
    """A host category without its ``host_`` prefix (both kinds share colours and names)."""
    return category.removeprefix("host_")


def color_of(category: str) -> str:
    """Hex colour of a category (host ones may carry a ``host_`` prefix)."""
    return CATEGORY_COLORS.get(_bare(category), "#999999")


CATEGORY_LABELS: dict[str, str] = {
    "compute": "Compute kernels",
    "communication": "Communication (exposed)",
    "memcpy_h2d": "Memcpy H2D",
    "memcpy_d2h": "Memcpy D2H",
    "memcpy_d2d": "Memcpy D2D",
    "memcpy_p2p": "Memcpy P2P",
    "memcpy_other": "Memcpy (other)",
    "memset": "Memset",
    "idle_input": "Idle: waiting for input",
    "idle_copy": "Idle: host staging a copy",
    "idle_sync": "Idle: synchronisation",
    "idle_launch": "Idle: launch gaps",
    "idle_host": "Idle: host-side overhead",
    "idle_other": "Idle: other",
    "data_loading": "Data loading",
    "forward": "Forward",
    "backward": "Backward",
    "optimizer": "Optimizer",
    "memcpy": "Copy API calls",
    "runtime": "Runtime / launch API",
    "sync": "Synchronisation",
    "python": "Python",
    "other": "Other",
}


def label_of(category: str) -> str:
    """The name a category has in the app, the reports and the terminal."""
    key = _bare(category)
    return CATEGORY_LABELS.get(key, key.replace("_", " ").capitalize())
