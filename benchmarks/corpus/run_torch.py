"""Capture and measure the PyTorch cases of the diagnosis corpus.

    nice python benchmarks/corpus/run_torch.py [--only CASE ...] [--captures 2] [--rounds 3]

Per case: ``--captures`` real ``torch.profiler`` captures (CPU activity, input shapes
recorded, one ``ProfilerStep#N`` per step; each from a freshly built loop, after the
case's unprofiled warm-up steps unless the case captures its start-up) written to
``tests/data/corpus/<case>/capture-K.json.gz``; then the truth, measured without the
profiler (``benchmarks/corpus/common.py``), to ``truth.json`` beside them.  One intra-op
thread, so a step's work stays on one of the machine's cores.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from corpus import (  # noqa: E402,F401  (register the cases)
    torch_cases,
    torch_cases_apps,
    torch_cases_blind,
    torch_cases_calls,
    torch_cases_common,
    torch_cases_daily,
    torch_cases_deploy,
    torch_cases_examples,
    torch_cases_field,
    torch_cases_finetune,
    torch_cases_forum,
    torch_cases_generation,
    torch_cases_hobby,
    torch_cases_inference,
    torch_cases_loaders,
    torch_cases_models,
    torch_cases_more,
    torch_cases_more_daily,
    torch_cases_numeric,
    torch_cases_ordinary,
    torch_cases_papers,
    torch_cases_plain,
    torch_cases_practice,
    torch_cases_research,
    torch_cases_routine,
    torch_cases_services,
    torch_cases_serving,
    torch_cases_streams,
    torch_cases_tabular,
    torch_cases_tutorials,
    torch_cases_users,
    torch_cases_wild,
    torch_cases_workbench,
)
from corpus.common import Driver, cli, release, warmed  # noqa: E402


def export_gz(prof, dest: Path) -> int:
    """The profiler's chrome trace, gzip-compressed (no timestamp in the gzip header)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        prof.export_chrome_trace(str(raw))
        data = json.loads(raw.read_text())
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(json.dumps(data, separators=(",", ":")).encode())
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(buf.getvalue())
    return len(buf.getvalue())


def capture(c, dest: Path) -> int:
    """One profiled run of case ``c`` into ``dest``; returns the file's size."""
    step, first = warmed(c)
    sizes = []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=c.steps),
                 on_trace_ready=lambda p: sizes.append(export_gz(p, dest))) as prof:
        prof.step()  # the profiler's own warm-up step: nothing of the loop runs in it
        for i in range(first, first + c.steps):
            step(i)
            prof.step()
    release(step)
    return sizes[0] if sizes else 0


def capture_case(c, dest: Path) -> None:
    size = capture(c, dest)
    if size > 1_500_000:
        print(f"  {c.name}: {dest.name} is {size / 1e6:.2f} MB", file=sys.stderr)


DRIVER = Driver("run_torch.py", capture_case,
                {"torch": torch.__version__, "intra_op_threads": 1}, suffix=".json.gz")

if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(cli(DRIVER, __doc__))
