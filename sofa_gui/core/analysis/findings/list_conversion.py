"""A JAX batch converted from a Python list of arrays each step: ``jnp.array(images)``.

The loop's own ``jnp.array`` / ``jnp.asarray`` calls that walk a Python list are input
(:mod:`..host_side`, whose test this is).  Given one numpy array such a call records
about 70-130 frames of JAX's Python tracer (a host-to-device copy); given a Python list of
arrays (samples gathered one by one) it walks the list in Python, every element's dtype,
weak type and tree checked, and records thousands (10,000-13,000 for a list of 512
images, as many for their 512 labels): at least
:data:`..host_side.MIN_WALK_EVENTS` frames in one call is such a walk.  Inside the walk
the call does two things a batch
needs whatever its form: numpy's copy of the elements into one array (``$numpy
asarray``) and the transfer of that array to the device (``_convert_element_type``).

The fix stacks the samples with ``np.stack`` and converts the batch with one
``jnp.asarray``: the copy and the transfer stay, the walk goes.  Its estimate: the step
without the profiler (its captured time less JAX's Python tracer's cost per event it
records, as fast as the capture ran it: :func:`.recorder_cost.tracer_per_event_ns`) over
the same step less the walking conversions without the profiler, their copy and transfer
kept.  Where the capture holds no tracer's frames there is no walk to see and no estimate.
"""

from __future__ import annotations

import re

import numpy as np

from ...units import fmt_ns
from ..host_side import JAX_CONVERSION, events_inside
from ..self_time import parents
from .context import Ctx
from .recorder_cost import tracer_per_event_ns

#: What the conversion keeps after the fix: numpy's copy of the elements into one array
#: and the array's transfer to the device.
_KEPT = re.compile(r"^\$numpy (asarray|array|stack)$|^\$lax\.py:\d+ _convert_element_type$")


def walked_conversions(ctx: Ctx, host) -> tuple[np.ndarray, np.ndarray]:
    """(the steady steps' loop conversions that walk a list, the events each records)."""
    return ctx.once(("list_conversion", host.lane), lambda: _walked(ctx, host))


def _walked(ctx: Ctx, host) -> tuple[np.ndarray, np.ndarray]:
    s = ctx.trace.slices
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64))
    names = ctx.trace.name_ids(JAX_CONVERSION.match)
    conv = dl[np.isin(s.name[dl], names)] if len(dl) and len(names) else dl[:0]
    conv = conv[ctx.in_steady(s.start[conv], host.starts, host.ends)]
    if not len(conv):
        return conv, np.zeros(0, np.int64)
    return conv, events_inside(ctx.trace, host.lane, conv)  # input only where they walk


def unseen(ctx: Ctx) -> str:
    """Why the fix does not apply here ("" where a conversion walks a list)."""
    host = ctx.bd.host
    if host is None or not len(walked_conversions(ctx, host)[0]):
        return "no jnp.array call of the loop walks a Python list of elements"
    return ""


def list_conversion_gain(ctx: Ctx) -> tuple[float | None, str, float]:
    """(speed-up, why, confidence factor) of stacking the samples and converting once (see
    the module docstring)."""
    host = ctx.bd.host
    conv, events = walked_conversions(ctx, host)
    per_event = tracer_per_event_ns(ctx, host.lane)
    r = ctx.rows
    if not len(conv) or per_event is None or not len(r):
        return None, "the capture does not show the conversions' walk", 1.0
    s, par = ctx.trace.slices, parents(ctx.trace)
    mine = ctx.trace.lane_slices(host.lane)
    kids = mine[np.isin(par[mine], conv)]
    kept = kids[np.isin(s.name[kids], ctx.trace.name_ids(_KEPT.match))]
    kept_ns = (float(s.dur[kept].sum())
               - float(events_inside(ctx.trace, host.lane, kept).sum()) * per_event)
    walk = float(s.dur[conv].sum()) - float(events.sum()) * per_event - max(kept_ns, 0.0)
    steady = ctx.in_steady(s.start[mine], host.starts, host.ends)
    wall = float((host.ends[r] - host.starts[r]).sum()) - float(steady.sum()) * per_event
    if walk <= 0 or wall <= walk:
        return None, "the conversions' walk takes no time without the profiler", 1.0
    n = len(r)
    return wall / (wall - walk), (
        f"{len(conv) / n:.0f} jnp.array call{'s' if len(conv) != n else ''} a step walk a Python "
        f"list ({events.mean():,.0f} frames each): {fmt_ns(walk / n)} a step without the "
        f"profiler (less the Python tracer's {per_event / 1e3:.2f} µs an event, as this capture "
        f"ran it), their copy into one array and transfer kept, of a {fmt_ns(wall / n)} step"), 1.0
