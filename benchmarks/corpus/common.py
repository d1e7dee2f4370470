"""Framework-neutral parts of the diagnosis corpus generators: the case registry, the
phase clock, the unprofiled truth measurement and the ``truth.json`` writer.

A case is a function ``build(variant) -> step`` registered with :func:`case`; ``step(i)``
runs one iteration and times its phases with :data:`CLOCK` (``with CLOCK("input"): ...``).
``variant`` is ``"run"`` (the case as captured), ``"fix"`` (the counterfactual, when the
case claims a fix) or one of the case's further ``variants``, other settings of the same
fix (``"num_workers=1"`` beside a ``"num_workers=2"`` fix), so the truth has the setting
the advisor plans, whichever it is.  Truth is measured WITHOUT the profiler, after the
captures, in rounds that alternate the run and its fix and variants (each round builds
its variant afresh, skips its warm-up steps and times the rest), so all see the same
machine load; medians over the rounds, with their spread.  Each round also records how
many cores other processes kept busy meanwhile (``noise.others_cores``): a round beside
a busy neighbour times a different machine, and loops with loader workers, which need
the cores the neighbour takes, most of all.

Phase names map to the bound they measure (:data:`PHASE_BOUND`); time of a step in no
named phase is compute.  A case whose slow part is per-op overhead (or whose bound is only
known from its fix) says so with ``share_from_fix``: the bound's share is then
``1 - fixed time / run time`` of the measured counterfactual; ``also_share`` names a
further variant whose gain is a second bound's share, out of what stays compute.

This module imports no framework: the TensorFlow and JAX generators run in their own
virtual environments and import it too.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "corpus"
BOUNDS = ("compute", "input", "communication", "host_overhead", "sync", "startup",
          "memory_copies")
PHASE_BOUND = {"input": "input", "comm": "communication", "sync": "sync",
               "overhead": "host_overhead", "copy": "memory_copies", "compute": "compute",
               "periodic": "periodic", "startup": "startup"}
REQUIRED_KEYS = ("case", "split", "framework", "mode", "description", "facts", "bound",
                 "bound_share", "shares", "step_ms", "phases_ms", "noise", "fix",
                 "captures", "generator", "machine")


@dataclass
class Case:
    """One corpus case: how to build it and what it is (its design and facts)."""

    name: str
    build: Callable
    framework: str
    mode: str
    steps: int  # steps in a capture (after ``warmup`` unprofiled ones)
    facts: dict
    split: str = "tuned"
    warmup: int = 2
    fix: str = ""  # what the "fix" variant changes, "" when no fix is claimed
    variants: tuple[str, ...] = ()  # further settings of the fix, measured beside it
    share_from_fix: str = ""  # bound whose share is 1 - fix/run (per-op overhead, ...)
    share_variant: str = "fix"  # the variant that share is measured against ("bare": the
    # run with its bottleneck removed outright, when the claimed fix only eases it)
    share_per_item: int = 0  # items a step of a share variant other than the fix holds
    # (0: fix_per_item): the same work for several inputs at once, per input
    per_item: int = 1  # items per step in the run (fix may differ: fix_per_item)
    fix_per_item: int = 1
    also: tuple[str, ...] = ()  # more variants measured beside the run (truth "variants")
    also_share: tuple[str, str] = ("", "")  # (bound, one of ``also``): a second bound whose
    # share is 1 - variant/run, taken from compute (a smaller fix inside the run's own work)
    startup_in_window: bool = False  # the capture starts cold: the first steps are timed
    tags: list[str] = field(default_factory=list)

    @property
    def doc(self) -> str:
        return " ".join((self.build.__doc__ or "").split())


CASES: dict[str, Case] = {}


def case(name: str, framework: str, mode: str, steps: int, facts: dict, **kw):
    """Register ``build(variant) -> step`` as corpus case ``name``."""
    def deco(fn):
        CASES[name] = Case(name, fn, framework, mode, steps, facts, **kw)
        return fn
    return deco


class Clock:
    """Per-phase perf_counter totals of the current step (cheap enough to stay on in the
    profiled runs, where it is ignored)."""

    def __init__(self):
        self.acc: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, phase: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.acc[phase] += time.perf_counter() - t0

    def take(self) -> dict[str, float]:
        out, self.acc = dict(self.acc), defaultdict(float)
        return out


CLOCK = Clock()


def time_steps(step: Callable, first: int, n: int, min_s: float = 0.0,
               most: int = 0) -> list[tuple[float, dict]]:
    """Run steps ``first .. first+n-1``, then more (up to ``most`` in all) until the round
    has taken ``min_s`` seconds or the loop's data ends; per step (wall s, phase seconds).
    Short steps need many of them for a median the machine's noise does not move."""
    out, total, i = [], 0.0, first
    while len(out) < n or (total < min_s and len(out) < most):
        CLOCK.take()
        t0 = time.perf_counter()
        try:
            step(i)
        except StopIteration:
            if len(out) >= n:
                break
            raise
        wall = time.perf_counter() - t0
        out.append((wall, CLOCK.take()))
        total, i = total + wall, i + 1
    return out


def warmed(c: Case):
    """(step, first index): the run variant built, its warm-up steps run unprofiled
    (none when the case captures its start-up)."""
    step = c.build("run")
    if c.startup_in_window:
        return step, 0
    for i in range(c.warmup):
        step(i)
    return step, c.warmup


def release(step) -> None:
    """Let a variant free what it holds (loader workers, process groups)."""
    close = getattr(step, "close", None)
    if close:
        close()


#: Each timed round of a steady case lasts at least this long (at most 50x its steps).
ROUND_S = 0.5


def steps_to_fill(c: Case, warm: list[tuple[float, dict]]) -> int:
    """Steps a round needs to last :data:`ROUND_S`, judged by the last warm-up step (the
    first ones pay for allocation and caches): the case's steps at least, 50x at most."""
    last = warm[-1][0] if warm else 0.0
    want = int(-(-ROUND_S // last)) if last > 0 else c.steps
    return min(max(want, c.steps), 50 * c.steps)


def variants_of(c: Case) -> list[str]:
    """The variants a case's truth times: the run, its fix and the fix's other settings
    (``variants``), the variant its share is measured against and the others it names
    (``also``)."""
    variants = ["run", "fix"] if c.fix else ["run"]
    variants += [v for v in c.variants if c.fix]
    if c.share_from_fix and c.share_variant not in variants:
        variants.append(c.share_variant)
    return variants + [v for v in c.also if v not in variants]


def measure(c: Case, rounds: int = 3, agree: Callable[[int], int] | None = None,
            one_round: Callable | None = None) -> dict:
    """Unprofiled truth: ``rounds`` rounds of the run (and of its other variants,
    interleaved), each at least :data:`ROUND_S` of steps (``one_round(c, variants)``, by
    default :func:`_round`, times one).  A round during which other processes kept more
    than :data:`BUSY_NEIGHBOURS` cores busy (:class:`Others`) is measured again, at most
    ``rounds`` times in all; ``noise.others_cores`` has the kept rounds' figures,
    ``noise.rounds_dropped`` how many were measured again.  ``agree`` (processes that step
    together, such as the ranks of a DDP job) turns this process's step count into the one
    every process runs: a round that stopped by each process's own clock could end a step
    apart, and the extra step's collectives would meet the next variant's; such rounds are
    kept whatever their neighbours (a round measured again by one process alone would part
    them)."""
    variants = variants_of(c)
    kept, dropped = [], 0
    while len(kept) < rounds:
        got, others = one_round(c, variants) if one_round else _round(c, variants, agree)
        busy = [x for x in others.values() if x is not None]
        if agree is None and busy and max(busy) > BUSY_NEIGHBOURS and dropped < rounds:
            dropped += 1
            continue
        kept.append((got, others))
    truth = summarize(c, {v: [g[v] for g, _ in kept] for v in variants})
    truth["noise"]["others_cores"] = {v: [o[v] for _, o in kept] for v in variants}
    truth["noise"]["rounds_dropped"] = dropped
    return truth


def _round(c: Case, variants: list[str],
           agree: Callable[[int], int] | None = None) -> tuple[dict, dict]:
    """One timed round of each variant, built afresh: ({variant: [(wall s, phases)]},
    {variant: cores other processes kept busy meanwhile}).  Each starts from a collected
    heap: the garbage of building a variant (or of an earlier capture) is not collected
    inside the timed steps, where one full collection of the interpreter's objects would
    land on whichever variant happens to cross the collector's threshold."""
    got, others = {}, {}
    for v in variants:
        watch = Others()
        step = c.build(v)
        if c.startup_in_window:
            gc.collect()
            got[v] = time_steps(step, 0, c.warmup + c.steps)
        elif agree is not None:
            n = agree(steps_to_fill(c, time_steps(step, 0, c.warmup)))
            gc.collect()
            got[v] = time_steps(step, c.warmup, n)
        else:
            time_steps(step, 0, c.warmup)
            gc.collect()
            got[v] = time_steps(step, c.warmup, c.steps, ROUND_S, 50 * c.steps)
        release(step)
        others[v] = watch.cores()
    return got, others


#: A round during which other processes kept more cores than this busy is measured again.
BUSY_NEIGHBOURS = 0.2


class Others:
    """The cores other processes kept busy since it was made: the machine's busy time
    (``/proc/stat``) less that of the generator's own processes (those of its Unix session
    id: this one, its loader workers and their reaped children, the other ranks of a
    distributed case), over the wall time.
    None where the machine does not say (no ``/proc``)."""

    def __init__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), _machine_busy(), _own_cpu()

    def cores(self) -> float | None:
        busy, own = _machine_busy(), _own_cpu()
        if None in (busy, self.busy0, own, self.own0):
            return None
        wall = time.perf_counter() - self.t0
        return round(max((busy - self.busy0) - (own - self.own0), 0.0) / max(wall, 1e-9), 2)


def _machine_busy() -> float | None:
    """Seconds all cores have been busy since boot (user, nice, system, irq, softirq,
    steal), or None without ``/proc/stat``."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float | None:
    """CPU seconds of the processes with this one's Unix session id (``os.getsid``) and of
    the children they have waited for (a loader worker's, once it is joined), from
    ``/proc/<pid>/stat``."""
    sid, total = os.getsid(0), 0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[3]) == sid:  # utime stime cutime cstime
            total += sum(int(x) for x in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def _ms(x: float) -> float:
    return round(x * 1e3, 3)


def _round_stats(rounds: list[list[tuple[float, dict]]]) -> dict:
    """Median step wall and median phase times, per round and over the rounds."""
    per_round, phases = [], defaultdict(list)
    for r in rounds:
        per_round.append(statistics.median(w for w, _ in r))
        names = {k for _, ph in r for k in ph}
        for k in names:
            phases[k].append(statistics.mean(ph.get(k, 0.0) for _, ph in r))
    walls = [w for r in rounds for w, _ in r]
    totals = [sum(w for w, _ in r) / len(r) for r in rounds]
    return {"median": statistics.median(per_round), "mean": statistics.median(totals),
            "rounds": per_round, "round_means": totals, "walls": walls,
            "round_walls": [[w for w, _ in r] for r in rounds],
            "phases": {k: statistics.median(v) for k, v in phases.items()}}


def _spread(xs: list[float]) -> float:
    """(max - min) / median of per-round medians: the machine's noise on this figure."""
    m = statistics.median(xs)
    return round((max(xs) - min(xs)) / m, 3) if m else 0.0


def shares_of(c: Case, run: dict, fix: dict | None,
              other: dict | None = None) -> dict[str, float]:
    """Measured share of each bound in the run's mean step (phases, start-up, fix, and the
    ``also_share`` variant ``other``)."""
    mean = run["mean"]
    shares: dict[str, float] = defaultdict(float)
    named = 0.0
    for phase, sec in run["phases"].items():
        b = PHASE_BOUND.get(phase.split(":")[0], "compute")
        shares[b] += sec / mean
        named += sec
    if c.startup_in_window:
        steady = statistics.median(statistics.median(r[c.warmup:])
                                   for r in run["round_walls"])
        extra = max(0.0, mean - steady)
        shares["startup"] += extra / mean
        named += extra
    shares["compute"] += max(0.0, 1.0 - named / mean)
    if c.share_from_fix and fix:
        per_run = run["mean"] / c.per_item
        per_fix = fix["mean"] / _ref_items(c)
        moved = max(0.0, 1.0 - per_fix / per_run)
        # what the fix saves holds what a phase of the same bound timed (an all_to_all
        # timed directly is part of what the loop without it saves): counted once
        moved = max(0.0, moved - shares.get(c.share_from_fix, 0.0))
        taken = min(moved, shares.get("compute", 0.0))
        shares["compute"] -= taken
        shares[c.share_from_fix] += moved
    if c.also_share[0] and other:  # a part of what stays compute, the variant's gain
        taken = min(max(0.0, 1.0 - other["mean"] / run["mean"]), shares.get("compute", 0.0))
        shares["compute"] -= taken
        shares[c.also_share[0]] += taken
    return {k: round(v, 3) for k, v in sorted(shares.items(), key=lambda kv: -kv[1])
            if v >= 0.005}


def _ref_items(c: Case) -> int:
    """Items a step of the variant the share is measured against holds."""
    return c.share_per_item if c.share_variant != "fix" and c.share_per_item else c.fix_per_item


def summarize(c: Case, got: dict) -> dict:
    """Truth from the timed rounds of each variant: ``got[variant] = [round, ...]``, a
    round being a list of (wall s, phase seconds) per step."""
    run = _round_stats(got["run"])
    fix = _round_stats(got["fix"]) if "fix" in got else None
    ref = _round_stats(got[c.share_variant]) if c.share_variant in got else None
    other = c.also_share[1]
    shares = shares_of(c, run, ref, _round_stats(got[other]) if other in got else None)
    ranked = [(k, v) for k, v in shares.items() if k in BOUNDS]
    bound, share = ranked[0] if ranked else ("compute", 0.0)
    truth = {
        "bound": bound, "bound_share": share, "shares": shares,
        "step_ms": {"mean": _ms(run["mean"]), "median": _ms(run["median"]),
                    "min": _ms(min(run["walls"])), "max": _ms(max(run["walls"])),
                    "rounds_median": [_ms(x) for x in run["rounds"]]},
        "phases_ms": {k: _ms(v) for k, v in sorted(run["phases"].items())},
        "noise": {"round_spread": _spread(run["rounds"]),
                  "step_cv": round(statistics.pstdev(run["walls"]) /
                                   statistics.mean(run["walls"]), 3)},
        "fix": None,
    }
    truth["raw"] = {v: [[_ms(w) for w, _ in r] for r in rounds] for v, rounds in got.items()}
    if ref and c.share_variant != "fix":
        truth["bare_step_ms_median"] = _ms(ref["median"])
    if fix:
        truth["fix"] = {"what": c.fix, **_against(run, fix, c.per_item, c.fix_per_item)}
        if c.variants:  # every measured setting of the fix, the fix's own among them
            truth["fix"]["variants"] = {c.fix: _against(run, fix, c.per_item, c.fix_per_item),
                                        **{v: _against(run, _round_stats(got[v]), c.per_item,
                                                       c.fix_per_item)
                                           for v in c.variants if v in got}}
    others = [v for v in got if v not in ("run", "fix") and v not in c.variants]
    if others:
        truth["variants"] = {v: _against(run, _round_stats(got[v]), c.per_item,
                                         _ref_items(c) if v == c.share_variant else c.per_item)
                             for v in others}
    return truth


def _against(run: dict, other: dict, per_run: int, per_other: int) -> dict:
    """A variant's steps and phases and its speed-up over the run: the median over rounds
    of the per-round ratio of mean steps (per item), a mean being what a run's throughput
    is (the median of short steps hides the preemptions that long steps absorb)."""
    ratios = [(a / per_run) / (b / per_other)
              for a, b in zip(run["round_means"], other["round_means"])]
    return {"step_ms_median": _ms(other["median"]), "step_ms_mean": _ms(other["mean"]),
            "phases_ms": {k: _ms(v) for k, v in sorted(other["phases"].items())},
            "items_per_step": per_other, "speedup": round(statistics.median(ratios), 3),
            "speedup_rounds": [round(r, 3) for r in ratios],
            "speedup_spread": _spread(ratios)}


def gzip_profiles(dest: Path) -> None:
    """Store each ``<host>.xplane.pb`` of the capture folder ``dest`` (TensorFlow, JAX) as
    ``<host>.xplane.pb.gz``, as ``gzip -9 -n`` does (no name, no time stamp): a fifth of
    the size or less, and opened the same."""
    if not dest.is_dir():
        return
    for pb in sorted(dest.rglob("*.xplane.pb")):
        gz = pb.with_name(pb.name + ".gz")
        gz.write_bytes(gzip.compress(pb.read_bytes(), compresslevel=9, mtime=0))
        pb.unlink()


def machine(**versions) -> dict:
    return {"cpu_count": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 2),
            "python": platform.python_version(), **versions}


def write_truth(c: Case, measured: dict, captures: list[str], generator: str,
                versions: dict, out: Path = CORPUS) -> Path:
    """``out/<case>/truth.json``: the case's design and facts plus the measured truth."""
    truth = {"case": c.name, "split": c.split, "framework": c.framework, "mode": c.mode,
             "description": c.doc, "facts": c.facts, **measured,
             "captures": captures, "capture_steps": c.steps,
             "startup_in_window": c.startup_in_window, "tags": c.tags,
             "generator": generator, "machine": machine(**versions)}
    missing = [k for k in REQUIRED_KEYS if k not in truth]
    if missing:
        raise ValueError(f"{c.name}: truth lacks {missing}")
    dest = out / c.name / "truth.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(truth_text(truth))
    return dest


def truth_text(truth: dict) -> str:
    """``truth.json``'s text: indented, with the raw step times (thousands of numbers)
    last and one line per variant, so the file stays small and readable."""
    body = {k: v for k, v in truth.items() if k != "raw"}
    text = json.dumps(body, indent=1)
    if "raw" not in truth:
        return text + "\n"
    rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                       for k, v in truth["raw"].items())
    return f"{text[:-2]},\n \"raw\": {{\n{rows}\n }}\n}}\n"


def report_line(c: Case, measured: dict, seconds: float) -> str:
    fix = measured["fix"]
    fx = f" fix {fix['speedup']:.2f}x ({fix['speedup_spread']:.2f})" if fix else ""
    fx += "".join(f", {k} {v['speedup']:.2f}x" for k, v in (fix or {}).get("variants", {}).items()
                  if k != c.fix)
    busy = [x for xs in (measured["noise"].get("others_cores") or {}).values() for x in xs
            if x is not None]
    loud = (f"  OTHER PROCESSES BUSY: up to {max(busy):.2f} cores"
            if busy and max(busy) > BUSY_NEIGHBOURS else "")
    return (f"{c.name:<26} {c.split:<8} {measured['bound']:<14} "
            f"{measured['bound_share']:>5.2f} {measured['step_ms']['median']:>9.2f} ms "
            f"noise {measured['noise']['round_spread']:.2f}{fx}  [{seconds:.0f} s]{loud}")


@dataclass
class Driver:
    """How one generator captures and measures its cases (the parts that differ between
    frameworks); :func:`run_case` and :func:`cli` do the rest."""

    script: str  # e.g. "run_torch.py"
    capture: Callable  # (case, dest path) -> None
    versions: dict
    suffix: str = ""  # capture name suffix: ".json.gz" for a file, "" for a folder
    measure: Callable = measure  # (case, rounds) -> measured truth

    def run_case(self, name: str, captures: int, rounds: int, out: Path) -> str:
        """Captures ``capture-1..N`` (none: the case's captures stay as they are), then the
        unprofiled truth; one report line."""
        c, t0 = CASES[name], time.perf_counter()
        names = sorted(p.name for p in (out / name).glob("capture-*")) if not captures else []
        for k in range(1, captures + 1):
            dest = out / name / f"capture-{k}{self.suffix}"
            self.capture(c, dest)
            gzip_profiles(dest)
            names.append(dest.name)
        measured = self.measure(c, rounds)
        write_truth(c, measured, names, f"benchmarks/corpus/{self.script} --only {name}",
                    self.versions, out)
        return report_line(c, measured, time.perf_counter() - t0)


def cli(driver: Driver, doc: str, argv=None, names: list[str] | None = None) -> int:
    """The generators' command line: ``--only``, ``--captures``, ``--rounds``, ``--out``."""
    import argparse

    names = names or sorted(CASES)
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=names)
    ap.add_argument("--captures", type=int, default=2,
                    help="captures per case; 0 keeps the case's captures and re-measures "
                         "its truth only")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=CORPUS)
    args = ap.parse_args(argv)
    for name in args.only or names:
        try:
            print(driver.run_case(name, args.captures, args.rounds, args.out), flush=True)
        except Exception as exc:  # noqa: BLE001 - report which case failed and go on
            print(f"{name:<26} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 0
