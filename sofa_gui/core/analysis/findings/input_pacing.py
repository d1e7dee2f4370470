"""What an input wait proves beyond its size: whether the loader paces the run, and how
much of the wait the pipeline's own work accounts for.

* **Pacing.** When the batches are made beside the step (DataLoader worker processes, a
  tf.data prefetch or map running on its own threads) and the main thread still waits
  for the next batch in every steady step, the loader is slower than the step: the step
  time is the loader's time per batch.  A faster compute would only wait longer, a faster
  loader shortens the step, so input is what limits the run even where the step's own
  work takes a larger slice of it.  A loader keeps up to :data:`AHEAD` batches ready: when
  the main thread is held up (other processes take its core, a slow step), the loader
  runs ahead and the next steps take those batches at once.  So the wait is read over
  every :data:`AHEAD` + 1 steps in a row, not step by step: on a loaded machine a loader
  that paces the run leaves a step or two without a wait.
* **Unexplained wait.** A tf.data pipeline records the work of its stages.  A wait longer
  than all of that work is not input work: the thread that makes the elements did not
  get a core (the step's own threads or other processes held them).  Such a wait is CPU
  contention, which no input-pipeline change removes, so it is not counted as input.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from .context import Ctx
from .registry import Rule
from .tf_data import pipeline_of

#: Batches a loader keeps ready beside the step: DataLoader's default ``prefetch_factor``
#: per worker, and Keras ``fit``'s prefetch over a dataset's own one.
AHEAD = 2


def unexplained_wait(ctx: Ctx, host, share: float) -> tuple[float, str]:
    """(input share the pipeline's work accounts for, the sentence saying what was left
    out): the share scaled by the fraction of the wait the tf.data pipeline's recorded
    work covers; unchanged without a tf.data pipeline."""
    p = pipeline_of(ctx, host)
    if p is None or p.explained >= 1.0 or share <= 0:
        return share, ""
    kept = share * p.explained
    return kept, (f" The pipeline's stages and worker threads worked {fmt_ns(p.work_ns)} in "
                  f"all while the main thread waited {fmt_ns(int(p.wait_ns.sum()))}: only "
                  f"{pct(kept)} of the step is input work; the rest of the wait "
                  f"({pct(share - kept)}) is the pipeline's thread not getting a core (CPU "
                  f"contention), not counted as input.")


def _beside(ctx: Ctx, host) -> str:
    """What makes the batches beside the step, in words; "" when the main thread makes
    them itself (then its loading and its compute add up and the shares say it all)."""
    if ctx.facts.value("dataloader") == "workers":
        return "DataLoader worker processes make the batches beside the step"
    p = pipeline_of(ctx, host)
    if p is not None and p.asynchronous:
        return "tf.data makes the elements on its own threads beside the step"
    return ""


def loader_paces(ctx: Ctx, host, share: float, spec: Rule) -> str:
    """Why the loader sets the step time ("" when it does not): batches made beside the
    step, the main thread waiting for one in every :data:`AHEAD` + 1 steady steps in a row
    (at least the rule's moderate share of their time) and highly input-bound over the
    run."""
    beside = _beside(ctx, host)
    r = ctx.rows
    if not beside or host is None or len(r) < 3 or share < spec.high:
        return ""
    wall = (host.ends[r] - host.starts[r]).astype(np.float64)
    wait = host.column("data_loading")[r].astype(np.float64)
    k = min(AHEAD + 1, len(r))
    spans = np.convolve(wall, np.ones(k), "valid")
    frac = np.divide(np.convolve(wait, np.ones(k), "valid"), spans,
                     out=np.zeros_like(spans), where=spans > 0)
    if float(frac.min()) < spec.moderate:
        return ""
    each = np.divide(wait, wall, out=np.zeros_like(wall), where=wall > 0)
    ready = int((each < spec.moderate).sum())
    if not ready:
        return (f"The loader paces the run: {beside}, yet the main thread waited for the "
                f"next one in each of the {len(r)} steady steps (at least "
                f"{pct(float(each.min()))} of every step), so the step lasts as long as the "
                f"loader takes per batch; a faster compute would only wait longer.")
    return (f"The loader paces the run: {beside}, yet the main thread waited for the next "
            f"one in {len(r) - ready} of the {len(r)} steady steps and in every {k} steps "
            f"in a row (at least {pct(float(frac.min()))} of their time); the other "
            f"{ready} took batches the loader had made ahead (it keeps up to {AHEAD} "
            f"ready). So the step lasts as long as the loader takes per batch; a faster "
            f"compute would only wait longer.")
