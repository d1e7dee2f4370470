"""Per-rank progress on a terminal: one cell per rank (or per group of ranks).

On a TTY the bar is redrawn in place (``.`` waiting, ``#`` done, ``x`` failed);
otherwise one line per finished rank, so logs stay readable.
"""

from __future__ import annotations

import sys
import time

from .summary import RankSummary

WIDTH = 64


class RankBar:
    def __init__(self, ranks: list[int], stream=None, tty: bool | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.slot = {r: i for i, r in enumerate(ranks)}
        self.state = ["."] * len(ranks)
        self.done = self.failed = 0
        self.t0 = time.perf_counter()
        if self.tty:
            self._draw()

    def cells(self) -> str:
        """At most WIDTH cells; a cell covering several ranks shows the worst state."""
        n = len(self.state)
        if n <= WIDTH:
            return "".join(self.state)
        out = []
        for k in range(WIDTH):
            group = self.state[k * n // WIDTH:(k + 1) * n // WIDTH]
            out.append("x" if "x" in group else "." if "." in group else "#")
        return "".join(out)

    def update(self, s: RankSummary) -> None:
        i = self.slot.get(s.rank)
        if i is not None:
            self.state[i] = "#" if s.ok else "x"
        self.done += 1
        self.failed += 0 if s.ok else 1
        if self.tty:
            self._draw()
        else:
            what = f"failed: {s.error}" if not s.ok else (
                f"{len(s.durations)} iterations, {s.events:,} events, {s.seconds:.1f} s"
                + (" (cached)" if s.from_cache else ""))
            self.stream.write(f"rank {s.rank} {what} [{self.done}/{len(self.state)}]\n")
            self.stream.flush()

    def _draw(self) -> None:
        el = time.perf_counter() - self.t0
        fail = f", {self.failed} failed" if self.failed else ""
        self.stream.write(f"\r[{self.cells()}] {self.done}/{len(self.state)} ranks{fail}"
                          f" {el:.1f} s")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
