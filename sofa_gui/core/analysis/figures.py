"""The headline numbers of a run, each defined once; every surface reads them from here.

The CLI text and JSON, the HTML/Markdown report, ``diff``, ``stats`` and the app (its
header, Iterations table, Breakdown and timeline band) all call these functions, so one
iteration has one length, one median and one event count wherever it is shown:

* **iteration duration**: ``Iterations.durations``, the step's own time (a step
  annotation's duration when the trace has them);
* **device window**: when the device runs behind its host, the time the device spent on
  the step (finish to finish, :meth:`Iterations.device_windows`) is a second number with
  its own label (:func:`device_window_text`), never the iteration's duration;
* **median iteration**: one iteration, :attr:`Iterations.median_index` (the lower median
  by duration), and its duration (:func:`median_ns`);
* **events**: the source's events that were loaded (:func:`event_count`);
* **categories**: people read :func:`category_label`; JSON keeps the ids and carries the
  label table (:func:`category_labels`).
"""

from __future__ import annotations

from ..summary import event_count
from ..units import fmt_ns
from .palette import CATEGORY_LABELS, label_of
from .results import Iterations

__all__ = ["category_label", "category_labels", "device_window", "device_window_text",
           "device_window_texts", "event_count", "median_ns"]

category_label = label_of


def category_labels() -> dict[str, str]:
    """Every breakdown category id with the label people read (JSON's label table)."""
    return dict(CATEGORY_LABELS)


def median_ns(iters: Iterations) -> int | None:
    """Duration of the median iteration (None when there are no iterations)."""
    k = iters.median_index
    return int(iters.durations[k]) if k >= 0 else None


def device_window(iters: Iterations, i: int) -> tuple[int, int] | None:
    """(start, end) ns of the device's window of iteration ``i`` when the device lags its
    host (finish to finish on the device clock), else None."""
    w = iters.device_windows()
    if w is None or not 0 <= i < len(iters):
        return None
    return int(w[0][i]), int(w[1][i])


def device_window_text(iters: Iterations, i: int) -> str:
    """``device 368 ms, ends 158 ms after the step`` ("" when the device keeps up)."""
    w = device_window(iters, i)
    return "" if w is None else _window_text(w[0], w[1], int(iters.ends[i]))


def device_window_texts(iters: Iterations) -> list[str]:
    """:func:`device_window_text` of every iteration, the windows computed once."""
    w = iters.device_windows()
    if w is None:
        return [""] * len(iters)
    return [_window_text(a, b, e) for a, b, e in
            zip(w[0].tolist(), w[1].tolist(), iters.ends.tolist())]


def _window_text(start: int, end: int, step_end: int) -> str:
    after = end - step_end
    where = (f"ends {fmt_ns(after)} after the step" if after > 0 else
             f"ends {fmt_ns(-after)} before the step ends" if after < 0 else
             "ends with the step")
    return f"device {fmt_ns(end - start)}, {where}"
