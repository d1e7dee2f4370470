"""Text helpers for event names, shared by the analyses and the views."""

from __future__ import annotations

import ctypes
import functools


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


@functools.lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """Readable C++ name for display (``_ZN3foo3barEv`` -> ``foo::bar()``) through the C++
    runtime's own ``__cxa_demangle``; the name unchanged when it is not an Itanium-mangled
    symbol or no C++ runtime is at hand (e.g. Windows). Keep the raw name for details."""
    if not name.startswith("_Z") or len(name) > 65536:
        return name
    fn = _cxa_demangle()
    if fn is None:
        return name
    status = ctypes.c_int()
    ptr = fn(name.encode("ascii", "replace"), None, None, ctypes.byref(status))
    if not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace") if status.value == 0 else name
    finally:
        _libc_free(ptr)


@functools.cache
def _cxa_demangle():
    for lib in ("libstdc++.so.6", "libc++abi.dylib", "libc++.1.dylib", "libstdc++.6.dylib"):
        try:
            fn = ctypes.CDLL(lib).__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.POINTER(ctypes.c_int)]
        return fn
    return None


def _libc_free(ptr: int) -> None:
    _free()(ptr)


@functools.cache
def _free():
    free = ctypes.CDLL(None).free
    free.argtypes = [ctypes.c_void_p]
    return free


# Untrusted text (trace names, paths) must not steer a terminal or a document: C0/C1
# control characters (ESC sequences, CSI U+009B, carriage return), Unicode line
# separators and bidi overrides are shown as visible escapes instead.
_INVISIBLE = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
              if c not in (0x09, 0x0A)}
_INVISIBLE.update({c: f"\\u{c:04x}" for c in (
    0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})
_ONE_LINE = {**_INVISIBLE, 0x0A: "\\x0a"}


def visible(text: str, one_line: bool = False) -> str:
    """``text`` with control, line-separator and bidi characters as ``\\xNN``/``\\uNNNN``
    (``\\n`` too when ``one_line``); undecodable file-name bytes as ``\\udcNN``."""
    text = str(text).translate(_ONE_LINE if one_line else _INVISIBLE)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
