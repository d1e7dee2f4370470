"""Copies inside a compiled program: a jitted update that scatters rows into two large
embedding tables without donating them makes XLA copy each whole table every call
(``copy.4``, a thunk of its own).  The reading names those copies, memory traffic, with
donation as the fix and a lower-bound estimate; programs whose copy thunks are few and
short (a jitted CNN, an Ising sweep of tiny copies) have none."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, findings_by_id

#: measured without the profiler: donate_argnums=0, 5.23x
DONATED = 5.23


@pytest.mark.parametrize("k", [0, 1])
def test_an_undonated_table_update_names_the_copies_and_donation(k):
    _, a = corpus_analysis("jax_train_mf_scatter_no_donate", k)
    f = findings_by_id(a)["memory_copy_bound"]
    assert f.title == "Copies inside the compiled program" and "copy.4" in f.summary
    assert [x.name for x in f.fixes][0] == "donate the updated arrays"
    assert f.estimate_floor and 1.0 < f.estimated_speedup <= DONATED  # a floor that holds
    assert a.verdict.shares["memory_copies"] > 0.1  # moved out of compute


@pytest.mark.parametrize("case", ["jax_train_jit", "jax_train_ising_sweep_loop",
                                  "jax_train_list_batches", "jax_train_scan_char_rnn"])
def test_short_or_few_copy_thunks_name_no_copies(case):
    _, a = corpus_analysis(case, 0)
    assert "memory_copy_bound" not in findings_by_id(a)


def test_the_donation_fix_stays_off_host_copies():
    _, a = corpus_analysis("pt_train_memcopy", 0)
    f = findings_by_id(a)["memory_copy_bound"]
    assert "donate the updated arrays" not in [x.name for x in f.fixes]
