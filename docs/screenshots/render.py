"""Re-render the README screenshots from the bundled demo trace (headless).

    python docs/screenshots/render.py            # writes docs/screenshots/*.png

``python docs/screenshots/render.py sizes`` renders only the three screen sizes
(``sample-WxH.png`` and ``ranks-WxH.png`` at 1920x1080, 1366x768 and 1280x800).
``main.png`` is exactly what ``sofa-gui demo --screenshot main.png --iteration 2`` writes
(``main-1280x800.png`` the same at 1280x800); the others drive the window through its
public API (search, slice selection, dark theme, an area selection with Statistics, the
Ranks heat map of the two-rank HTA folder, Compare on the ResNet num_workers 0/4 pair);
``iterations-periodic-eval.png`` is the app on a real CPU loop with evaluation every 4th step,
``tfdata-generator.png`` on the tf.data generator capture, ``query.png`` and
``calltree-flame.png`` the Query and Call tree docks (``render.py query flame`` makes
only those), ``render.py sizes`` the sample and a two-rank folder at three screen
sizes, and ``fleet.png`` (``render.py fleet``) the fleet overview of 32 ranks made from
the two bundled HTA rank traces, rank 13's compute stretched 2x (docs/fleet.md).
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


def tfdata_generator() -> None:
    """The tf.data generator capture: tf.data lanes, the input finding, the tf.data dock."""
    cmd = [sys.executable, "-m", "sofa_gui", "view", str(ROOT / "tests" / "data" / "tf" /
           "generator"), "--size", "1600x1000", "--screenshot", str(HERE / "tfdata-generator.png")]
    subprocess.run(cmd, check=True, cwd=ROOT, env=dict(os.environ))


def _window(path, size=(1280, 800)):
    from PySide6.QtCore import QSettings

    from sofa_gui.qt.application import make_app
    from sofa_gui.qt.main_window import MainWindow
    from sofa_gui.qt.screenshot import _open_and_wait

    make_app()
    win = MainWindow(QSettings(str(HERE / ".render.ini"), QSettings.Format.IniFormat),
                     restore_state=False)
    win.resize(*size)
    win.show()
    if path is not None:
        assert _open_and_wait(win, str(path)) == ""
    return win


def _settle(ms: int = 500) -> None:
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def _done(win, name: str) -> None:
    from sofa_gui.qt.screenshot import _save

    _settle()
    _save(win, str(HERE / name))
    win.session.shutdown()
    win.close()
    (HERE / ".render.ini").unlink(missing_ok=True)


def statistics_range() -> None:
    """Iteration 2 zoomed, an area over the GPU stream selected: its kernels in Statistics."""
    import numpy as np

    from sofa_gui.core.samples import demo_trace_path
    from sofa_gui.core.trace import LaneKind

    win = _window(demo_trace_path())
    s, t = win.session, win.session.trace
    s.select_iteration(2, zoom=True)
    gpu = int(np.flatnonzero(np.asarray(t.lanes.kind) == LaneKind.GPU)[0])
    a, b = int(s.iterations.starts[2]), int(s.iterations.ends[2])
    win.timeline.set_area((a + (b - a) * 6 // 10, a + (b - a) * 9 // 10, (gpu,)))
    _done(win, "statistics-range.png")


def ranks_heatmap() -> None:
    """The two sampled ranks of HTA's 128-rank NCCL job: iteration time per rank."""
    win = _window(ROOT / "tests" / "data" / "ranks")
    win.docks["ranks"].raise_()
    win.session.select_iteration(1, zoom=True)
    _done(win, "ranks-heatmap.png")


def compare_pair() -> None:
    """ResNet-50 with num_workers=0 compared with num_workers=4."""
    from PySide6.QtCore import QEventLoop

    from sofa_gui.core.samples import demo_trace_path

    other = (ROOT / "tests" / "data" / "real" / "kineto-tb-plugin" / "resnet50_num_workers_4"
             / "worker0.1623212756351.pt.trace.json.gz")
    win = _window(demo_trace_path())
    loop = QEventLoop()
    win.panels["compare"].compared.connect(loop.quit)
    win.compare_with(other)
    loop.exec()
    _done(win, "compare.png")


#: The screens the window is checked on: a desk monitor and two laptops.
SIZES = ((1920, 1080), (1366, 768), (1280, 800))


def three_sizes() -> None:
    """The sample (iteration 2) and the two-rank folder (Ranks dock in front) at each of
    :data:`SIZES`: ``sample-WxH.png``, ``ranks-WxH.png``."""
    for w, h in SIZES:
        cli_shot(f"sample-{w}x{h}.png", "--iteration", "2", "--size", f"{w}x{h}")
        win = _window(ROOT / "tests" / "data" / "ranks", (w, h))
        win.docks["ranks"].raise_()
        win.session.select_iteration(1, zoom=True)
        _done(win, f"ranks-{w}x{h}.png")


def _tall_bottom(win, key: str) -> None:
    """Raise dock ``key`` and give the bottom docks half the window's height."""
    from PySide6.QtCore import Qt

    win.docks[key].raise_()
    win.resizeDocks([win.docks[key]], [win.height() // 2], Qt.Orientation.Vertical)
    win.resizeDocks([win.docks[key]], [win.width() * 2 // 3], Qt.Orientation.Horizontal)


def query_dock() -> None:
    """The Query dock: the top kernels of iteration 3, and the slowest CPU ops highlighted."""
    from sofa_gui.core.samples import demo_trace_path

    win = _window(demo_trace_path(), size=(1600, 1000))
    win.session.select_iteration(3, zoom=True)
    _tall_bottom(win, "query")
    panel = win.panels["query"]
    for _ in range(600):  # the tables open when the dock is first shown
        if panel.tables_open:
            break
        _settle(100)
    panel.editor.setPlainText("SELECT id, name, dur_us, iteration FROM ops\n"
                              "WHERE iteration = 3 ORDER BY dur_us DESC LIMIT 20")
    panel.run_query()
    while panel.running:
        _settle(100)
    _done(win, "query.png")


def flame_graph() -> None:
    """The Call tree dock: the main thread's icicle graph of iteration 2, a frame clicked."""
    from sofa_gui.core.samples import demo_trace_path

    win = _window(demo_trace_path(), size=(1600, 1000))
    win.session.select_iteration(2, zoom=True)
    _tall_bottom(win, "calltree")
    panel = win.panels["calltree"]
    panel.choose(scope="iteration")
    tree = panel.tree
    conv = next(n for n in range(len(tree)) if tree.names[n] == "aten::conv2d")
    panel.flame.choose(conv)
    _done(win, "calltree-flame.png")


def fleet_view() -> None:
    """32 ranks made from the two bundled HTA rank traces, rank 13's compute stretched 2x:
    the fleet overview once every rank is analyzed (on two Dask workers, so the header
    reads the same on any machine)."""
    import tempfile

    os.environ.setdefault("SOFA_GUI_FLEET_WORKERS", "2")

    from sofa_gui.core.fleet.synth import make_rank_folder
    from sofa_gui.qt.screenshot import _save

    ranks = ROOT / "tests" / "data" / "ranks"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "hta-32-ranks"
        make_rank_folder(folder, [ranks / "sampled_rank-0.json.gz",
                                  ranks / "sampled_rank-1.json.gz"], 32, slow={13: 2.0})
        win = _window(None, (1400, 900))
        s = win.session
        win.open_path(folder)
        while s.fleet is None or s.busy:
            _settle(200)
        _settle()
        _save(win, str(HERE / "fleet.png"))
        s.shutdown()
        win.close()
    (HERE / ".render.ini").unlink(missing_ok=True)


SHOTS = {"query": query_dock, "flame": flame_graph, "sizes": three_sizes, "fleet": fleet_view}


def main() -> None:
    if sys.argv[1:]:  # only these, e.g. `render.py query flame`
        for name in sys.argv[1:]:
            SHOTS[name]()
        return
    query_dock()
    flame_graph()
    cli_shot("main.png", "--iteration", "2")
    periodic_eval()
    tfdata_generator()
    cli_shot("main-1280x800.png", "--iteration", "2", "--size", "1280x800")
    statistics_range()
    ranks_heatmap()
    compare_pair()
    cli_shot("dark.png", "--iteration", "3", env={"SOFA_GUI_COLOR_SCHEME": "dark"})
    search_and_details()
    three_sizes()
    fleet_view()


if __name__ == "__main__":
    main()
