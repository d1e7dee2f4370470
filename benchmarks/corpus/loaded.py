"""Capture corpus cases on a loaded machine: a CPU hog runs beside each capture.

    python benchmarks/corpus/loaded.py run_torch.py --only CASE ... --out DIR [--hogs 1]
    $TF_VENV/bin/python benchmarks/corpus/loaded.py run_tf.py --only CASE ... --out DIR
    python benchmarks/diagnosis.py --corpus DIR --markdown

Users profile on machines that other work shares, where absolute times stretch and vary.
Per case this starts ``--hogs`` busy-looping processes, takes ``--captures`` captures with
the case's generator (the same loop and profiler settings as the corpus) into
``DIR/<case>/``, stops the hogs and copies the committed ``truth.json`` (measured on a quiet
machine, without the profiler) beside them, with its ``captures`` list naming the new
captures: the scorer then judges the loaded captures against the quiet truth.  Nothing under
``tests/data/corpus`` is written.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[1] / "tests" / "data" / "corpus"
HOG = "while True: pass"


def load_driver(script: str):
    """The generator's ``DRIVER``, with the thread settings its ``__main__`` applies."""
    spec = importlib.util.spec_from_file_location(Path(script).stem, HERE / script)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    if script == "run_torch.py":
        mod.torch.set_num_threads(1)
    elif script == "run_tf.py":
        mod.tf.config.threading.set_inter_op_parallelism_threads(2)
        mod.tf.config.threading.set_intra_op_parallelism_threads(1)
    return mod.DRIVER


def capture_loaded(driver, name: str, captures: int, hogs: int, out: Path) -> list[str]:
    from corpus.common import CASES, gzip_profiles, truth_text

    procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
    names = []
    try:
        for k in range(1, captures + 1):
            dest = out / name / f"capture-{k}{driver.suffix}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            driver.capture(CASES[name], dest)
            gzip_profiles(dest)
            names.append(dest.name)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    truth = json.loads((CORPUS / name / "truth.json").read_text())
    truth["captures"] = names
    truth["loaded"] = {"hogs": hogs}
    (out / name / "truth.json").write_text(truth_text(truth))
    return names


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("script", choices=["run_torch.py", "run_tf.py", "run_jax.py"])
    ap.add_argument("--only", nargs="+", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--captures", type=int, default=1)
    ap.add_argument("--hogs", type=int, default=1)
    args = ap.parse_args(argv)
    if args.out.resolve() == CORPUS.resolve():
        ap.error("--out must not be the committed corpus")
    driver = load_driver(args.script)
    for name in args.only:
        print(name, capture_loaded(driver, name, args.captures, args.hogs, args.out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
