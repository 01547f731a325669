"""``max_requests`` holds over a checkpoint: the spend is in ``state_dict``, so a composer
restored from it sends no more than the budget left."""

from __future__ import annotations

from rewardkit import RewardComposer


def budgeted(url: str) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": {"rm": {"type": "remote_score", "params": {
        "url": url, "max_requests": 2, "cache_size": 0, "on_failure": "default", "default": -1.0}}}})


def test_a_restored_composer_keeps_to_the_budget_left(scorer) -> None:
    stub, url = scorer
    first = budgeted(url)
    first({"completion": ["ab"]})
    state = first.state_dict()  # one of two requests spent
    first({"completion": ["abc"]})
    first.close()
    stub.reset()
    resumed = budgeted(url)
    resumed.load_state_dict(state)
    assert resumed({"completion": ["abcd"]}).terms["rm"].raw.tolist() == [4.0]  # the one request left
    out = resumed({"completion": ["abcde"]})
    resumed.close()
    assert out.terms["rm"].raw.tolist() == [-1.0] and out.terms["rm"].info["defaults_used"] == 1.0
    assert len(stub.arrivals) == 1  # never past max_requests over the run
