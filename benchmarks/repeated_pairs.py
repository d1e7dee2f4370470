"""The input-bound pair's rounds as repeated diffs: is one pair enough, or three?

    python benchmarks/repeated_pairs.py OUT [OUT ...]

``OUT``: folders written by ``gen_advice_runs.py --out OUT --only input_nw0 --only input_nw1
--rounds N`` (``OUT/`` and ``OUT/rK/``).  Prints each round's estimate against its own
measured steady-state speed-up, then for every k consecutive rounds (k = 1, 3, 5) what
``sofa-gui diff B1 A1 ... Bk Ak`` reads (median runs against the median prediction): how
many of those groups are within 25%, and all rounds as one repeated diff.
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sofa_gui.core.analysis.diff import diff_analyses  # noqa: E402
from sofa_gui.core.analysis.diff_repeated import summarize  # noqa: E402
from sofa_gui.core.analysis.pipeline import analyze  # noqa: E402
from sofa_gui.core.importers import load_trace  # noqa: E402


def rounds_of(out: Path) -> list[Path]:
    more = sorted(out.glob("r[0-9]*"), key=lambda d: int(d.name[1:]))
    return [d for d in [out, *more] if (d / "input_nw0.json.gz").exists()]


def _pair(folder: Path) -> tuple:
    return tuple((t, analyze(t)) for t in (load_trace(folder / f"input_nw{k}.json.gz")
                                           for k in (0, 1)))


def group_lines(rounds: list[dict], ks=(1, 3, 5)) -> list[str]:
    """For every k, how many runs of k consecutive rounds (``diff_analyses`` results),
    each read as one repeated diff, are within 25% of their prediction."""
    lines = []
    for k in ks:
        errs = [summarize(rounds[i:i + k])["prediction"]["error"]
                for i in range(len(rounds) - k + 1)]
        if errs:
            lines.append(f"every {k} consecutive round(s): {sum(abs(e) <= 0.25 for e in errs)}"
                         f" of {len(errs)} within 25% ({100 * min(errs):+.0f}% .. "
                         f"{100 * max(errs):+.0f}%, median |error| "
                         f"{100 * median(map(abs, errs)):.0f}%)")
    return lines


def main(argv: list[str]) -> int:
    folders = [f for arg in argv for f in rounds_of(Path(arg))]
    if not folders:
        print("no rounds found (OUT/input_nw0.json.gz, OUT/rK/...)")
        return 2
    rounds = [diff_analyses(*_pair(f)) for f in folders]
    r = summarize(rounds)
    p = r["prediction"]
    for i, f in enumerate(folders):
        est = rounds[i]["prediction"]["predicted_speedup"]
        meas = r["per_pair_speedup"][i]
        print(f"{str(f)[-40:]:40s} estimate {est:.2f}x  measured {meas:.2f}x  "
              f"({100 * (est / meas - 1):+.0f}%)")
    print(f"all {len(rounds)} rounds as one repeated diff: predicted "
          f"{p['predicted_speedup']:.2f}x, measured {r['measured_speedup']:.2f}x "
          f"({100 * p['error']:+.0f}%)")
    print("\n".join(group_lines(rounds)))
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
