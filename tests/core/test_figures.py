"""The run's numbers defined once: step durations, the labelled device window, the one
median, and the times a user types (from the trace start, with units)."""

from __future__ import annotations

import pytest
from surfaces import file_steps, trace_path

from sofa_gui.core.analysis.figures import device_window_text, device_window_texts, median_ns
from sofa_gui.core.analysis.iterations import detect_iterations
from sofa_gui.core.importers import load_trace
from sofa_gui.core.units import parse_time, parse_time_range


def test_the_last_step_is_its_annotation_and_its_device_tail_a_labelled_window():
    """HTA negative_queue rank 0: ProfilerStep#554 is 216.2 ms in the file; the device
    works on 158 ms past it (the closing cudaDeviceSynchronize waits for that)."""
    it = detect_iterations(load_trace(trace_path("negative_queue")))
    assert it.durations.tolist() == [d for _n, d in file_steps("negative_queue")]
    assert device_window_text(it, 4) == "device 213 ms, ends 158 ms after the step"
    assert device_window_texts(it)[0] == "device 368 ms, ends 162 ms after the step"
    assert it.median_index == 2 and median_ns(it) == file_steps("negative_queue")[2][1]


def test_no_device_window_when_the_device_keeps_up():
    it = detect_iterations(load_trace(trace_path("nccl_data")))
    assert not it.device_lags and device_window_texts(it) == [""] * len(it)


@pytest.mark.parametrize("text, ns", [("100000", 100_000_000), ("120ms", 120_000_000),
                                      ("1.5 s", 1_500_000_000), ("250us", 250_000),
                                      ("250µs", 250_000), ("7ns", 7),
                                      ("1623142623460016", 1623142623460016000)])
def test_typed_times_have_units_and_bare_numbers_are_microseconds(text, ns):
    assert parse_time(text) == ns


def test_ranges_count_from_the_trace_start_unless_absolute():
    t0, t1 = 1_000_000_000, 2_000_000_000
    assert parse_time_range("120ms:250ms", t0, t1) == (t0 + 120_000_000, t0 + 250_000_000)
    assert parse_time_range("0:100000", t0, t1) == (t0, t0 + 100_000_000)
    assert parse_time_range("abs:1000000:1100000", t0, t1) == (t0, t0 + 100_000_000)
    for bad, says in (("5:1", "START < END"), ("x:1", "--range wants"), ("2s:3s", "outside"),
                      ("0:inf", "--range wants"), ("1:2:3", "--range wants")):
        with pytest.raises(ValueError, match=says):
            parse_time_range(bad, t0, t1)
