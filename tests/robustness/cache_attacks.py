"""Hostile caches and cluster addresses: each family runs the CLI as an attacker arranged.

A family prepares a cache (or an address) the way a hostile user or a damaged disk
would, runs ``sofa-gui analyze --json`` (or ``fleet``) in a fresh process and checks what
the program must do: exit 0 with the analysis of the trace as it is (never a result for
other content, never code the cache named), at most one warning line and no traceback.
``benchmarks/fuzz.py --attacks`` runs them after the input families and prints one row
each; the tests in ``tests/core`` and ``tests/fleet`` cover the same cases in-process.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "data" / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
MAGIC = b"sofa-gui-analysis\x01"  # sofa_gui.core.analysis.cache.MAGIC


@dataclass
class Outcome:
    ok: bool
    code: object
    wall: float
    ends: str


def _run(args: list[str], cache: Path, timeout_s: float, env: dict | None = None):
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    run_env.update(PYTHONPATH=str(ROOT), SOFA_GUI_CACHE_DIR=str(cache), **(env or {}))
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "sofa_gui", *args], capture_output=True,
                           text=True, env=run_env, timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return "hang", "", ["hang"], time.perf_counter() - t0
    return p.returncode, p.stdout, p.stderr.strip().splitlines(), time.perf_counter() - t0


def _trace(work: Path) -> Path:
    src = work / "trace.json"
    src.write_bytes(gzip.decompress(SOURCE.read_bytes()))
    return src


def _judge(res, expect_stdout: str | None, max_lines: int = 1) -> Outcome:
    code, out, err, wall = res
    ok = (code == 0 and not any("Traceback" in ln for ln in err) and len(err) <= max_lines
          and (expect_stdout is None or out == expect_stdout))
    ends = err[-1] if err else ("same output" if expect_stdout is not None else "")
    return Outcome(ok, code, wall, ends)


def _analysis_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("*/analysis-*.msgpack"))


def _signed(body: bytes) -> bytes:
    return MAGIC + hashlib.sha256(body).digest() + body


def planted_payload(work: Path, timeout_s: float, payload) -> Outcome:
    """A cached analysis replaced by ``payload`` (with a valid checksum): refused."""
    src, cache, marker = _trace(work), work / "cache", work / "ran"
    _run(["analyze", "--json", str(src)], cache, timeout_s)
    cold = _run(["analyze", "--json", "--no-cache", str(src)], cache, timeout_s)[1]
    body = payload if isinstance(payload, bytes) else msgspec.msgpack.encode(
        [x.replace("MARKER", str(marker)) if isinstance(x, str) else x for x in payload])
    for f in _analysis_files(cache):
        f.write_bytes(_signed(body))
    out = _judge(_run(["analyze", "--json", str(src)], cache, timeout_s), cold)
    if marker.exists():
        return Outcome(False, out.code, out.wall, "the planted payload ran")
    return out


def flipped_bits(work: Path, timeout_s: float, flips: int) -> Outcome:
    """``flips`` one-bit flips in the cached analysis, one per run: never a wrong result."""
    src, cache = _trace(work), work / "cache"
    cold = _run(["analyze", "--json", str(src)], cache, timeout_s)[1]
    (f,) = _analysis_files(cache)
    good, rng, wall = f.read_bytes(), random.Random(flips), 0.0
    for _ in range(flips):
        bad = bytearray(good)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        f.write_bytes(bytes(bad))
        out = _judge(_run(["analyze", "--json", str(src)], cache, timeout_s), cold)
        wall += out.wall
        if not out.ok:
            return out
    return Outcome(True, 0, wall, f"{flips} flips: same output, {out.ends}")


def same_size_copy(work: Path, timeout_s: float) -> Outcome:
    """New content of the same size and mtime copied over the trace with ``cp -p``."""
    src, cache = _trace(work), work / "cache"
    _run(["analyze", "--json", str(src)], cache, timeout_s)
    other = work / "other.json"
    other.write_bytes(src.read_bytes().replace(b'"name": "Memcpy HtoD', b'"name": "Memcpy XtoX'))
    st = os.stat(src)
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    subprocess.run(["cp", "-p", str(other), str(src)], check=True)
    fresh = _run(["analyze", "--json", "--no-cache", str(src)], cache, timeout_s)[1]
    return _judge(_run(["analyze", "--json", str(src)], cache, timeout_s), fresh, 0)


def cache_root_mode(work: Path, timeout_s: float, mode: int) -> Outcome:
    """A cache root with ``mode`` (shared 1777, or 000): no cache, one warning."""
    src, cache = _trace(work), work / "cache"
    cache.mkdir()
    os.chmod(cache, mode)
    try:
        out = _judge(_run(["analyze", "--json", str(src)], cache, timeout_s), None)
        os.chmod(cache, 0o700)
        if any(cache.iterdir()):
            return Outcome(False, out.code, out.wall, "wrote into the refused cache")
    finally:
        os.chmod(cache, 0o700)
    return out


def foreign_entry(work: Path, timeout_s: float) -> Outcome:
    """An entry owned by another user (needs root to arrange): never read."""
    if os.geteuid() != 0:
        return Outcome(True, "-", 0.0, "skipped: giving a file away needs root")
    src, cache = _trace(work), work / "cache"
    cold = _run(["analyze", "--json", str(src)], cache, timeout_s)[1]
    for f in cache.glob("*/*"):
        os.chown(f, 4242, -1)
    return _judge(_run(["analyze", "--json", str(src)], cache, timeout_s), cold)


def scheduler_address(work: Path, timeout_s: float, address: str) -> Outcome:
    """``fleet --scheduler ADDRESS`` that cannot be used: exit 2 with one line."""
    code, _, err, wall = _run(["fleet", str(ROOT / "tests" / "data" / "ranks"), "--scheduler",
                               address], work / "cache", timeout_s)
    ok = code == 2 and len(err) == 1 and "Traceback" not in err[0]
    return Outcome(ok, code, wall, err[-1] if err else "")


_CALL = ["E", "sofa_gui.core.analysis.cache:os.system", "touch MARKER"]
#: (family, function, args at full size, args at test size)
CACHE_FAMILIES = [
    ("cache: planted os.system enum (valid checksum)", planted_payload, (_CALL,), (_CALL,)),
    ("cache: planted os:system class", planted_payload,
     (["C", "os:system", [], []],), (["C", "os:system", [], []],)),
    ("cache: planted pickle", planted_payload, (b"cos\nsystem\n(S'true'\ntR.",),
     (b"cos\nsystem\n(S'true'\ntR.",)),
    ("cache: planted object-dtype array", planted_payload,
     (["A", "|O", [1], b"\0" * 8],), (["A", "|O", [1], b"\0" * 8],)),
    ("cache: one-bit flips in the analysis", flipped_bits, (40,), (4,)),
    ("cache: cp -p of same-size new content", same_size_copy, (), ()),
    ("cache: shared 1777 cache root", cache_root_mode, (0o1777,), (0o1777,)),
    ("cache: cache root mode 000", cache_root_mode, (0,), (0,)),
    ("cache: entry owned by another user", foreign_entry, (), ()),
    ("fleet: --scheduler ucx://", scheduler_address, ("ucx://127.0.0.1:1234",),
     ("ucx://127.0.0.1:1234",)),
    ("fleet: --scheduler tls:// without credentials", scheduler_address,
     ("tls://127.0.0.1:9",), ("tls://127.0.0.1:9",)),
]


def run_family(family: tuple, work: Path, small: bool, timeout_s: float) -> Outcome:
    """One family in a fresh folder under ``work`` (removed afterwards)."""
    name, fn, full, test_size = family
    folder = work / f"cache-attack-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    folder.mkdir(parents=True)
    try:
        return fn(folder, timeout_s, *(test_size if small else full))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
