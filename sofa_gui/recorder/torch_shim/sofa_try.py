"""``sofa-gui try``: apply a fix's settings inside the child, before the program uses them.

Loaded by ``sitecustomize`` when a ``SOFA_GUI_TRY_*`` variable is set; standard library
only until the framework is imported. Settings (each a variable ``SOFA_GUI_TRY_<NAME>``):

* ``LOADER_WORKERS=N``: a ``DataLoader`` asked for ``num_workers=0`` gets N workers, and
  the main process then keeps at most ``MAIN_THREADS=T`` intra-op threads;
  ``PERSISTENT_WORKERS=1``, ``PREFETCH_FACTOR=K`` and ``PIN_MEMORY=1`` change those
  arguments (prefetch and persistence only where the loader has workers).
* ``CUDNN_BENCHMARK=1``, ``TF32_MATMUL=1``, ``INTRA_OP_THREADS=N``, ``GC_FREEZE=1``:
  set once torch is imported.
* ``TFDATA_AUTOTUNE=1``: ``tf.data.Dataset.map`` defaults ``num_parallel_calls`` to
  ``tf.data.AUTOTUNE``.
* ``STEPS=W:S``: steps are counted as the batches the program takes from its DataLoaders
  (main process). After W warm-up steps, S steps are timed without the profiler, the next
  S are profiled (each a ``ProfilerStep#k`` span), then the program ends with exit code 0.
  The step times go to ``$SOFA_GUI_RECORDING/try-steps.json``.

What was applied is written to ``$SOFA_GUI_RECORDING/try-applied.json``, so a setting
that found nothing to change (no DataLoader) is visible.
"""

import gc
import json
import os
import sys
import time

PREFIX = "SOFA_GUI_TRY_"
STEPS_FILE = "try-steps.json"
APPLIED_FILE = "try-applied.json"


def settings():
    return {k[len(PREFIX):]: v for k, v in os.environ.items() if k.startswith(PREFIX)}


def _int(value, default=0):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class Trial:
    """The settings of this process and what applying them did."""

    def __init__(self, values, session):
        self.values = values
        self.session = session  # the profiler session of sitecustomize (or None)
        self.applied = {}
        self.loaders = 0
        self.times = []
        warm, _, steps = values.get("STEPS", "").partition(":")
        self.warmup, self.steps = _int(warm), _int(steps)
        self.step_span = None
        self.folder = os.environ.get("SOFA_GUI_RECORDING", "")

    # -- torch --------------------------------------------------------------------------
    def on_torch(self):
        import torch

        v = self.values
        if v.get("CUDNN_BENCHMARK") == "1":
            torch.backends.cudnn.benchmark = True
            self.note("torch.backends.cudnn.benchmark", True)
        if v.get("TF32_MATMUL") == "1":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            torch.set_float32_matmul_precision("high")
            self.note("torch.set_float32_matmul_precision", "high")
        if _int(v.get("INTRA_OP_THREADS")) > 0:
            torch.set_num_threads(_int(v["INTRA_OP_THREADS"]))
            self.note("torch.set_num_threads", torch.get_num_threads())
        if v.get("GC_FREEZE") == "1":
            gc.freeze()
            self.note("gc.freeze", "after import torch, again at the first batch")
        self._patch_loader(torch.utils.data.DataLoader)
        self._patch_next(torch.utils.data.dataloader._BaseDataLoaderIter)

    def _patch_loader(self, cls):
        v = self.values
        workers = _int(v.get("LOADER_WORKERS"))
        if not (workers or "PIN_MEMORY" in v or "PREFETCH_FACTOR" in v):
            return
        original = cls.__init__
        trial = self

        def __init__(self, *args, **kwargs):
            kwargs = trial.loader_kwargs(args, kwargs, workers)
            original(self, *args, **kwargs)

        cls.__init__ = __init__
        self.save()

    def loader_kwargs(self, args, kwargs, workers):
        """The program's DataLoader arguments with the fix's defaults changed."""
        v = self.values
        kwargs = dict(kwargs)
        if len(args) > 5:  # num_workers given by position: leave that loader alone
            return kwargs
        self.loaders += 1
        if workers and not kwargs.get("num_workers"):
            kwargs["num_workers"] = workers
            self.note("DataLoader.num_workers", workers)
            self._main_threads()
        has_workers = bool(kwargs.get("num_workers"))
        if has_workers and v.get("PERSISTENT_WORKERS") == "1":
            kwargs["persistent_workers"] = True
            self.note("DataLoader.persistent_workers", True)
        if has_workers and _int(v.get("PREFETCH_FACTOR")) > 0:
            kwargs["prefetch_factor"] = _int(v["PREFETCH_FACTOR"])
            self.note("DataLoader.prefetch_factor", kwargs["prefetch_factor"])
        if v.get("PIN_MEMORY") == "1":
            kwargs["pin_memory"] = True
            self.note("DataLoader.pin_memory", True)
        self.applied["loaders"] = self.loaders
        self.save()
        return kwargs

    def _main_threads(self):
        """The main process keeps the cores the new workers leave: fewer intra-op threads
        when it has more than ``MAIN_THREADS``, never more than it asked for."""
        import torch

        cap = _int(self.values.get("MAIN_THREADS"))
        if cap > 0 and torch.get_num_threads() > cap:
            torch.set_num_threads(cap)
            self.note("torch.set_num_threads", cap)

    def _patch_next(self, cls):
        original = cls.__next__
        trial = self

        def __next__(self):
            trial.on_step()
            return original(self)

        cls.__next__ = __next__

    # -- steps --------------------------------------------------------------------------
    def on_step(self):
        """A batch is asked for: one step boundary."""
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        if len(self.times) == 0 and self.values.get("GC_FREEZE") == "1":
            gc.freeze()
        self.times.append(time.perf_counter_ns())
        if not self.steps:
            return
        k = len(self.times) - 1  # the step starting now
        profiled_from = self.warmup + self.steps
        if k == profiled_from + self.steps:
            self.end()
        if k == profiled_from and self.session is not None:
            self.session.start()
        if self.session is not None and self.session.state == "running":
            self._next_span(k - profiled_from)

    def _next_span(self, index):
        from torch.profiler import record_function

        if self.step_span is not None:
            self.step_span.__exit__(None, None, None)
        self.step_span = record_function(f"ProfilerStep#{index}")
        self.step_span.__enter__()

    def end(self):
        """The measured steps are done: stop profiling and end the program."""
        if self.step_span is not None:
            self.step_span.__exit__(None, None, None)
            self.step_span = None
        if self.session is not None:
            self.session.finish("try steps done")
        self.save()
        sys.stdout.flush()
        raise SystemExit(0)

    # -- tensorflow ---------------------------------------------------------------------
    def on_tensorflow(self):
        if self.values.get("TFDATA_AUTOTUNE") != "1":
            return
        import tensorflow as tf

        cls = tf.data.Dataset
        original = cls.map
        trial = self

        def map(self, *args, **kwargs):  # noqa: A001 - the patched method's own name
            if len(args) < 2 and kwargs.get("num_parallel_calls") is None:
                kwargs["num_parallel_calls"] = tf.data.AUTOTUNE
                trial.note("tf.data.Dataset.map.num_parallel_calls", "AUTOTUNE")
            return original(self, *args, **kwargs)

        cls.map = map

    # -- record -------------------------------------------------------------------------
    def note(self, what, value):
        self.applied[what] = value

    def save(self):
        if not self.folder:
            return
        doc = {"settings": self.values, "applied": self.applied, "warmup": self.warmup,
               "steps": self.steps, "step_starts_ns": self.times}
        for name, body in ((APPLIED_FILE, {k: doc[k] for k in ("settings", "applied")}),
                           (STEPS_FILE, doc)):
            path = os.path.join(self.folder, name)
            tmp = path + ".tmp"
            try:
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump(body, f)
                os.replace(tmp, path)
            except OSError:
                pass
