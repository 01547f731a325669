"""The asynchronous seam under concurrency (``rewardkit/async_terms.py`` and ``composer.acall``)
against a real stub scorer: concurrent ``acall``s all get real scores whatever the host name
and the size of the loop's default executor, a cancelled ``acall`` changes nothing and stops
its requests, plain calls and ``acall``s from several threads are each counted, and a dropped
composer frees its threads at once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
import time
from typing import Any

import pytest

from rewardkit import RewardComposer


def remote_composer(url: str, **params: Any) -> RewardComposer:
    return RewardComposer.from_dict({"version": 1, "components": {
        "rm": {"type": "remote_score", "params": {"url": url, "timeout_s": 10, "retries": 0, "cache_size": 0,
                                                  **params},
               "normalize": {"type": "running_zscore"}}}})


def wait_until(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_concurrent_acalls_all_get_real_scores_with_a_small_default_executor(scorer) -> None:
    stub, url = scorer
    stub.delay_s = 0.05
    # a host name: the HTTP client resolves it with the loop's default executor
    composer = remote_composer(url.replace("127.0.0.1", "localhost"))
    texts = [["x" * (i + 1)] for i in range(12)]

    async def main() -> list[Any]:
        asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        calls = [composer.acall({"completion": t}) for t in texts]
        return await asyncio.wait_for(asyncio.gather(*calls), timeout=120)

    try:
        outs = asyncio.run(main())
    finally:
        composer.close()
    # every call got its real score (the stub scores a completion by its length), none a default
    assert [out.terms["rm"].raw.tolist() for out in outs] == [[float(len(t[0]))] for t in texts]
    assert composer.step == 12
    assert composer.state_dict()["normalizers"]["rm"]["count"] == 12


def test_a_cancelled_acall_changes_nothing_and_stops_its_requests(scorer) -> None:
    stub, url = scorer
    stub.delay_s = 1.0
    composer = remote_composer(url)
    before = composer.state_dict()

    async def main() -> None:
        call = asyncio.ensure_future(composer.acall({"completion": ["abc", "de"]}))
        while not stub.arrivals:  # the request is in flight
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(2.0)  # past the moment the scorer answers

    asyncio.run(main())
    after = composer.state_dict()
    assert after.pop("spent_requests", {"rm": 1}) == {"rm": 1}  # a request sent stays spent (money, not state)
    before.pop("spent_requests", None)
    assert after == before  # no step, no statistics, even after the answer time
    assert len(stub.arrivals) == 1  # nothing sent again
    stub.delay_s = 0.0
    out = composer({"completion": ["abcd"]})  # the composer still works, from where it was
    assert out.terms["rm"].raw.tolist() == [4.0] and composer.step == 1
    composer.close()


def test_an_acall_cancelled_while_waiting_for_its_turn_never_runs(scorer) -> None:
    stub, url = scorer
    stub.delay_s = 0.5
    composer = remote_composer(url)

    async def main() -> Any:
        first = asyncio.ensure_future(composer.acall({"completion": ["aa"]}))
        second = asyncio.ensure_future(composer.acall({"completion": ["bbbb", "c"]}))
        while not stub.arrivals:
            await asyncio.sleep(0.01)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        return await first

    out = asyncio.run(main())
    time.sleep(0.5)
    composer.close()
    assert out.terms["rm"].raw.tolist() == [2.0]
    assert composer.step == 1 and composer.state_dict()["normalizers"]["rm"]["count"] == 1
    assert stub.batch_sizes == [1]


def test_plain_calls_from_threads_and_acalls_are_each_counted(scorer) -> None:
    stub, url = scorer
    stub.delay_s = 0.01
    composer = remote_composer(url)
    start = threading.Barrier(5)

    def plain_calls() -> None:
        start.wait()
        for _ in range(5):
            composer({"completion": ["ab", "cde"]})

    async def acalls() -> None:
        await asyncio.gather(*(composer.acall({"completion": ["abcd"]}) for _ in range(5)))

    def on_a_loop() -> None:
        start.wait()
        asyncio.run(acalls())

    threads = [threading.Thread(target=plain_calls) for _ in range(4)] + [threading.Thread(target=on_a_loop)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    composer.close()
    assert not any(thread.is_alive() for thread in threads)
    assert composer.step == 4 * 5 * 2 + 5  # every call counted
    assert composer.state_dict()["normalizers"]["rm"]["count"] == 45


def test_a_plain_call_inside_the_loop_of_an_acall_in_flight_is_refused_not_hung(scorer) -> None:
    stub, url = scorer
    stub.delay_s = 0.5
    composer = remote_composer(url)

    async def main() -> Any:
        call = asyncio.ensure_future(composer.acall({"completion": ["aa"]}))
        while not stub.arrivals:
            await asyncio.sleep(0.01)
        with pytest.raises(RuntimeError, match="await composer.acall"):
            composer({"completion": ["b"]})
        return await call

    out = asyncio.run(main())
    composer.close()
    assert out.terms["rm"].raw.tolist() == [2.0] and composer.step == 1


def _threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def test_a_dropped_composer_frees_its_threads_without_a_collection(scorer) -> None:
    _, url = scorer
    gc.collect()
    before = set(_threads("rewardkit-"))
    gc.disable()
    try:
        composer = remote_composer(url)
        composer({"completion": ["ab"]})  # starts the background loop's thread
        asyncio.run(composer.acall({"completion": ["ab"]}))  # and acall's worker
        started = set(_threads("rewardkit-")) - before
        assert any(t.name == "rewardkit-async-terms" for t in started)
        del composer
        for thread in started:
            thread.join(timeout=30)
        assert not any(thread.is_alive() for thread in started)
    finally:
        gc.enable()


def test_close_and_the_context_manager_end_the_threads(scorer) -> None:
    _, url = scorer
    before = set(_threads("rewardkit-"))
    with remote_composer(url) as composer:
        composer({"completion": ["ab"]})
        asyncio.run(composer.acall({"completion": ["ab"]}))
        started = set(_threads("rewardkit-")) - before
        assert started
    for thread in started:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in started)
    assert composer({"completion": ["abc"]}).terms["rm"].raw.tolist() == [3.0]  # a later call starts anew
    composer.close()
