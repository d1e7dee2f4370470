"""A loop over a sequence's positions read on small captures taken here with
``torch.profiler``: the positions picked by one op that returns them all as pieces
(``unbind`` / ``split`` / ``chunk``, then the module once per piece), the picking op's own
backward required before the autograd repeats count as the loop's backward, and a capture
without input shapes that says nothing (what the pieces are is not recorded).
"""

from __future__ import annotations

import functools

import pytest

from sofa_gui.core.analysis.findings import make_context
from sofa_gui.core.analysis.findings.sequence_loop import position_loop
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

torch = pytest.importorskip("torch")

POSITIONS = 12


#: Captures taken before a test gives up on finding the loop: on a loaded machine a step
#: descheduled for tens of ms (the clean one takes about 3) can put the loop under a
#: tenth of the median step, where no run of repeats is a loop of its own.
ATTEMPTS = 5


def _found(tmp: str, how: str, grad: bool = True):
    """The first of up to :data:`ATTEMPTS` captures whose median step shows the loop and,
    where the picked tensor needs a gradient, a run of autograd repeats after it (the
    last one where none does)."""
    for attempt in range(ATTEMPTS):
        a, ctx = _captured(tmp, how, grad=grad, attempt=attempt)
        loop = position_loop(ctx)
        if loop is not None and (not grad or loop.backward is not None):
            break
    return a, ctx


@functools.cache
def _captured(tmp: str, how: str, shapes: bool = True, grad: bool = True, attempt: int = 0):
    """A tiny tagger's training steps: an encoder, then a head once per position of its
    output (picked by ``how``: ``h[:, t]`` in the loop for "select"), the outputs
    stacked; ``grad``: the positions are picked from the encoder's output (else from the
    input, which needs no gradient)."""
    from torch import nn
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    enc = nn.Linear(16, 32)
    head = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 8))
    opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.01)
    x = torch.randn(4, POSITIONS, 16 if grad else 32)

    def pieces(h):
        if how == "unbind":
            return h.unbind(1)
        if how == "split":
            return h.split(1, dim=1)
        return h.chunk(POSITIONS, dim=1)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes) as prof:
        for _ in range(30):
            h = torch.tanh(enc(x)) if grad else x + 0
            out = torch.stack([head(h[:, t]) for t in range(POSITIONS)] if how == "select"
                              else [head(p) for p in pieces(h)], 1)
            loss = out.square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    path = f"{tmp}/{how}-{shapes}-{grad}-{attempt}.json"
    prof.export_chrome_trace(path)
    t = load_trace(path, use_cache=False)
    a = analyze(t)
    return a, make_context(t, a.iterations, a.breakdown)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("captures"))


@pytest.mark.parametrize("how, pick", [("unbind", "aten::unbind"), ("split", "aten::split"),
                                       ("chunk", "aten::chunk")])
def test_a_module_called_on_each_piece_of_one_split_is_a_loop_over_positions(tmp, how, pick):
    a, ctx = _found(tmp, how)
    loop = position_loop(ctx)
    assert loop is not None and loop.pick == pick and loop.count == POSITIONS
    assert loop.dim == 1 and loop.shape == (4, POSITIONS, 32)
    assert loop.backward is not None  # the split's node (UnbindBackward0 ...) after it
    f = next(f for f in a.findings if f.id == "sequence_loop")
    assert f"one {pick}" in f.summary and f.estimated_speedup > 1


@pytest.mark.parametrize("how", ["unbind", "select"])
def test_a_capture_without_input_shapes_says_nothing_of_positions(tmp, how):
    a, ctx = _captured(tmp, how, shapes=False)
    assert position_loop(ctx) is None
    assert not any(f.id == "sequence_loop" for f in a.findings)


def test_the_autograd_repeats_count_as_the_backward_only_with_the_picks_own_node(tmp):
    # the head's backward repeats once per position either way; picked from the input,
    # which needs no gradient, they record no SelectBackward0: not proven the loop's
    a, ctx = _found(tmp, "select")
    loop = position_loop(ctx)
    assert loop is not None and loop.backward is not None and loop.pick == "aten::select"
    a, ctx = _found(tmp, "select", grad=False)
    loop = position_loop(ctx)
    assert loop is not None and loop.backward is None
