"""Short labels for slices: what fits inside a bar (the tooltip keeps the full name)."""

from __future__ import annotations

import re

from ..core.names import demangle, strip_brackets

_PY_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<func>.+)$")


def short_label(name: str, kernel: bool = False) -> str:
    """``void at::native::foo_kernel<float, 4>(...)`` -> ``foo_kernel``;
    ``torch/nn/module.py(1501): _call_impl`` -> ``_call_impl``; ``aten::conv2d`` ->
    ``conv2d``; others unchanged."""
    name = demangle(name)
    m = _PY_FRAME.match(name)
    if m:
        return m.group("func")
    if name.startswith("aten::") and len(name) > 6:
        return name[6:]  # every PyTorch op has it; the tooltip keeps the full name
    if not kernel and "::" not in name:
        return name
    text = name[5:] if name.startswith("void ") else name
    if "<" in text or "(" in text:
        stripped = strip_brackets(strip_brackets(text, "<", ">"), "(", ")").strip()
        text = stripped or text
    parts = [p for p in text.split("::") if p]
    if kernel and len(parts) > 2:
        text = parts[-1]
    return text.strip() or name


_QUALIFIER = re.compile(r"(?:\(anonymous namespace\)|[A-Za-z_]\w*)::")


def compact_name(name: str) -> str:
    """``name`` without what long C++ names share, for a column too narrow for it:
    ``void at::native::(anonymous namespace)::elementwise_kernel<128, at::native::Add>
    (int, ...)`` -> ``elementwise_kernel<128, Add>``. The return type, the trailing
    argument list and every namespace qualifier go; the template arguments, which tell
    instances of one kernel apart, stay."""
    text = demangle(name).strip()
    cpp = text.startswith("void ") or "::" in text
    if text.startswith("void "):
        text = text[5:]
    if cpp and text.endswith(")"):
        cut = _open_of_last_group(text)
        if cut > 0:
            text = text[:cut].rstrip()
    text = _QUALIFIER.sub("", text)
    return text or name


def _open_of_last_group(text: str) -> int:
    """Index of the ``(`` that matches the final ``)``, or -1."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1
