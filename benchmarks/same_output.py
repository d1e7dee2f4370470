"""Does a change keep ``sofa-gui analyze --json --no-cache`` byte-identical?

Speed work on the load and the analysis must not move any result. This runs the CLI of
one checkout on every test trace (the analysis cache test's list) plus any extra files
and stores each document; ``--compare`` then lists the traces whose documents differ
(the output has no timing fields, so documents are compared whole).

    python3 benchmarks/same_output.py --root ../base-checkout --out docs-base [extra files]
    python3 benchmarks/same_output.py --root . --out docs-new [extra files]
    python3 benchmarks/same_output.py --compare docs-base docs-new
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SHARED = ROOT.parent / "shared" / "traces" / "public"


def traces() -> list[Path]:
    """The traces ``tests/core/test_analysis_cache.py`` checks (the demo sample first)."""
    out = [ROOT / "resources" / "samples" / "resnet50_num_workers_0.pt.trace.json.gz",
           DATA / "ranks",
           DATA / "recording-torch-pyspy", DATA / "sofa-demo-sofalog",
           DATA / "sofa-deepprof-gputrace" / "gputrace.csv",
           *sorted((DATA / "kineto").glob("*.json.gz")), *sorted((DATA / "xplane").glob("*.pb")),
           *sorted((DATA / "torch-loops").glob("*.json.gz")),
           *sorted(p for p in (DATA / "tf").iterdir() if p.is_dir())]
    if SHARED.is_dir():
        out += sorted(SHARED.rglob("*.json.gz"))
    return [p for p in out if p.exists()]


def _label(path: Path) -> str:
    return hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10] + "-" + path.name


def dump(root: Path, out: Path, extra: list[Path], parts: str | None) -> int:
    """Each trace's document under ``out``; the number of traces that failed."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(root.resolve())}
    if parts:
        env["SOFA_GUI_DECODE_PARTS"] = parts
    failed = 0
    index = {}
    for path in [*traces(), *extra]:
        r = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(path), "--json",
                            "--no-cache"], capture_output=True, text=True, env=env,
                           cwd=str(root), timeout=1800)
        name = _label(path)
        index[name] = str(path)
        (out / name).write_text(r.stdout if r.returncode == 0 else f"rc {r.returncode}\n"
                                + r.stderr[-2000:])
        failed += r.returncode != 0
        print(f"{'ok ' if r.returncode == 0 else 'ERR'} {path}", flush=True)
    (out / "index.json").write_text(json.dumps(index, indent=1))
    return failed


def compare(a: Path, b: Path) -> int:
    """Prints the traces whose documents differ; how many."""
    ia = json.loads((a / "index.json").read_text())
    ib = json.loads((b / "index.json").read_text())
    bad = 0
    for name, path in ia.items():
        if name not in ib:
            print(f"only in {a}: {path}")
            bad += 1
        elif (a / name).read_bytes() != (b / name).read_bytes():
            print(f"DIFFERS: {path}")
            bad += 1
    print(f"{len(ia) - bad} of {len(ia)} identical")
    return bad


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("extra", nargs="*", type=Path, help="more trace files")
    p.add_argument("--root", type=Path, default=ROOT, help="checkout whose CLI runs")
    p.add_argument("--out", type=Path, help="folder for the documents")
    p.add_argument("--parts", help="SOFA_GUI_DECODE_PARTS for the runs")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = p.parse_args()
    if args.compare:
        sys.exit(1 if compare(*args.compare) else 0)
    if args.out is None:
        p.error("--out or --compare is needed")
    sys.exit(1 if dump(args.root, args.out, args.extra, args.parts) else 0)


if __name__ == "__main__":
    main()
