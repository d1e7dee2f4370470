"""What a finding's share would be without the profiler, and what its fix leaves.

Every event a profiler records costs the profiled run time that the unprofiled run does
not spend.  For a step of a few large ops that cost is nothing; for a loop of thousands of
short events (element reads, tiny ops) it is a large part of the loop's captured time, so
Amdahl on the captured share overshoots the gain the fix gives the real (unprofiled) run.

The figures below are measured on one CPU thread of a shared 2-core machine, each loop
run unprofiled and profiled in turn (medians of 5-7 rounds):

* ``torch.profiler`` (CPU activity, shapes recorded): 20,000 ``x.add(1.0)`` take 3.44 µs
  per op unprofiled and 5.75 µs profiled, 5 recorded events per op (0.46 µs each): 0.40
  of such a loop's captured time is the profiler's.  In a whole step the rest of the
  step carries some profiler cost too; a training step with a 1,536-read ``.item()``
  loop runs its loop 2.5x and the rest 1.7x slower profiled than unprofiled (its
  corpus capture against its truth), so relative to the rest the loop's captured share
  is :data:`PROFILER_SHARE_OPS` the profiler's;
* with the Python tracer on as well (every Python call an event, as JAX's and
  TensorFlow's traces of Python code record it): 2,048 ``z[k].item()`` take 1.03 µs per
  read unprofiled and 3.10 µs profiled: :data:`PROFILER_SHARE_PYTHON`;
* a batched read still converts and hands over every value: one ``.tolist()`` of a
  512x8 float tensor and a Python ``max`` per row take 147 µs,
  :data:`BULK_NS_PER_VALUE` per value (the per-row loop of ``.max().item()`` 983 µs).
"""

from __future__ import annotations

#: Share of a loop of tiny framework ops' captured time that is the profiler's own cost.
PROFILER_SHARE_OPS = 0.32
#: The same for a loop whose events are Python calls recorded by a Python tracer.
PROFILER_SHARE_PYTHON = 0.67
#: A loop rests on short events when its recorded events' median duration is under this
#: (ns): there the profiler's cost per event is a large part of each event's time.
SHORT_EVENT_NS = 50_000
#: ns per value that reading a whole result at once still spends (conversion to Python
#: objects and the Python that consumes them).
BULK_NS_PER_VALUE = 36


def unprofiled_share(share: float, profiler_share: float) -> float:
    """The share a part holding ``share`` of the captured time would hold unprofiled, when
    ``profiler_share`` of the part's own time is the profiler's: the part shrinks by that
    much and so does the whole."""
    cut = share * profiler_share
    return max(share - cut, 0.0) / max(1.0 - cut, 1e-9)


def profiler_share_of(event_ns: float, python: bool) -> float:
    """The profiler's share of a loop whose recorded events take ``event_ns`` (median): 0
    when they are not short (>= :data:`SHORT_EVENT_NS`)."""
    if event_ns <= 0 or event_ns >= SHORT_EVENT_NS:
        return 0.0
    return PROFILER_SHARE_PYTHON if python else PROFILER_SHARE_OPS


def basis(profiler_share: float, python: bool) -> str:
    """The estimate's basis in words (empty when no correction applies)."""
    if profiler_share <= 0:
        return ""
    who = "the profiler and its Python tracer" if python else "torch.profiler"
    return (f" The estimate takes out the profiler's own cost first: in a loop of short "
            f"recorded events {who} spends about {profiler_share:.0%} of the captured time "
            f"(measured on tight loops profiled and unprofiled), which the unprofiled run "
            f"does not spend.")
