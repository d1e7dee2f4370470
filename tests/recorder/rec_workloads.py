"""Child programs the recorder tests run with ``sys.executable -c``."""

from __future__ import annotations

import sys

#: CPU-bound numpy loop for ~1.2 s (keeps at least one core busy).
NUMPY_LOOP = """
import time, numpy as np
a = np.random.rand(160, 160)
end = time.time() + 1.2
while time.time() < end:
    a = a @ a
    a /= a.max()
print("numpy done", flush=True)
"""

#: Prints "ready", then sleeps in small steps until interrupted.
SLEEPER = """
import time
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""

#: Ignores SIGINT and SIGTERM: only SIGKILL ends it.
STUBBORN = """
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""

#: A tiny CPU training loop with no ProfilerStep annotations (STEPS optimizer steps).
TRAIN_TINY = """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 32), torch.randn(256, 1)
for step in range(STEPS):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
"""

#: Imports torch, then loops on matmuls for SECONDS (for windows and Stop).
TORCH_LOOP = """
import time, torch
x = torch.randn(64, 64)
print("ready", flush=True)
end = time.time() + SECONDS
while time.time() < end:
    (x @ x).relu().sum()
"""

#: A Python function py-spy can see by name.
PY_HOT = """
import time
def hot_function_for_pyspy():
    s = 0
    for i in range(200000):
        s += i
    return s
end = time.time() + 1.0
while time.time() < end:
    hot_function_for_pyspy()
"""


def py(code: str, **subs) -> list[str]:
    """``[sys.executable, "-c", code]`` with NAME placeholders replaced."""
    for k, v in subs.items():
        code = code.replace(k, str(v))
    return [sys.executable, "-c", code]


def manifest(folder) -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(folder) / "manifest.json").read_text())


#: Imports torch and loops on matmuls until the shim reports its window done (max 60 s).
TORCH_UNTIL_WINDOW_DONE = """
import os, time, torch
status = os.path.join(os.environ["SOFA_GUI_TORCH_DIR"], f"kineto-{os.getpid()}.status.json")
x = torch.randn(64, 64)
end = time.time() + 60
while time.time() < end:
    (x @ x).relu().sum()
    if os.path.exists(status) and '"state": "done"' in open(status).read():
        break
"""


#: Starts two busy Python workers (like DataLoader workers) and waits for them.
WITH_WORKERS = """
import subprocess, sys
busy = "import time\\nend = time.time() + 1.0\\nwhile time.time() < end: pass"
workers = [subprocess.Popen([sys.executable, "-c", busy]) for _ in range(2)]
for w in workers:
    w.wait()
"""
