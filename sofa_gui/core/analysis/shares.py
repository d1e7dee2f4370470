"""What each share the analysis reports is a share of, in words: one place for the app's
header, finding cards and breakdown, the ``analyze`` text and the reports.

Two kinds of share are shown side by side and must not read as one number:

* the verdict's: of all profiled iterations, warm-up included ("of the profiled time");
* a finding's: of steady-state iteration time ("of the step"), the time its fixes remove;
  a hypothesis (faster compute) also says the time it is about (``Finding.covers``) and
  what the fix would save of the step.

The iteration breakdown shows what a thread or device ran, category by category; where
the verdict reads part of that time as another bound (a recurring compile is start-up,
not compute), :func:`verdict_reading` says so with the verdict's own numbers.
"""

from __future__ import annotations

from ..units import fmt_ns, fmt_pct
from .palette import label_of
from .results import Finding
from .verdict import DEVICE_MAP, HOST_MAP, LABELS, PEER_INPUT, SLOWER, Verdict

#: A category holding less of the breakdown's time than this is not named where the
#: verdict's reading says which categories hold the time it moved.
MIN_NAMED = 0.01
#: The words for time the verdict moved that no finding measured.
MOVED_WORDS = {SLOWER: "this rank's ops over the same calls on its fastest peer",
               PEER_INPUT: "this rank's collective waits while the last rank waited for "
                           "its batch"}


def finding_share(f: Finding, short: bool = False) -> str:
    """"25.4% of steady-state iteration time" (``short``: "25.4% of step"); a hypothesis
    "83.4% of steady-state iteration time, 41.7% saved"; one-off work "120 ms one-off
    (3.4% of the profiled time)" (``short``: "120 ms once")."""
    if f.estimated_speedup is None:
        if short:
            return f"{fmt_ns(f.one_off_ns)} once"
        return f"{fmt_ns(f.one_off_ns)} one-off ({fmt_pct(f.share)} of the profiled time)"
    of = "of step" if short else "of steady-state iteration time"
    if f.covers is None:
        return f"{fmt_pct(f.share)} {of}"
    return f"{fmt_pct(f.covers)} {of}, {fmt_pct(f.share)} saved"


def speedup_words(f: Finding, short: bool = False) -> str:
    """"1.72x" or, where the estimate is a lower bound, "at least 27.1x" (``short``:
    "1.72×", ">=27.1×"): one wording of the estimate for every surface."""
    sp = f.estimated_speedup
    if short:
        return f"{'≥' if f.estimate_floor else ''}{sp:.2f}×"
    return f"{'at least ' if f.estimate_floor else ''}{sp:.2f}x"


def speedup_bound(f: Finding) -> str:
    """"up to 1.72×", or "at least 27.10×" where the estimate is a lower bound: the
    estimate as the card and the findings panel's best fix say it."""
    return f"{'at least' if f.estimate_floor else 'up to'} {f.estimated_speedup:.2f}×"


def verdict_share(v: Verdict | None) -> str:
    """"Compute (83.5% of profiled time)": the verdict's bound and share, short."""
    if v is None or not v.bound:
        return "unknown"
    return f"{v.label} ({fmt_pct(v.share)} of profiled time)"


def verdict_reading(v: Verdict | None, findings, label: str, kind: str, categories,
                    times) -> str:
    """A sentence saying which time of the breakdown side the verdict reads (``label``,
    ``kind`` "device" or "host", its ``categories`` and their ``times``; a category under
    :data:`MIN_NAMED` of them is not named) it counts in another bound than the
    category's own, with the verdict's numbers; "" when it moved none, or for another
    side.  A breakdown shows what the thread or device ran, and a recurring compile runs
    as forward ops or runtime calls: the verdict counts it as start-up."""
    counts = verdict_counts(v, findings, label, kind, categories, times)
    ran = "thread" if kind == "host" else "device"
    return f"Categories of what the {ran} ran. {counts}" if counts else ""


def verdict_counts(v: Verdict | None, findings, label: str, kind: str, categories,
                   times) -> str:
    """The sentence of :func:`verdict_reading` that gives the verdict's numbers: "The
    verdict counts 96.3% of profiled time as Start-up: ..., here in Forward / Other." """
    if v is None or not v.moved or (label, kind) != tuple(v.side):
        return ""
    mapping = HOST_MAP if kind == "host" else DEVICE_MAP
    total = float(sum(times))
    titles = {f.id: f.title.split(" (")[0] for f in findings or []}  # its title's head
    parts = []
    for by, to, share, sources in v.moved:
        cats = [label_of(c) for c, t in zip(categories, times)
                if mapping.get(c) in sources and t >= MIN_NAMED * total]
        what = titles.get(by) or MOVED_WORDS.get(by, by)
        parts.append(f"{fmt_pct(share)} of profiled time as {LABELS.get(to, to)}: {what}, "
                     f"here in {' / '.join(cats) or 'other categories'}")
    return "The verdict counts " + "; and ".join(parts) + "."


def read_as(v: Verdict | None, label: str, kind: str, categories) -> dict[str, str]:
    """{category: the bound the verdict reads its time as} for the categories of the
    breakdown side ``label`` / ``kind`` whose bound gave the verdict more time than it
    kept (a recurring compile's forward ops are start-up, tiny ops' backward is host
    overhead); categories the verdict reads as their own bound are left out."""
    if v is None or not v.moved or (label, kind) != tuple(v.side):
        return {}
    mapping = HOST_MAP if kind == "host" else DEVICE_MAP
    out: dict[str, str] = {}
    for _by, to, share, sources in v.moved:
        if share < sum(v.shares.get(src, 0.0) for src in sources):
            continue  # most of that time is still read as its own bound
        for cat in categories:
            if mapping.get(cat) in sources:
                out.setdefault(cat, LABELS.get(to, to))
    return out


def dominant_read_as(v: Verdict | None, bd) -> dict[str, str]:
    """:func:`read_as` for the side a per-iteration "dominant" names (the primary device,
    else the main thread), so the app's Iterations table and the reports name the same
    bound for the same iteration."""
    main = getattr(bd, "device", None) or getattr(bd, "host", None)
    if main is None:
        return {}
    kind = "device" if getattr(bd, "device", None) is not None else "host"
    return read_as(v, main.label, kind, bd.categories())


def breakdown_reading(v: Verdict | None, findings, bd) -> str:
    """:func:`verdict_reading` of the side of breakdown ``bd`` the verdict reads."""
    if v is None or bd is None:
        return ""
    sides = [(d, "device") for d in bd.devices] + [(h, "host") for h in bd.hosts]
    for side, kind in sides:
        text = verdict_reading(v, findings, side.label, kind, side.categories,
                               side.times.sum(axis=0))
        if text:
            return text
    return ""
