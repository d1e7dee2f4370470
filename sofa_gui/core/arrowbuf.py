"""numpy <-> Arrow by buffer, without pyarrow's pandas shim.

``pa.array``, ``pa.table`` and ``Array.to_numpy`` ask pyarrow's lazy pandas
shim whether the value is a pandas object, which imports pandas (about half a
second) the first time. Traces never hold pandas objects, so the cache and the
importers go through these helpers instead: a numeric column becomes an Arrow
array over the same memory and back, and strings are packed into an offsets
plus data buffer directly.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_TO_ARROW = {np.dtype(t): pa.from_numpy_dtype(t) for t in
             (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, np.float32, np.float64)}
_TO_NUMPY = {str(v): k for k, v in _TO_ARROW.items()}


def from_numpy(values) -> pa.Array:
    """A numeric numpy array as an Arrow array sharing its memory (bools become int8)."""
    a = np.ascontiguousarray(values)
    if a.dtype == np.bool_:
        a = a.view(np.int8)
    typ = _TO_ARROW.get(a.dtype)
    if typ is None:
        raise TypeError(f"no Arrow type for numpy dtype {a.dtype}")
    return pa.Array.from_buffers(typ, len(a), [None, pa.py_buffer(a)])


def to_numpy(column) -> np.ndarray:
    """A numeric Arrow array or one-chunk column as a read-only numpy view (copy if chunked)."""
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 1:
            column = column.chunk(0)
        else:
            parts = [to_numpy(c) for c in column.chunks]
            dtype = _TO_NUMPY[str(column.type)]
            return np.concatenate(parts) if parts else np.zeros(0, dtype)
    dtype = _TO_NUMPY.get(str(column.type))
    if dtype is None or column.null_count:
        raise TypeError(f"not a plain numeric column: {column.type}")
    data = column.buffers()[1]
    if data is None or not len(column):
        return np.zeros(0, dtype)
    return np.frombuffer(data, dtype, len(column), column.offset * dtype.itemsize)


def strings(values: list[str], large: bool = False) -> pa.Array:
    """A list of ``str`` as an Arrow (large) string array."""
    encoded = [s.encode("utf-8") for s in values]
    offsets = np.zeros(len(encoded) + 1, np.int64 if large else np.int32)
    if encoded:
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
    typ = pa.large_string() if large else pa.string()
    return pa.Array.from_buffers(typ, len(encoded),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def table(columns: dict) -> pa.Table:
    """A table from numpy arrays and Arrow arrays (numpy ones wrapped by :func:`from_numpy`)."""
    arrays = [v if isinstance(v, (pa.Array, pa.ChunkedArray)) else from_numpy(v)
              for v in columns.values()]
    return pa.Table.from_arrays(arrays, names=list(columns))
