"""Re-render the README screenshots from the bundled demo trace (headless).

    python docs/screenshots/render.py            # writes docs/screenshots/*.png

``main.png`` is exactly what ``sofa-gui demo --screenshot main.png --iteration 2`` writes;
the others drive the window through its public API (search, slice selection, dark theme);
``iterations-periodic-eval.png`` is the app on a real CPU loop with evaluation every 4th step.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))


def cli_shot(name: str, *args: str, env: dict | None = None) -> None:
    cmd = [sys.executable, "-m", "sofa_gui", "demo", "--screenshot", str(HERE / name), *args]
    subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, **(env or {})})


def search_and_details() -> None:
    """Search for the DataLoader, then select a convolution kernel: details + flow links."""
    import numpy as np
    from PySide6.QtCore import QEventLoop, QSettings, QTimer

    from sofa_gui.core.samples import demo_trace_path
    from sofa_gui.core.trace import Kind
    from sofa_gui.qt.application import make_app
    from sofa_gui.qt.main_window import MainWindow
    from sofa_gui.qt.screenshot import _open_and_wait, _save

    make_app()
    win = MainWindow(QSettings(str(HERE / ".render.ini"), QSettings.Format.IniFormat),
                     restore_state=False)
    win.resize(1600, 1000)
    win.show()
    assert _open_and_wait(win, str(demo_trace_path())) == ""
    s, t = win.session, win.session.trace
    s.select_iteration(2, zoom=True)
    win.search_bar.open_bar()
    win.search_bar.edit.setText("conv")
    win.search_bar.run_search()
    it = s.iterations
    dst = t.flows.dst
    names = np.array([t.name_of(int(i)) for i in dst])
    ok = (t.slices.kind[dst] == int(Kind.KERNEL)) & (np.char.find(names.astype(str), "conv") >= 0)
    inside = (t.slices.start[dst] > it.starts[2]) & (t.slices.start[dst] < it.ends[2])
    cand = np.flatnonzero(ok & inside)
    delay = t.slices.start[dst[cand]] - t.slices.start[t.flows.src[cand]]
    k = int(cand[np.argmin(delay)])  # launched just before it ran: the arrow is short
    kernel, launch = int(dst[k]), int(t.flows.src[k])
    s.select_slice(kernel)
    a = int(t.slices.start[launch]) - 400_000
    b = int(t.slices.start[kernel] + t.slices.dur[kernel]) + 400_000
    s.zoom_to(a, b)
    loop = QEventLoop()
    QTimer.singleShot(500, loop.quit)
    loop.exec()
    _save(win, str(HERE / "details-search.png"))
    win.close()
    (HERE / ".render.ini").unlink(missing_ok=True)


def periodic_eval() -> None:
    """A CPU training loop with evaluation every 4th step (annotations removed)."""
    trace = ROOT / "tests" / "data" / "torch-loops" / "periodic_eval.json.gz"
    cmd = [sys.executable, "-m", "sofa_gui", "view", str(trace), "--size", "1600x1000",
           "--screenshot", str(HERE / "iterations-periodic-eval.png")]
    subprocess.run(cmd, check=True, cwd=ROOT, env=dict(os.environ))


def main() -> None:
    cli_shot("main.png", "--iteration", "2")
    periodic_eval()
    cli_shot("dark.png", "--iteration", "3", env={"SOFA_GUI_COLOR_SCHEME": "dark"})
    search_and_details()


if __name__ == "__main__":
    main()
