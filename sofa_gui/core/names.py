"""Text helpers for event names, shared by the analyses and the views."""

from __future__ import annotations


def strip_brackets(text: str, open_: str, close: str) -> str:
    """Remove balanced ``open_ ... close`` groups, nested ones included
    (C++ template arguments, parameter lists)."""
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            depth += 1
        elif ch == close and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)
