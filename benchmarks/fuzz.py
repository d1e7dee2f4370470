"""Mutation fuzzing of every importer: N cases each, in worker processes, with a tally.

    python benchmarks/fuzz.py                      # 10,000 cases per importer, 2 workers
    python benchmarks/fuzz.py --cases 500 --only chrome.trace
    python benchmarks/fuzz.py --replay chrome.trace:1234   # rerun one case, print traceback

Each case copies a seed cut from a real trace (tests/robustness/fuzz_seeds.py), mutates
it (fuzz_mutators.py) and loads it as the CLI does (fuzz_harness.py). A case is good when
it ends in a loaded trace (its load report counting what was skipped) or in a
TraceFormatError with the path and a one-line reason. A worker stuck past the hard limit
is killed and its case counted as a hang. ``--cli N`` also runs N cases per importer
through ``sofa-gui analyze --json`` in a subprocess (exit 0, or 2 with one stderr line).

``--attacks`` instead runs the hostile-input families (tests/robustness/attacks.py: blank
space and huge values in gzip, decompression past the limit, deep args, 100k threads, a
recursive SQLite VIEW, generated columns and triggers in SQLite, hostile names and line
breaks in names, a symlink loop, period-3 streams, recordings with 80k processes,
run-length-encoded counters or files linking out of the folder, out-of-range ids, lone
surrogates, metadata of the wrong type) at full size, each through
``sofa-gui analyze --json --no-cache`` in a fresh process, and prints wall time, peak RSS
and how it ended (``--small``: the sizes the tests use). A family holds when the run ends
with exit 0 or one ``error:`` line (no traceback), within its peak-memory bound of 64x the
input + 200 MB, and (with ``--small``) within 60 s; docs/robustness.md lists the families.
Then the hostile-cache and scheduler-address families (cache_attacks.py: planted
payloads, bit flips, ``cp -p`` of same-size content, shared or inaccessible cache roots,
foreign entries, ``ucx://``).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "robustness"))

import attacks  # noqa: E402
import cache_attacks  # noqa: E402
import fuzz_harness  # noqa: E402
import fuzz_mutators  # noqa: E402
import fuzz_seeds  # noqa: E402

OUTCOMES = ["loaded", "loaded-with-skips", "format-error", "crash", "analysis-crash",
            "invalid-trace", "hang", "harness-error"]


def case_rng(importer: str, case: int) -> random.Random:
    return random.Random(f"{importer}:{case}")


def run_one(seeds: dict, importer: str, case: int, work: Path, timeout_s: float,
            analyze_too: bool, cli: bool) -> tuple:
    rng = case_rng(importer, case)
    seed = rng.choice(seeds[importer])
    case_dir = work / f"{importer}-{case}"
    t0 = time.perf_counter()
    try:
        try:
            path, label = fuzz_mutators.make_case(seed, case_dir, rng)
        except Exception as exc:  # a bug in the fuzzer, not in the program under test
            return (importer, case, "?", "harness-error", f"{type(exc).__name__}: {exc}",
                    "fuzz_mutators", time.perf_counter() - t0)
        if cli:
            res = _cli_case(path, timeout_s)
        else:
            res = fuzz_harness.run_case(path, timeout_s=timeout_s, analyze_too=analyze_too)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)
        shutil.rmtree(os.environ["SOFA_GUI_CACHE_DIR"], ignore_errors=True)
    return importer, case, label, res.outcome, res.detail, res.where, time.perf_counter() - t0


def _cli_case(path: Path, timeout_s: float) -> fuzz_harness.CaseResult:
    """``sofa-gui analyze --json PATH``: exit 0 with JSON, or exit 2 with one stderr line."""
    try:
        p = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", "--json", str(path)],
                           capture_output=True, timeout=timeout_s * 3)
    except subprocess.TimeoutExpired:
        return fuzz_harness.CaseResult("hang", "CLI ran past its limit")
    err = p.stderr.decode("utf-8", "replace").strip().splitlines()
    if p.returncode == 0:
        return fuzz_harness.CaseResult("loaded")
    if p.returncode == 2 and len(err) == 1 and err[0].startswith("error: "):
        return fuzz_harness.CaseResult("format-error", err[0][:160])
    last = err[-1][:160] if err else ""
    return fuzz_harness.CaseResult("crash", f"CLI exit {p.returncode}: {last}", "cli")


def _worker(conn, seeds, timeout_s, analyze_too) -> None:
    work = Path(tempfile.mkdtemp(prefix="sofa-fuzz-"))
    os.environ["SOFA_GUI_CACHE_DIR"] = str(work / "cache")
    import warnings

    warnings.simplefilter("ignore")  # numpy overflow warnings on purpose-made garbage
    try:
        while True:
            job = conn.recv()
            if job is None:
                break
            importer, case, cli = job
            conn.send(run_one(seeds, importer, case, work, timeout_s, analyze_too, cli))
    finally:
        shutil.rmtree(work, ignore_errors=True)


class Pool:
    """Workers fed one case at a time, so a stuck one can be killed and replaced."""

    def __init__(self, n, seeds, timeout_s, analyze_too):
        self.args = (seeds, timeout_s, analyze_too)
        self.hard_limit = timeout_s * 4 + 30
        self.ctx = mp.get_context("spawn")  # no fork after pyarrow started threads
        self.workers = [self._spawn() for _ in range(n)]

    def _spawn(self):
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child, *self.args), daemon=True)
        proc.start()
        return {"proc": proc, "conn": parent, "job": None, "since": 0.0}

    def run(self, jobs, on_result):
        jobs = list(jobs)
        while jobs or any(w["job"] for w in self.workers):
            for w in self.workers:
                if w["job"] is None and jobs:
                    w["job"], w["since"] = jobs.pop(), time.monotonic()
                    w["conn"].send(w["job"])
            busy = [w["conn"] for w in self.workers if w["job"]]
            for conn in wait(busy, timeout=1.0):
                w = next(w for w in self.workers if w["conn"] is conn)
                try:
                    on_result(conn.recv())
                except EOFError:  # the worker died (e.g. a segfault in a C library)
                    on_result(self._lost(w, "worker process died"))
                    continue
                w["job"] = None
            for w in self.workers:
                if w["job"] and time.monotonic() - w["since"] > self.hard_limit:
                    on_result(self._lost(w, f"killed after {self.hard_limit:g} s"))

    def _lost(self, w, why) -> tuple:
        importer, case, _ = w["job"]
        w["proc"].kill()
        w["proc"].join()
        w.update(self._spawn())
        outcome = "hang" if "killed" in why else "crash"
        return importer, case, "?", outcome, why, "worker", self.hard_limit

    def close(self):
        for w in self.workers:
            w["conn"].send(None)
            w["proc"].join(5)


def _print_tally(results: list[tuple], importers: list[str], wall: float) -> None:
    by_imp = defaultdict(Counter)
    times = defaultdict(list)
    for imp, _case, _label, outcome, *_rest, dt in results:
        by_imp[imp][outcome] += 1
        times[imp].append(dt)
    head = f"{'importer':<14}{'cases':>7}" + "".join(f"{o:>19}" for o in OUTCOMES)
    print(head + f"{'ms/case p50':>13}{'p99':>8}{'max':>8}")
    for imp in importers:
        c = by_imp[imp]
        t = sorted(times[imp]) or [0.0]
        row = f"{imp:<14}{sum(c.values()):>7}" + "".join(f"{c[o]:>19}" for o in OUTCOMES)
        print(row + f"{t[len(t) // 2] * 1e3:>13.1f}{t[int(len(t) * 0.99)] * 1e3:>8.0f}"
                    f"{t[-1] * 1e3:>8.0f}")
    print(f"total {len(results)} cases in {wall:.0f} s")
    bad = defaultdict(list)
    for imp, case, label, outcome, detail, where, _dt in results:
        if outcome not in fuzz_harness.GOOD:
            bad[(imp, outcome, where, detail[:90])].append((case, label))
    if bad:
        print("\nfailures (count, importer, outcome, where, detail; first case to --replay):")
        for (imp, outcome, where, detail), cases in sorted(bad.items(), key=lambda kv: -len(
                kv[1])):
            case, label = cases[0]
            print(f"{len(cases):>6}  {imp}  {outcome}  {where}  {detail}\n"
                  f"        e.g. --replay {imp}:{case}  ({label})")


def _print_mutations(results: list[tuple]) -> None:
    """Outcome counts per mutation (first label part), to show what each mutation provokes."""
    table = defaultdict(Counter)
    for _imp, _case, label, outcome, *_ in results:
        table[label.split("+")[0].split(":")[0]][outcome] += 1
    print("\nmutation -> outcomes")
    for m in sorted(table):
        print(f"  {m:<22}" + ", ".join(f"{o} {n}" for o, n in table[m].most_common()))


def replay(seeds, spec: str, timeout_s: float) -> int:
    import traceback

    from sofa_gui.core.importers import load_trace

    importer, case = spec.split(":")
    rng = case_rng(importer, int(case))
    seed = rng.choice(seeds[importer])
    work = Path(tempfile.mkdtemp(prefix="sofa-fuzz-replay-"))
    os.environ["SOFA_GUI_CACHE_DIR"] = str(work / "cache")
    path, label = fuzz_mutators.make_case(seed, work / "case", rng)
    print(f"seed {seed}\nmutation {label}\ncase {path}")
    res = fuzz_harness.run_case(path, timeout_s=timeout_s)
    print(f"outcome {res.outcome}: {res.detail} [{res.where}]")
    if not res.ok:
        try:
            trace = load_trace(path, use_cache=False)
            fuzz_harness._cli_outputs(trace, True)
        except Exception:
            traceback.print_exc()
    print(f"(files kept in {work})")
    return 0 if res.ok else 1


def run_attack(family: tuple, work: Path, small: bool, timeout_s: float) -> dict:
    """One attack family through the CLI in a fresh process: outcome, wall s, peak RSS."""
    name, make, full, test_size, env = family
    folder = work / f"attack-{abs(hash(name))}"
    folder.mkdir(parents=True, exist_ok=True)
    # made in a throw-away process: a 200 MB name built here would stay in this process,
    # and a forked child starts with (and reports as its peak) what its parent holds
    with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as pool:
        path = pool.submit(make, folder, *(test_size if small else full)).result()
    files = path.rglob("*") if path.is_dir() else [path] if path.exists() else []
    size = sum(f.stat().st_size for f in files if f.is_file())
    cmd = [sys.executable, "-m", "sofa_gui", "analyze", "--json", "--no-cache", str(path)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    code, usage = _wait_with_usage(proc, timeout_s)
    reader.join(5)
    lines = b"".join(err).decode("utf-8", "replace").strip().splitlines()
    traceback_seen = any("Traceback" in ln for ln in lines)
    last = lines[-1] if lines else ""
    if last.startswith("error: ") and str(path) in last:  # the reason, not the temp path
        last = "error: " + last.split(str(path), 1)[1].lstrip(": ")
    wall, rss = time.perf_counter() - t0, usage.ru_maxrss / 1024
    bound = 64 * size / 2**20 + 200  # MB: 64x the input + 200 MB
    return dict(name=name, size=size, code=code, wall=wall, rss=rss, first=last, bound=bound,
                ok=code in (0, 2) and not traceback_seen and len(lines) <= 2 and rss <= bound
                and (not small or wall <= 60))


def _wait_with_usage(proc, timeout_s: float):
    """(exit code or "hang", resource usage of that one child)."""
    end = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if time.monotonic() > end:
            proc.kill()
            _, _, usage = os.wait4(proc.pid, 0)
            proc.returncode = -9
            return "hang", usage
        time.sleep(0.05)


def attacks_main(small: bool, timeout_s: float, only: list[str] | None = None) -> int:
    work = Path(tempfile.mkdtemp(prefix="sofa-attacks-"))
    head = (f"{'attack family':<50} {'input':>10} {'exit':>5} {'wall s':>7} {'peak RSS':>9} "
            f"{'bound':>8}  ok  ends")
    print(head)
    print("-" * len(head))
    ok = True
    try:
        for fam in attacks.FAMILIES:
            if only and not any(o.lower() in fam[0].lower() for o in only):
                continue
            r = run_attack(fam, work, small, timeout_s)
            ok &= r["ok"]
            print(f"{r['name']:<50} {r['size'] / 1024:>8.0f}KB {r['code']!s:>5} "
                  f"{r['wall']:>7.1f} {r['rss']:>6.0f} MB {r['bound']:>5.0f} MB  "
                  f"{'yes' if r['ok'] else 'NO ':<3} {r['first'][:90]}", flush=True)
        ok &= run_cache_families(work, small, timeout_s, only)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def run_cache_families(work: Path, small: bool, timeout_s: float,
                       only: list[str] | None) -> bool:
    """The hostile-cache and scheduler-address families (cache_attacks.py), one row each
    (no input size or peak RSS: each runs the CLI several times)."""
    ok = True
    for fam in cache_attacks.CACHE_FAMILIES:
        if only and not any(o.lower() in fam[0].lower() for o in only):
            continue
        r = cache_attacks.run_family(fam, work, small, timeout_s)
        ok &= r.ok
        print(f"{fam[0]:<50} {'':>10} {r.code!s:>5} {r.wall:>7.1f} {'':>9}  "
              f"{'' if r.ok else 'FAILED: '}{r.ends[:90]}", flush=True)
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attacks", action="store_true", help="run the hostile-input families")
    ap.add_argument("--small", action="store_true", help="with --attacks: the test sizes")
    ap.add_argument("--cases", type=int, default=10_000, help="cases per importer")
    ap.add_argument("--cli", type=int, default=20, help="extra cases per importer via the CLI")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per case")
    ap.add_argument("--only", action="append",
                    help="importer module name(s); with --attacks: part of a family's name")
    ap.add_argument("--no-analyze", action="store_true", help="load only, skip analyze()")
    ap.add_argument("--seeds", default=os.path.join(tempfile.gettempdir(), "sofa-fuzz-seeds"))
    ap.add_argument("--replay", metavar="IMPORTER:CASE")
    args = ap.parse_args(argv)
    if args.attacks:
        return attacks_main(args.small, max(args.timeout, 600.0), args.only)

    t0 = time.perf_counter()
    seeds = fuzz_seeds.build_seeds(Path(args.seeds))
    print(f"seeds ({time.perf_counter() - t0:.1f} s): " + "; ".join(
        f"{k}: {', '.join(p.name for p in v)}" for k, v in sorted(seeds.items())))
    if args.replay:
        return replay(seeds, args.replay, args.timeout)
    importers = [k for k in sorted(seeds) if not args.only or k in args.only]
    jobs = [(imp, case, False) for case in range(args.cases) for imp in importers]
    jobs += [(imp, 10**9 + case, True) for case in range(args.cli) for imp in importers]
    jobs.reverse()  # Pool pops from the end
    results: list[tuple] = []
    t0 = time.perf_counter()
    pool = Pool(args.workers, seeds, args.timeout, not args.no_analyze)
    step = max(1, len(jobs) // 20)

    def collect(r):
        results.append(r)
        if len(results) % step == 0:
            print(f"  {len(results)}/{len(jobs)} cases, {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr, flush=True)

    try:
        pool.run(jobs, collect)
    finally:
        pool.close()
    _print_tally(results, importers, time.perf_counter() - t0)
    _print_mutations(results)
    return 0 if all(r[3] in fuzz_harness.GOOD for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
