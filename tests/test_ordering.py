"""SOFA_GUI_TEST_ORDER: the suite runs as collected, reversed or shuffled from a seed,
each module's tests kept together."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from ordering import Order, parse_order, reorder


@dataclass(frozen=True)
class Item:
    path: Path
    name: str


ITEMS = [Item(Path(m), f"{m}::{t}") for m in ("a.py", "b.py", "c.py") for t in "xyz"]


def names(items):
    return [i.name for i in items]


def modules_stay_together(items):
    seen = [i.path for n, i in enumerate(items) if n == 0 or items[n - 1].path != i.path]
    return len(seen) == len(set(seen))


def test_unset_keeps_pytests_order():
    assert parse_order(None) == Order("collected")
    assert names(reorder(ITEMS, parse_order(""))) == names(ITEMS)


def test_reverse_runs_the_last_module_first_and_its_tests_backwards():
    out = reorder(ITEMS, parse_order("reverse"))
    assert names(out) == names(ITEMS)[::-1]
    assert modules_stay_together(out)


def test_a_seed_repeats_its_shuffle_and_keeps_modules_together():
    a = reorder(ITEMS, parse_order("random:7"))
    assert names(a) == names(reorder(ITEMS, parse_order("random:7")))
    assert sorted(names(a)) == sorted(names(ITEMS))
    assert modules_stay_together(a)
    shuffles = {tuple(names(reorder(ITEMS, Order("random", s)))) for s in range(20)}
    assert len(shuffles) > 1


def test_random_without_a_seed_picks_one_and_says_how_to_repeat_it():
    order = parse_order("random")
    assert order.seed is not None
    assert f"SOFA_GUI_TEST_ORDER=random:{order.seed}" in order.describe()


@pytest.mark.parametrize("value, problem", [
    ("backwards", "the order is one of collected, reverse, random"),
    ("reverse:3", "only random takes a seed"),
    ("random:x", "the seed is a whole number")])
def test_a_bad_value_is_one_line_naming_it(value, problem):
    with pytest.raises(ValueError, match=problem) as e:
        parse_order(value)
    assert repr(value) in str(e.value) and "\n" not in str(e.value)
