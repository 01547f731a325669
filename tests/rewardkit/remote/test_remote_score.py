"""``remote_score`` against a real stub scorer on 127.0.0.1, for every fault: slow, HTTP 500,
garbage, wrong length, hang (timeout), connection refused; retries and backoff, the cache, the
budgets, and the failure policy (default, or a RemoteScoreError naming the term and the URL)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest

from rewardkit.components import RemoteScore
from rewardkit.errors import InvalidInputError, RemoteScoreError

COMPLETIONS = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff", "g" * 7, "h" * 8]


def score(term: RemoteScore, completions: list[str], prompts: list[str] | None = None) -> np.ndarray:
    """One call of the term, awaited as the composer does."""
    x: dict[str, Any] = {"completion": completions}
    if prompts is not None:
        x["prompt"] = prompts
    flags = np.zeros(len(completions), dtype=bool)
    return asyncio.run(term.compute_async(x, flags, flags))


def term(url: str, **params: Any) -> RemoteScore:
    return RemoteScore(name="rm", url=url, **{"backoff_s": 0.0, **params})


def test_scores_come_back_in_order_batched_with_at_most_n_in_flight(scorer) -> None:
    stub, url = scorer
    stub.delay_s = 0.05
    rm = term(url, batch_size=3, max_concurrency=2)
    values = score(rm, COMPLETIONS, prompts=["p"] * len(COMPLETIONS))
    np.testing.assert_array_equal(values, [float(len(c)) for c in COMPLETIONS])
    assert values.dtype == np.float64
    assert sorted(stub.batch_sizes) == [2, 3, 3]
    assert stub.peak_in_flight == 2
    info = rm.last_call_info()
    assert info["requests"] == 3 and info["failures"] == 0 and info["defaults_used"] == 0
    assert info["spend_requests"] == 3
    assert info["latency_s"] >= 0.1  # three batches, two at a time, 50 ms each


def test_a_slow_scorer_within_the_timeout_is_waited_for(scorer) -> None:
    stub, url = scorer
    stub.delay_s = 0.3
    rm = term(url, timeout_s=2.0)
    np.testing.assert_array_equal(score(rm, ["xy"]), [2.0])
    assert rm.last_call_info()["latency_s"] >= 0.3


def test_http_500_is_retried_with_exponential_backoff_then_recovers(scorer) -> None:
    stub, url = scorer
    stub.fail_first = 2
    rm = term(url, retries=3, backoff_s=0.1)
    np.testing.assert_array_equal(score(rm, ["abc"]), [3.0])
    info = rm.last_call_info()
    assert (info["requests"], info["failures"]) == (3.0, 2.0)
    gaps = np.diff(stub.arrivals)
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2, f"backoff not exponential: gaps {gaps}"


@pytest.mark.parametrize("policy", ["raise", "default"])
def test_http_500_after_the_retries_raises_or_uses_the_default(scorer, policy: str) -> None:
    stub, url = scorer
    stub.mode = "fail"
    rm = term(url, retries=2, on_failure=policy, default=-1.0)
    if policy == "raise":
        with pytest.raises(RemoteScoreError) as caught:
            score(rm, ["a", "b"])
        message = str(caught.value)
        assert message.startswith(f"rm: {url}: 2 of 2 item(s) not scored: HTTP 500")
        assert "after 3 attempts" in message
    else:
        np.testing.assert_array_equal(score(rm, ["a", "b"]), [-1.0, -1.0])
        assert rm.last_call_info()["defaults_used"] == 2
    assert len(stub.arrivals) == 3
    assert rm.last_call_info()["failures"] == 3


@pytest.mark.parametrize(("mode", "expected"), [
    ("garbage", "malformed answer: not JSON: '<html>502 Bad Gateway</html>'"),
    ("wrong_length", "malformed answer: expected 2 scores (one per completion sent), got 1"),
])
def test_a_malformed_answer_is_not_retried_and_says_what_was_wrong(scorer, mode: str, expected: str) -> None:
    stub, url = scorer
    stub.mode = mode
    rm = term(url, retries=3)
    with pytest.raises(RemoteScoreError, match="rm: .*/score: 2 of 2 item") as caught:
        score(rm, ["a", "b"])
    assert expected in str(caught.value)
    assert len(stub.arrivals) == 1


def test_a_hanging_scorer_times_out_per_request(scorer) -> None:
    stub, url = scorer
    stub.mode = "hang"
    rm = term(url, timeout_s=0.3, retries=1, on_failure="default", default=0.5)
    start = time.perf_counter()
    np.testing.assert_array_equal(score(rm, ["a"]), [0.5])
    elapsed = time.perf_counter() - start
    assert 0.6 <= elapsed < 3.0, elapsed  # two tries of 0.3 s each, not the hour the stub waits
    assert len(stub.arrivals) == 2
    with pytest.raises(RemoteScoreError, match=r"no answer within timeout_s=0.3 s \(after 2 attempts\)"):
        score(term(url, timeout_s=0.3, retries=1), ["a"])


def test_a_refused_connection_is_retried_then_named(refused_url: str) -> None:
    rm = term(refused_url, retries=2)
    with pytest.raises(RemoteScoreError) as caught:
        score(rm, ["a"])
    assert str(caught.value).startswith(f"rm: {refused_url}: 1 of 1 item(s) not scored: connection failed (ConnectError")
    assert rm.last_call_info()["requests"] == 3


def test_the_same_prompt_and_completion_are_scored_once(scorer) -> None:
    stub, url = scorer
    rm = term(url, batch_size=4)
    first = score(rm, ["a", "bb", "a", "bb"], prompts=["p", "p", "p", "q"])
    np.testing.assert_array_equal(first, [1.0, 2.0, 1.0, 2.0])
    assert stub.batch_sizes == [3]  # ("p","a") twice in one call is sent once; ("q","bb") differs by prompt
    assert rm.last_call_info()["cache_hits"] == 1
    again = score(rm, ["bb", "a"], prompts=["q", "p"])
    np.testing.assert_array_equal(again, [2.0, 1.0])
    assert rm.last_call_info()["cache_hits"] == 2 and rm.last_call_info()["requests"] == 0
    assert stub.batch_sizes == [3]


def test_cache_size_zero_scores_every_item_and_a_full_cache_forgets_the_oldest(scorer) -> None:
    stub, url = scorer
    off = term(url, cache_size=0)
    score(off, ["a", "a"])
    score(off, ["a"])
    assert stub.batch_sizes == [2, 1] and off.last_call_info()["cache_hits"] == 0
    stub.reset()
    small = term(url, cache_size=2, batch_size=1)
    score(small, ["a", "b", "c"])  # "a" is evicted
    score(small, ["c", "b", "a"])
    assert small.last_call_info()["cache_hits"] == 2 and small.last_call_info()["requests"] == 1


def test_the_request_budget_stops_sending_over_the_terms_life(scorer) -> None:
    stub, url = scorer
    rm = term(url, batch_size=1, max_concurrency=1, max_requests=3, on_failure="default", default=-1.0)
    np.testing.assert_array_equal(score(rm, ["a", "bb"]), [1.0, 2.0])
    np.testing.assert_array_equal(score(rm, ["ccc", "dddd"]), [3.0, -1.0])
    info = rm.last_call_info()
    assert (info["requests"], info["defaults_used"], info["spend_requests"]) == (1.0, 1.0, 3.0)
    assert len(stub.arrivals) == 3
    strict = term(url, max_requests=1, retries=0)
    score(strict, ["x"])
    with pytest.raises(RemoteScoreError, match=r"request budget spent \(1 of 1 requests spent\)"):
        score(strict, ["y"])


def test_the_wall_time_budget_of_a_call_cancels_what_is_still_running(scorer) -> None:
    stub, url = scorer
    stub.delay_s = 5.0
    rm = term(url, max_call_s=0.2, on_failure="default", default=0.25)
    start = time.perf_counter()
    np.testing.assert_array_equal(score(rm, ["a", "b"]), [0.25, 0.25])
    assert time.perf_counter() - start < 2.5  # the scorer would have taken 5 s
    with pytest.raises(RemoteScoreError, match=r"wall-time budget spent \(max_call_s=0.2 s per call\)"):
        score(term(url, max_call_s=0.2), ["a"])


def test_text_inputs_must_be_lists_of_str_and_prompts_match_completions(scorer) -> None:
    _, url = scorer
    rm = RemoteScore(name="rm", url=url, inputs={"completion": "answer"})
    with pytest.raises(InvalidInputError, match="rm: context key 'answer': expected a list of str .*got float 1.5"):
        score(rm, ["a", 1.5])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="expected 2 prompts"):
        score(rm, ["a", "b"], prompts=["p"])


def test_compute_runs_outside_an_event_loop_and_refuses_inside_one(scorer) -> None:
    _, url = scorer
    rm = term(url)
    flags = np.zeros(1, dtype=bool)
    np.testing.assert_array_equal(rm.compute({"completion": ["abc"]}, flags, flags), [3.0])

    async def inside() -> None:
        rm.compute({"completion": ["abc"]}, flags, flags)

    with pytest.raises(RuntimeError, match="await compute_async"):
        asyncio.run(inside())


def test_connections_close_with_their_event_loop(scorer) -> None:
    """A loop's shutdown (asyncio.run's end, composer.close()) closes the term's HTTP client there."""
    from rewardkit import RewardComposer

    _, url = scorer
    rm = term(url)
    score(rm, ["a"])
    assert rm._client._held[1].is_closed
    composer = RewardComposer.from_dict({"version": 1, "components": {"rm": {"type": "remote_score",
                                                                           "params": {"url": url}}}})
    composer({"completion": ["abc"]})
    client = composer.spec.nodes[0].component._client._held[1]
    assert not client.is_closed  # kept open between calls: connections are reused
    composer.close()
    assert client.is_closed


@pytest.mark.parametrize(("params", "path", "expected"), [
    ({"url": "ftp://127.0.0.1/score"}, "params.url", "expected an http:// or https:// URL with a host, got 'ftp://"),
    ({"url": "http:///score"}, "params.url", "expected an http:// or https:// URL with a host"),
    ({"url": "http://127.0.0.1:99999/score"}, "params.url", "expected an http:// or https:// URL with a host"),
    ({"batch_size": 0}, "params.batch_size", "expected an integer >= 1, got 0"),
    ({"max_concurrency": -2}, "params.max_concurrency", "expected an integer >= 1, got -2"),
    ({"timeout_s": 0}, "params.timeout_s", "expected a number from 0.001 to 3600, got 0"),
    ({"retries": 11}, "params.retries", "expected an integer from 0 to 10, got 11"),
    ({"cache_size": -1}, "params.cache_size", "expected an integer >= 0, got -1"),
    ({"max_requests": 0}, "params.max_requests", "expected an integer >= 1, got 0"),
    ({"max_call_s": -1.0}, "params.max_call_s", "expected a number from 0.001 to 86400, got -1.0"),
    ({"on_failure": "ignore"}, "params.on_failure", "expected one of 'raise', 'default', got 'ignore'"),
    ({"default": float("nan")}, "params.default", "expected a finite number, got nan"),
    ({"api_key_env": "REWARDKIT_TEST_UNSET_KEY"}, "params.api_key_env",
     "expected the name of a set environment variable, got 'REWARDKIT_TEST_UNSET_KEY' (not set)"),
])
def test_bad_params_are_located_config_errors(params: dict[str, Any], path: str, expected: str) -> None:
    from rewardkit import ConfigError, RewardComposer

    given = {"url": "http://127.0.0.1:8000/score", **params}
    config = {"version": 1, "components": {"rm": {"type": "remote_score", "params": given}}}
    with pytest.raises(ConfigError) as caught:
        RewardComposer.from_dict(config, source="rm.yaml")
    assert f"rm.yaml: components.rm.{path}: {expected}" in str(caught.value)


def test_the_api_key_is_read_from_the_environment_and_sent_as_a_bearer_token(scorer, monkeypatch) -> None:
    _, url = scorer
    monkeypatch.setenv("REWARDKIT_TEST_KEY", "s3cret")
    rm = term(url, api_key_env="REWARDKIT_TEST_KEY")
    assert rm._client.headers() == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in repr(rm.to_dict())  # the key itself never goes in the config
    np.testing.assert_array_equal(score(rm, ["ab"]), [2.0])
