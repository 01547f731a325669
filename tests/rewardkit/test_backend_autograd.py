"""Torch inputs that require grad: state never holds an autograd graph, every
call's backward works, the finiteness check does not make torch warn, and tensors without values
to compute on (meta device, sparse layouts) are an ``InvalidInputError``."""

from __future__ import annotations

import warnings

import pytest

from rewardkit import RewardComposer
from rewardkit.errors import InvalidInputError

torch = pytest.importorskip("torch", reason="torch is part of the torch extra (make installs it)")

# every stateful part: the three normalizers and the two stateful components
CONFIG = {"version": 1, "components": {
    "z": {"type": "linear", "inputs": {"value": "a"}, "weight": 1.0, "normalize": "running_zscore"},
    "m": {"type": "linear", "inputs": {"value": "a"}, "weight": 1.0, "normalize": "running_minmax"},
    "r": {"type": "linear", "inputs": {"value": "a"}, "weight": 1.0, "normalize": "return_std"},
    "e": {"type": "ema_delta", "params": {"signal": "a"}},
    "p": {"type": "potential_shaping", "inputs": {"potential": "a"}},
}}


def held_tensors(obj, seen=None):
    """Every torch tensor reachable from ``obj``'s attributes (the composer's state)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (str, bytes, int, float, type(None))):
        return []
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return [obj]
    found = []
    children = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple, set)) \
        else vars(obj).values() if hasattr(obj, "__dict__") else []
    for child in children:
        found += held_tensors(child, seen)
    return found


@pytest.mark.parametrize("shape", [(4,), (1,)])
def test_state_never_holds_a_graph_and_every_backward_works(shape):
    torch.set_num_threads(1)
    composer = RewardComposer.from_dict(CONFIG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the finiteness check must not make torch warn
        for step in range(5):
            x = torch.rand(shape, dtype=torch.float64, requires_grad=True)
            out = composer({"a": x})
            out.total.sum().backward()  # each call's own graph: a second backward must not meet a freed one
            assert x.grad is not None and torch.isfinite(x.grad).all()
            state = held_tensors(composer)
            assert state and not any(t.requires_grad or t.grad_fn is not None for t in state), step
    composer.state_dict()  # and it saves


def test_running_zscore_alone_keeps_no_graph_over_many_calls():
    composer = RewardComposer.from_dict({"version": 1, "components": {
        "z": {"type": "linear", "inputs": {"value": "a"}, "weight": 1.0, "normalize": "running_zscore"}}})
    weight = torch.ones(8, dtype=torch.float64, requires_grad=True)
    for _ in range(50):
        composer({"a": weight * torch.rand(8, dtype=torch.float64)})
    assert not any(t.grad_fn is not None for t in held_tensors(composer))


@pytest.mark.parametrize("make, needle", [
    (lambda: torch.rand(4, device="meta"), "'meta' device"),
    (lambda: torch.rand(4).to_sparse(), "layout torch.sparse_coo"),
    (lambda: torch.rand(4, 2).to_sparse_csr(), "layout torch.sparse_csr"),
])
def test_tensors_without_values_to_compute_on_are_invalid_inputs(make, needle):
    composer = RewardComposer.from_dict(CONFIG)
    try:
        value = make()
    except (RuntimeError, NotImplementedError):
        pytest.skip("this torch build cannot make that tensor")
    with pytest.raises(InvalidInputError, match=f"context key 'a'.*{needle}"):
        composer({"a": value})
    composer({"a": torch.rand(4, dtype=torch.float64)})  # the refused call changed nothing: the next one works
