"""What one read of a whole result costs per value, by framework, dtype, shape and the
Python that consumes the values: the measurements behind ``BULK_NS_PER_VALUE`` in
``sofa_gui/core/analysis/findings/read_rules.py``.

    python benchmarks/corpus/bulk_read.py                   # PyTorch: .tolist()
    $JAX_VENV/bin/python benchmarks/corpus/bulk_read.py --jax    # np.asarray(x).tolist()
    $TF_VENV/bin/python benchmarks/corpus/bulk_read.py --tf      # x.numpy().tolist()

(on an idle machine, one thread).  Printed per shape and dtype: the read's median time
and ns per value, then the ns per value a consumer adds: a Python ``max`` per row, a count
of the positive values, each value formatted as text.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

SHAPES = [(16, 4), (32,), (128, 12), (1536, 1), (512, 8), (4096,), (64, 64)]
DTYPES = ("float32", "int64", "bool")


def torch_reader():
    import torch

    torch.set_num_threads(1)

    def make(shape, dtype):
        return (torch.randn(*shape) * 3).to(getattr(torch, dtype))
    return make, lambda x: x.tolist()


def jax_reader():
    import jax
    import jax.numpy as jnp

    def make(shape, dtype):
        x = jax.random.normal(jax.random.PRNGKey(0), shape) * 3
        return x.astype(getattr(jnp, "bool_" if dtype == "bool" else dtype)).block_until_ready()
    return make, lambda x: np.asarray(x).tolist()


def tf_reader():
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)

    def make(shape, dtype):
        return tf.cast(tf.random.normal(shape) * 3, getattr(tf, dtype))
    return make, lambda x: x.numpy().tolist()


def flat(values: list) -> list:
    return [y for row in values for y in row] if values and isinstance(values[0], list) \
        else values


CONSUMERS = {
    "row max": lambda v: [max(r) for r in v] if isinstance(v[0], list) else max(v),
    "count": lambda v: sum(1 for y in flat(v) if y > 0),
    "format": lambda v: " ".join(f"{y:.4f}" for y in flat(v)),
}


def median_s(fn, n: int = 300) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(n):
        a = time.perf_counter()
        fn()
        times.append(time.perf_counter() - a)
    return statistics.median(times)


def _cell(x, dtype: str, n: int, read) -> str:
    """One dtype's read time and ns per value, and what each consumer adds per value."""
    base = median_s(lambda: read(x))
    more = []
    for name, use in CONSUMERS.items():
        if dtype != "bool" or name != "format":
            took = median_s(lambda use=use: use(read(x)))
            more.append(f"{name} +{(took - base) / n * 1e9:.0f}")
    return f"{dtype}: {base * 1e6:.1f} µs {base / n * 1e9:.0f} ns/value, " + ", ".join(more)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jax", action="store_true")
    ap.add_argument("--tf", action="store_true")
    args = ap.parse_args(argv)
    make, read = jax_reader() if args.jax else tf_reader() if args.tf else torch_reader()
    for shape in SHAPES:
        n = int(np.prod(shape))
        cells = [_cell(make(shape, dtype), dtype, n, read) for dtype in DTYPES]
        print(f"{str(shape):<10} {n:>5} values | " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
