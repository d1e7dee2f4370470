"""Real CPU ``torch.profiler`` captures of irregular training loops, for the iteration tests.

Each loop below is a small but ordinary training (or inference) script, run
under ``torch.profiler`` with a schedule so that every step gets its
``ProfilerStep#N`` annotation. The true step windows are read from those
annotations, written with what the loop did (micro-batches, periodic extras,
warm-up steps) to ``NAME.truth.json``; then the annotations are removed and the
trace is written as ``NAME.json.gz``. The detector must find the steps without
them.

    nice -n -15 python benchmarks/gen_torch_loops.py [--out tests/data/torch-loops] [--only NAME]

(one intra-op thread, and a high priority on a shared machine, so that other
processes' load does not swamp the small steps with scheduling noise).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, TensorDataset

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "torch-loops"
LOOPS = {}


def loop(name: str, steps: int):
    """Register ``fn(step, n) -> facts``: set up, call ``step()``, then run ``n`` steps,
    each ending with ``step()``."""
    def deco(fn):
        LOOPS[name] = (fn, steps)
        return fn
    return deco


D_IN, WIDTH, BATCH = 256, 1024, 64  # a few ms of real work per step: noise stays small


def mlp(width: int = WIDTH) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(D_IN, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, 1))


def loader(batches: int, batch: int = BATCH) -> DataLoader:
    x, y = torch.randn(batches * batch, D_IN), torch.randn(batches * batch, 1)
    return DataLoader(TensorDataset(x, y), batch_size=batch)


def train_step(model, opt, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def evaluate(model, val):
    """Forward passes without backward over the validation batches."""
    model.eval()
    with torch.no_grad():
        for vx, vy in val:
            torch.nn.functional.mse_loss(model(vx), vy)
    model.train()


@loop("grad_accum", 8)
def grad_accum(step, n):
    """4 micro-batches (fetch, forward, backward) per optimizer step."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    it = iter(loader(4 * n))
    step()
    for _ in range(n):
        for _ in range(4):
            x, y = next(it)
            (torch.nn.functional.mse_loss(model(x), y) / 4).backward()
        opt.step()
        opt.zero_grad()
        step()
    return {"micro_batches": 4}


@loop("periodic_eval", 16)
def periodic_eval(step, n):
    """Every 4th step (index 3, 7, ...) ends with 2 evaluation forward passes."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    it, val = iter(loader(n)), loader(2)
    step()
    for i in range(n):
        x, y = next(it)
        train_step(model, opt, x, y)
        if i % 4 == 3:
            evaluate(model, val)
        step()
    return {"micro_batches": 1, "extras": {"every": 4, "phase": 3, "kind": "evaluation"}}


@loop("item_loop", 12)
def item_loop(step, n):
    """A per-sample Python loop inside the step: 512 ``.item()`` calls per step."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step()
    for _ in range(n):
        x, y = torch.randn(512, D_IN), torch.randn(512, 1)
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        hits = 0
        det = out.detach()
        for k in range(512):
            hits += det[k, 0].item() > 0
        step()
    return {"micro_batches": 1}


@loop("rnn_unrolled", 16)
def rnn_unrolled(step, n):
    """An RNN cell unrolled in Python over 8..64 time steps per batch."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(8, 65, (n,), generator=g).tolist()
    cell, head = torch.nn.RNNCell(8, 16), torch.nn.Linear(16, 1)
    opt = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.01)
    step()
    for t_len in lengths:
        seq, y = torch.randn(t_len, 4, 8), torch.randn(4, 1)
        h = torch.zeros(4, 16)
        for t in range(t_len):
            h = cell(seq[t], h)
        torch.nn.functional.mse_loss(head(h), y).backward()
        opt.step()
        opt.zero_grad()
        step()
    return {"micro_batches": 1, "lengths": lengths}


@loop("warmup_steps", 12)
def warmup_steps(step, n):
    """The first 3 steps also try layouts and trace the model (extra warm-up work)."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    it = iter(loader(n))
    step()
    for i in range(n):
        x, y = next(it)
        if i < 3:
            for width in (256, 512, 1024, 2048):  # "layout trials"
                trial = mlp(width)
                for _ in range(3):
                    trial(x).sum()
            torch.jit.trace(model, x)
        train_step(model, opt, x, y)
        step()
    return {"micro_batches": 1, "warmup": 3}


@loop("checkpoint", 15)
def checkpoint(step, n):
    """``torch.save`` of model and optimizer state after every 5th step (index 4, 9, 14)."""
    model = torch.nn.Sequential(mlp(2048), torch.nn.Linear(1, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with tempfile.TemporaryDirectory() as tmp:
        step()
        for i in range(n):
            x, y = torch.randn(BATCH, D_IN), torch.randn(BATCH, 1)
            train_step(model, opt, x, y)
            if i % 5 == 4:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                           Path(tmp) / f"ckpt{i}.pt")
            step()
    return {"micro_batches": 1, "extras": {"every": 5, "phase": 4, "kind": "checkpoint"}}


@loop("epoch_validation", 12)
def epoch_validation(step, n):
    """2 epochs of 6 steps; after each epoch's last step a 3-batch validation loop."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train, val = loader(6), loader(3)
    step()
    for _epoch in range(n // 6):
        for i, (x, y) in enumerate(train):
            train_step(model, opt, x, y)
            if i == 5:
                evaluate(model, val)
            step()
    return {"micro_batches": 1, "extras": {"every": 6, "phase": 5, "kind": "evaluation"}}


@loop("inference_dynamic", 12)
def inference_dynamic(step, n):
    """Inference (no backward, no optimizer) with a different batch size every step."""
    model = mlp().eval()
    sizes = [1, 7, 32, 3, 64, 16, 5, 48, 2, 24, 9, 40][:n]
    step()
    with torch.inference_mode():
        for b in sizes:
            x = torch.randn(b, D_IN)
            model(x).softmax(0).argmax()
            step()
    return {"micro_batches": None, "batch_sizes": sizes}


@loop("compile_warmup", 10)
def compile_warmup(step, n):
    """``torch.compile`` (eager backend: tracing and graph capture, no C++ build) warm-up."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    fwd = torch.compile(model, backend="eager", dynamic=False)
    step()
    for _ in range(n):
        x, y = torch.randn(BATCH, D_IN), torch.randn(BATCH, 1)
        torch.nn.functional.mse_loss(fwd(x), y).backward()
        opt.step()
        opt.zero_grad()
        step()
    return {"micro_batches": 1, "warmup": 1}


@loop("compile_recompile", 6)
def compile_recompile(step, n):
    """``torch.compile(dynamic=False)`` (eager backend) trained on a new batch size every
    step: each new shape fails the compiled frame's guards and compiles it again."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    fwd = torch.compile(model, backend="eager", dynamic=False)
    sizes = [48, 24, 40, 16, 56, 32][:n]
    step()
    for b in sizes:
        x, y = torch.randn(b, D_IN), torch.randn(b, 1)
        torch.nn.functional.mse_loss(fwd(x), y).backward()
        opt.step()
        opt.zero_grad()
        step()
    return {"micro_batches": 1, "batch_sizes": sizes}


def capture(name: str) -> tuple[dict, dict]:
    """Run loop ``name`` under the profiler; (trace dict, truth dict)."""
    fn, n = LOOPS[name]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    got = {}
    sched = schedule(wait=0, warmup=1, active=n)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched,
                 on_trace_ready=lambda p: got.setdefault("trace", _export(p))) as prof:
        facts = fn(prof.step, n)  # its first step() call, after the setup, ends the
        # profiler's own warm-up step: the loop's setup is not part of ProfilerStep#1
    trace = got["trace"]
    steps = sorted((e for e in trace["traceEvents"]
                    if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"),
                   key=lambda e: e["ts"])
    if len(steps) != n:
        raise SystemExit(f"{name}: {len(steps)} ProfilerStep annotations, expected {n}")
    truth = {"loop": name, "doc": (fn.__doc__ or "").strip(), "steps": [
        {"label": e["name"], "start_us": e["ts"], "end_us": e["ts"] + e["dur"]} for e in steps],
        **facts, "torch": torch.__version__}
    trace["traceEvents"] = [e for e in trace["traceEvents"]
                            if not str(e.get("name", "")).startswith("ProfilerStep#")]
    return trace, truth


def _export(prof) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text())


def write(name: str, out: Path) -> str:
    t0 = time.perf_counter()
    trace, truth = capture(name)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        gz.write(json.dumps(trace, separators=(",", ":")).encode())
    (out / f"{name}.json.gz").write_bytes(buf.getvalue())
    (out / f"{name}.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    events = sum(1 for e in trace["traceEvents"] if e.get("ph") == "X")
    return (f"{name:<18} {len(truth['steps']):>5} {events:>8,} {len(buf.getvalue()) / 1e3:>8.0f} "
            f"{time.perf_counter() - t0:>6.1f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--only", action="append", choices=sorted(LOOPS))
    args = ap.parse_args(argv)
    print(f"{'loop':<18} {'steps':>5} {'X events':>8} {'gz kB':>8} {'s':>6}")
    for name in args.only or LOOPS:
        try:
            print(write(name, args.out), flush=True)
        except Exception as exc:  # noqa: BLE001 - report which loop failed and go on
            print(f"{name:<18} failed: {type(exc).__name__}: {exc}", file=sys.stderr)


if __name__ == "__main__":
    main()
