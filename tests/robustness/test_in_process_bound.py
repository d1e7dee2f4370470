"""What the app decodes inside its own process is small, and bounded.

Sources under 4 MiB (decoded) load in the app's process. A gzip is measured
decompressed (guessed as 20x its size, a 200 KB gzip of 1 GB would load in-process);
and every hostile family the app would load in-process allocates at
most a bounded number of bytes per input byte (tracemalloc peak).
"""

from __future__ import annotations

import tracemalloc

import attacks
import pytest

from sofa_gui.app.background_load import decoded_bytes
from sofa_gui.app.jobs import CHILD_MIN_DECODED_BYTES, wants_child
from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace

IN_PROCESS = [f for f in attacks.FAMILIES if f[1] is not attacks.symlink_loop
              and f[1] is not attacks.recursive_view_sqlite]


def test_a_small_gzip_that_decodes_big_goes_to_the_child(tmp_path):
    path = attacks.trailing_blank_gzip(tmp_path, 16 << 20, "array")
    assert path.stat().st_size * 20 < CHILD_MIN_DECODED_BYTES  # main's guess: in-process
    assert decoded_bytes(path, CHILD_MIN_DECODED_BYTES) == CHILD_MIN_DECODED_BYTES
    assert wants_child(path, "auto")
    small = attacks.trailing_blank_gzip(tmp_path, 1 << 20, "after")
    assert decoded_bytes(small, 1 << 30) > 1 << 20
    assert not wants_child(small, "auto")


def test_folder_counts_its_gzip_files_decompressed(tmp_path):
    for k in range(3):
        attacks.trailing_blank_gzip(tmp_path, 2 << 20, "after").rename(tmp_path / f"r{k}.gz")
    assert wants_child(tmp_path, "auto")


def test_one_unreadable_file_does_not_hide_the_folder_size(tmp_path, monkeypatch):
    # decoded_bytes returned 0 for the whole folder when one file could not be opened,
    # so a folder of gigabytes would have loaded inside the app's process
    import builtins

    import sofa_gui.app.background_load as bl
    for k in range(3):
        attacks.trailing_blank_gzip(tmp_path, 2 << 20, "after").rename(tmp_path / f"r{k}.gz")
    (tmp_path / "locked.json").write_text("{}")

    def no_access(file, *args, **kw):
        if str(file).endswith("locked.json"):
            raise PermissionError(13, "Permission denied", str(file))
        return builtins.open(file, *args, **kw)

    monkeypatch.setattr(bl, "open", no_access, raising=False)
    assert decoded_bytes(tmp_path, 1 << 30) > 6 << 20
    assert wants_child(tmp_path, "auto")


@pytest.mark.parametrize("family", IN_PROCESS, ids=[f[0] for f in IN_PROCESS])
def test_every_load_is_bounded_per_input_byte(tmp_path, family, monkeypatch):
    # in the app's process or in its child (which the app also must not see swell past
    # the machine: 200 MB of blanks inside the events array took 737 MB), the stated
    # bound: 64 bytes allocated per decoded input byte + 16 MiB
    _, make, _, small_args, env = family
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    path = make(tmp_path, *small_args)
    size = decoded_bytes(path, 1 << 40)
    load_trace(attacks.many_threads(tmp_path, 2), use_cache=False)  # imports done
    tracemalloc.start()
    try:
        load_trace(path, use_cache=False)
    except TraceFormatError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 64 * size + (16 << 20), f"{peak / 2**20:.0f} MiB for {size:,} bytes"
