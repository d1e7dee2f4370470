"""Image augmentation inside the training step: Keras preprocessing layers at the front of
the model (``RandomRotation``, ``RandomZoom``, ``RandomTranslation``, ``RandomContrast``,
...) run their image kernels in the step's graph, on the threads that then run the model,
and the model's first layer waits for them in every step.  Mapped over the dataset
instead (``ds.map(lambda x, y: (augment(x, training=True), y),
num_parallel_calls=tf.data.AUTOTUNE)``), they run on tf.data's threads while the previous
step trains: the step loses their time where a core is free to take it.

The kernels are read by op type (:data:`AUGMENT_OP`: image transforms no model layer
runs), on the step's own threads (the main thread and the runtime pool's; a dataset map
runs them on tf.data's threads, where they are input work already).  The estimate is
the step without the wall time they cover, its threads slowed by the measured (or
assumed) slow-down of a core while another works for as long as the map works beside
them, and bounded by the free cores that must take the map's work: the machine's usable
cores less those the rest of the step keeps busy.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..intervals import measure_in, union
from .context import Ctx
from .fixes import AUGMENT_FIX
from .host_estimate import CLEAR_GAIN, pool_slices
from .input_estimate import lanes_busy_ns, usable_cores
from .input_removal import core_interference

#: Image kernels of augmentation layers and ``tf.image`` adjustments: affine transforms
#: (rotation, zoom, translation, shear), colour adjustments.
AUGMENT_OP = re.compile(r"^(ImageProjectiveTransformV\d|AdjustContrastv\d|AdjustHue|"
                        r"AdjustSaturation|RGBToHSV|HSVToRGB)$")
#: The least share of the step the augmentation must cover to be told.
MIN_SHARE = 0.05


def estimate_augment_in_step(ctx: Ctx, finding) -> None:
    """Show the fix that maps the augmentation over the dataset on ``finding`` (the compute
    finding of a CPU run whose steps run augmentation kernels on their own threads), with
    its estimate, and say it in the summary."""
    host = ctx.bd.host
    r = ctx.rows
    if host is None or ctx.bd.device is not None or not len(r) \
            or ctx.facts.value("framework") != "tensorflow" \
            or ctx.facts.value("mode") != "training":  # inference's resizing is its work
        return
    s = ctx.trace.slices
    pool = pool_slices(ctx, host)
    mine = ctx.trace.lane_slices(host.lane)
    ops = np.concatenate([mine, pool]).astype(np.int64)
    ops = ops[np.isin(s.name[ops], ctx.trace.name_ids(AUGMENT_OP.match)) & (s.dur[ops] > 0)]
    ops = ops[ctx.in_steady(s.start[ops], host.starts, host.ends)]
    if not len(ops):
        return
    ws, we = host.starts[r], host.ends[r]
    wall = float((we - ws).sum()) or 1.0
    a, b = union(s.start[ops], s.end[ops])
    covered = float(measure_in(a, b, ws, we).sum()) / wall  # the step's wall they take
    work = float(s.dur[ops].sum()) / wall  # their thread-time, in steps
    if covered < MIN_SHARE:
        return
    # cores the step keeps busy
    busy = lanes_busy_ns(ctx, pool, ws, we) / wall if len(pool) else 1.0
    rest = max(1.0 - covered, 1e-6)
    cores, where = usable_cores(ctx)
    free = max(cores - max(busy - work, 0.0) / rest, 0.0)
    slow, slow_why, _ = core_interference(ctx)
    floor = slow * work / free if free > 0.05 else float("inf")
    beside = rest + (slow - 1.0) * min(work, rest)  # slowed while the map works beside it
    speedup = min(1.0 / max(beside, floor), 1.0 / rest)
    if speedup <= 1.0 + CLEAR_GAIN:
        return  # no core left for the map, or too little moved: nothing to offer
    names = sorted({ctx.trace.name_of(int(j)) for j in ops})
    why = (f"{', '.join(names)} cover {pct(covered)} of the steady step on its own threads "
           f"({fmt_ns(work * wall / len(r))} of thread time a step); the rest of the step "
           f"keeps {max(busy - work, 0.0) / rest:.1f} of {cores:g} usable cores busy "
           f"({where}), leaving {free:.1f} for the map; {slow_why}")
    finding.fixes.append(replace(AUGMENT_FIX, because=(
        f"image augmentation kernels ({', '.join(names)}) run inside the training step"),
        estimate=round(max(speedup, 1.0), 3), estimate_why=why))
    finding.summary += (f" Image augmentation runs inside the training step ({', '.join(names)}: "
                        f"{pct(covered)} of it); mapped over the dataset in parallel it runs "
                        f"beside the step: about {max(speedup, 1.0):.2f}x.")
