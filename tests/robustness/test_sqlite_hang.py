"""An 8 KB SQLite whose kernel "table" is a recursive VIEW must not hang the import.

Only real tables are read, and every query runs under a progress handler that stops it
on Cancel (the app) or Ctrl-C (the CLI: a real SIGINT in these tests).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

from attacks import ENDLESS_QUERY, recursive_view_sqlite
from hostile import ROOT, assert_one_line_error, run_cli

from sofa_gui.core.importers.nsys.db import NsysDb
from sofa_gui.core.progress import Cancelled, CancelToken

ENDLESS = ENDLESS_QUERY


def test_recursive_view_as_kernel_table_does_not_hang(tmp_path):
    db = recursive_view_sqlite(tmp_path)
    assert db.stat().st_size <= 16 * 1024
    proc = run_cli(["analyze", "--no-cache", str(db)], timeout=60)
    err = assert_one_line_error(proc, 2)
    assert "not an Nsight Systems export" in err


# The child takes SIGINT as a terminal's Ctrl-C delivers it, even when pytest itself was
# started with SIGINT ignored (in the background), which the child would inherit.
CHILD = textwrap.dedent("""
    import signal, sqlite3, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from sofa_gui.core.importers.nsys.db import NsysDb
    from sofa_gui.core.progress import NullProgress
    db = NsysDb(sqlite3.connect(":memory:"), NullProgress())
    print("ready", flush=True)
    try:
        db.ints("SELECT count(*) FROM (%s)", 1, NullProgress(), 1, "")
    except sqlite3.OperationalError as exc:
        if isinstance(db.why_stopped(exc), KeyboardInterrupt):
            print("interrupted", flush=True)
            sys.exit(130)
    sys.exit(1)
""") % ENDLESS


def test_ctrl_c_stops_an_endless_query():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)  # inside the query
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
        assert time.monotonic() - t0 < 5
        assert "interrupted" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cancel_stops_an_endless_query_and_frees_the_thread():
    token = CancelToken()
    db = NsysDb(sqlite3.connect(":memory:", check_same_thread=False), token)
    outcome = []

    def work():
        try:
            db.ints(f"SELECT count(*) FROM ({ENDLESS})", 1, token, 1, "")
        except sqlite3.OperationalError as exc:
            outcome.append(type(db.why_stopped(exc)))

    t = threading.Thread(target=work, daemon=True)
    t.start()
    time.sleep(0.3)
    token.cancel()
    t.join(10)
    assert not t.is_alive(), "the query kept running after Cancel"
    assert outcome == [Cancelled]
