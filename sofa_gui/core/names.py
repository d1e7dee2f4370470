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
    free = ctypes.CDLL(None).free
    free.argtypes = [ctypes.c_void_p]
    free(ptr)
