"""The order the suite runs in, chosen by ``SOFA_GUI_TEST_ORDER``.

A test that passes only after another one (a cache it fills, a Qt object it leaves, an
environment variable or signal handler it sets) shows up when the order changes:

- unset or ``collected``: pytest's own order;
- ``reverse``: the modules in reverse order, and the tests of each module in reverse;
- ``random`` or ``random:SEED``: the modules shuffled, and the tests of each module
  shuffled, from SEED (a new one when none is given; the run names it in pytest's
  header and at its end, so ``SOFA_GUI_TEST_ORDER=random:SEED`` repeats a failing order).

The tests of one module stay together, so a module-scoped fixture is still set up once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

VARIABLE = "SOFA_GUI_TEST_ORDER"
MODES = ("collected", "reverse", "random")


@dataclass(frozen=True)
class Order:
    mode: str = "collected"
    seed: int | None = None

    def describe(self) -> str:
        if self.mode == "random":
            repeat = f"{VARIABLE}=random:{self.seed}"
            return f"test order: random (seed {self.seed}; {repeat} repeats it)"
        return f"test order: {self.mode}"


def parse_order(value: str | None) -> Order:
    """The order ``value`` (the variable's text) asks for; ValueError names what is wrong."""
    mode, _, seed = (value or "collected").strip().partition(":")
    if mode not in MODES:
        raise ValueError(f"{VARIABLE}={value!r}: the order is one of {', '.join(MODES)}")
    if mode != "random":
        if seed:
            raise ValueError(f"{VARIABLE}={value!r}: only random takes a seed")
        return Order(mode)
    if not seed:
        return Order(mode, random.SystemRandom().randrange(10**6))
    if not seed.isdigit():
        raise ValueError(f"{VARIABLE}={value!r}: the seed is a whole number")
    return Order(mode, int(seed))


def _by_module(items: list) -> list[list]:
    groups: dict[object, list] = {}
    for item in items:
        groups.setdefault(item.path, []).append(item)
    return list(groups.values())


def reorder(items: list, order: Order) -> list:
    """``items`` (pytest's collected tests, anything with a ``path``) in ``order``."""
    if order.mode == "collected":
        return list(items)
    groups = _by_module(items)
    if order.mode == "reverse":
        return [item for group in reversed(groups) for item in reversed(group)]
    rng = random.Random(order.seed)
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    return [item for group in groups for item in group]
