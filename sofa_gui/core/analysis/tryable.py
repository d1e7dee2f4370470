"""Fixes that ``sofa-gui try`` can apply to a program from outside, keyed by fix id.

A :class:`Tryable` says how its fix reaches the program without an edit to it:

* ``env``: environment variables set for the run (``TF_XLA_FLAGS``, ``XLA_FLAGS``, ...);
  a value starting with ``+`` is appended to what the user's environment already holds.
* ``shim``: a setting the recorder's start-up shim (``recorder/torch_shim``) applies
  once the framework is imported, before the program's own code uses it: a changed
  default of ``DataLoader``, a backend flag, a thread count, ``gc.freeze()``. The shim
  reads them from ``SOFA_GUI_TRY_<NAME>`` variables.
* ``code``: the fix needs a change to the program; ``change`` shows it and ``try``
  refuses to pretend.

``findings`` are the finding ids whose fixes it applies and ``keywords`` the words
that mark one of their fix texts as this fix (:func:`tryable_for`), so a finding's
card knows which of its fixes can be tried. The catalog is data: the shim only
applies the settings it knows by name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

ENV, SHIM, CODE = "env", "shim", "code"
#: Variable prefix of the shim's settings.
SHIM_PREFIX = "SOFA_GUI_TRY_"


@dataclass(frozen=True)
class Tryable:
    """One fix ``try`` knows; see the module docstring for ``how``."""

    id: str
    framework: str
    how: str
    summary: str
    findings: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    shim: dict[str, str] = field(default_factory=dict)
    change: str = ""

    @property
    def from_outside(self) -> bool:
        return self.how != CODE

    @property
    def planned(self) -> bool:
        """Its worker count and main threads come from the advisor's plan for the run."""
        return any("{workers}" in v or "{main_threads}" in v for v in self.shim.values())

    def settings(self, cores_free: int | None = None, plan: dict | None = None
                 ) -> dict[str, str]:
        """The shim settings with ``{workers}`` / ``{main_threads}`` from the advisor's
        ``plan`` (its fix's ``settings``: ``num_workers``, ``main_threads``), else from the
        free cores (:func:`loader_workers`); ``{threads}`` is the machine's cores."""
        workers, main = loader_workers(cores_free)
        if plan and int(plan.get("num_workers") or 0) > 0:
            workers = int(plan["num_workers"])
            main = max(1, int(plan.get("main_threads") or main))
        values = {"workers": str(workers), "main_threads": str(main),
                  "threads": str(max(1, os.cpu_count() or 1))}
        return {k: v.format(**values) for k, v in self.shim.items()}


def loader_workers(cores_free: int | None) -> tuple[int, int]:
    """(DataLoader workers, main-process threads) for the free cores when the advisor has
    no plan: one core stays with the training loop, and the main process keeps the cores
    the workers leave (at least one thread), so the two do not oversubscribe them."""
    free = (os.cpu_count() or 1) if cores_free is None else cores_free
    workers = max(1, int(free) - 1)
    return workers, max(1, int(free) - workers)


_PT, _TF, _JAX = "pytorch", "tensorflow", "jax"
_INPUT = ("input_pipeline_bound", "cpu_bound", "iteration_jitter")

TRYABLE: dict[str, Tryable] = {t.id: t for t in (
    Tryable("loader-workers", _PT, SHIM,
            "DataLoader(num_workers=N, persistent_workers=True) where the program asks for "
            "num_workers=0, and torch.set_num_threads(T) in the main process, N and T from "
            "the advisor's plan for the free cores",
            findings=_INPUT, keywords=("num_workers=N",),
            shim={"LOADER_WORKERS": "{workers}", "PERSISTENT_WORKERS": "1",
                  "MAIN_THREADS": "{main_threads}"}),
    Tryable("prefetch-factor", _PT, SHIM,
            "DataLoader(prefetch_factor=4) on loaders that have workers (and one worker "
            "where they have none, since prefetching needs one)",
            findings=_INPUT, keywords=("prefetch_factor",),
            shim={"PREFETCH_FACTOR": "4", "LOADER_WORKERS": "{workers}",
                  "MAIN_THREADS": "{main_threads}"}),
    Tryable("pin-memory", _PT, SHIM,
            "DataLoader(pin_memory=True): host-to-device copies from pinned memory",
            findings=("input_pipeline_bound", "host_device_copy_bound"),
            keywords=("pin_memory=True",), shim={"PIN_MEMORY": "1"}),
    Tryable("cudnn-benchmark", _PT, SHIM,
            "torch.backends.cudnn.benchmark = True (cuDNN picks the fastest convolution for "
            "fixed shapes)", findings=("compute_bound",), keywords=("cudnn.benchmark",),
            shim={"CUDNN_BENCHMARK": "1"}),
    Tryable("tf32-matmul", _PT, SHIM,
            "torch.backends.cuda.matmul.allow_tf32 = True and "
            "torch.set_float32_matmul_precision(\"high\") (TF32 tensor cores for float32)",
            findings=("compute_bound",), keywords=("tensor cores",),
            shim={"TF32_MATMUL": "1"}),
    Tryable("gc-freeze", _PT, SHIM,
            "gc.freeze() once torch is imported and again at the first batch, so the "
            "collector stops walking the long-lived objects",
            findings=("iteration_jitter",), keywords=("gc.freeze",),
            shim={"GC_FREEZE": "1"}),
    Tryable("intra-op-threads", _PT, SHIM,
            "torch.set_num_threads(N) with N the machine's cores",
            findings=("compute_bound", "cpu_bound", "cpu_contention"),
            keywords=("set_num_threads",), shim={"INTRA_OP_THREADS": "{threads}"}),
    Tryable("xla-auto-jit", _TF, ENV,
            "TF_XLA_FLAGS=--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit: XLA clusters and "
            "compiles the graph's ops", findings=("compute_bound", "launch_overhead_bound",
                                                   "op_overhead_bound"),
            keywords=("jit_compile=True",),
            env={"TF_XLA_FLAGS": "+--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"}),
    Tryable("tfdata-autotune", _TF, SHIM,
            "dataset.map(..., num_parallel_calls=tf.data.AUTOTUNE) where the program passes "
            "none (a changed default of tf.data.Dataset.map)",
            findings=("input_pipeline_bound", "cpu_bound"),
            keywords=("num_parallel_calls=tf.data.AUTOTUNE",),
            shim={"TFDATA_AUTOTUNE": "1"}),
    Tryable("tf-threads", _TF, ENV,
            "TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS bounded to the cores you own",
            findings=("cpu_contention",), keywords=("set_intra_op_parallelism_threads",),
            env={"TF_NUM_INTRAOP_THREADS": str(os.cpu_count() or 1),
                 "TF_NUM_INTEROP_THREADS": "1"}),
    Tryable("jax-single-thread-eigen", _JAX, ENV,
            "XLA_FLAGS=--xla_cpu_multi_thread_eigen=false (no oversubscribed Eigen pool on "
            "a shared host)", findings=("cpu_contention",),
            keywords=("xla_cpu_multi_thread_eigen",),
            env={"XLA_FLAGS": "+--xla_cpu_multi_thread_eigen=false"}),
    Tryable("jax-latency-hiding", _JAX, ENV,
            "XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true (collectives overlap "
            "compute)", findings=("communication_bound",), keywords=("shard_map",),
            env={"XLA_FLAGS": "+--xla_gpu_enable_latency_hiding_scheduler=true"}),
    Tryable("torch-compile", _PT, CODE,
            "compile the model so its ops fuse",
            findings=("launch_overhead_bound", "op_overhead_bound", "compute_bound"),
            keywords=("torch.compile(model)",),
            change="  model = build_model()\n+ model = torch.compile(model)"),
    Tryable("mixed-precision", _PT, CODE,
            "run the forward pass under autocast",
            findings=("compute_bound",), keywords=("torch.autocast",),
            change="+ with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16):\n"
                   "      loss = loss_fn(model(x), y)"),
    Tryable("vectorise-item-loop", _PT, CODE,
            "read one result for the whole batch instead of one .item() per element",
            findings=("host_reads_in_loop",), keywords=(".item()",),
            change="- correct = sum(int(p.item() > 0) for p in pred)\n"
                   "+ correct = int((pred > 0).sum().item())"),
    Tryable("tfdata-prefetch", _TF, CODE,
            "end the tf.data pipeline with prefetch",
            findings=("input_pipeline_bound",), keywords=(".prefetch(tf.data.AUTOTUNE)",),
            change="  ds = ds.map(parse).batch(64)\n+ ds = ds.prefetch(tf.data.AUTOTUNE)"),
)}


def get(fix_id: str) -> Tryable | None:
    return TRYABLE.get(fix_id)


def tryables_for(finding_id: str, fix) -> list[Tryable]:
    """The catalog entries that apply ``fix`` (a :class:`~.results.Fix` of ``finding_id``):
    the one whose id the fix carries, else those of the finding whose keyword its text
    names."""
    own = getattr(fix, "id", "")
    if own and own in TRYABLE:
        return [TRYABLE[own]]
    frameworks = fix.framework.split("/")  # a fix for "any" framework fits every one
    return [t for t in TRYABLE.values()
            if finding_id in t.findings and ("any" in frameworks or t.framework in frameworks
                                             or t.framework == "any")
            and any(k in fix.text for k in t.keywords)]


def env_for(tryable: Tryable, base: dict[str, str], cores_free: int | None = None,
            plan: dict | None = None) -> dict[str, str]:
    """The variables to set for the AFTER run (shim settings prefixed, ``+`` values
    appended to ``base``'s; ``plan`` as :meth:`Tryable.settings` takes it)."""
    out = {}
    for key, value in tryable.env.items():
        if value.startswith("+"):
            old = base.get(key, "")
            value = f"{old} {value[1:]}".strip()
        out[key] = value
    for key, value in tryable.settings(cores_free, plan).items():
        out[SHIM_PREFIX + key] = value
    return out


def catalog_lines() -> list[str]:
    """One line per fix: id, framework, how it is applied."""
    width = max(len(k) for k in TRYABLE)
    how = {ENV: "environment", SHIM: "start-up shim", CODE: "needs a code change"}
    return [f"  {t.id:<{width}}  {t.framework:<10} {how[t.how]:<19} {t.summary}"
            for t in TRYABLE.values()]
