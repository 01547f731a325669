"""Search spaces: malformed files and values a component refuses give located errors before any trial."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rewardkit import ConfigError, RewardComposer
from rewardkit.config import load_yaml
from rewardkit.optimize import SearchSpace

ROOT = Path(__file__).resolve().parents[3]
HYBRID = ROOT / "configs" / "rewards" / "vidur_hybrid.yaml"


def space_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def check(tmp_path: Path, text: str, base: Path = HYBRID) -> None:
    SearchSpace.from_yaml(space_file(tmp_path, text)).check_against(load_yaml(base), base_source=str(base))


@pytest.mark.parametrize("text, located, expected", [
    ("components.absolute.weight: {low: 0, high: 1}\n", "components.absolute.weight.type",
     "expected one of float, int, categorical, got nothing"),
    ("components.absolute.weight: {type: floaty, low: 0, high: 1}\n", "components.absolute.weight.type",
     "got 'floaty'"),
    ("components.absolute.weight: {type: float, low: 1, high: 0}\n", "components.absolute.weight",
     "expected low < high"),
    ("components.absolute.weight: {type: float, low: 0, high: 1, lg: true}\n", "components.absolute.weight.lg",
     "unknown key for a float dimension"),
    ("components.absolute.weight: {type: float, low: 0, high: .inf}\n", "components.absolute.weight.high",
     "expected a finite number"),
    ("components.absolute.weight: {type: float, low: 0, high: 1, log: true}\n", "components.absolute.weight.low",
     "expected low > 0 with log: true"),
    ("components.delta.params.ema_alpha: {type: int, low: 0.5, high: 3}\n", "components.delta.params.ema_alpha.low",
     "expected an integer"),
    ("components.load_balance.normalize: {type: categorical, choices: []}\n",
     "components.load_balance.normalize.choices", "expected a non-empty list of choices"),
    ("components.load_balance.normalize: {type: categorical, choices: [[1, 2]]}\n",
     "components.load_balance.normalize.choices[0]", "expected null, a boolean, a number or a string"),
    ("components.delta.enabled: {type: categorical, choices: [yes, 1]}\n", "components.delta.enabled",
     "choices: [true, false]"),
    ("components.absolute.weight: 0.5\n", "components.absolute.weight", "expected a mapping such as"),
    ("[1, 2]\n", None, "expected a non-empty mapping of reward-config key paths"),
])
def test_malformed_spec_is_located(tmp_path, text, located, expected):
    path = space_file(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        SearchSpace.from_yaml(path)
    assert info.value.source == str(path)
    assert info.value.path == located
    assert expected in str(info.value)


def test_duplicate_path_is_refused_by_the_loader(tmp_path):
    with pytest.raises(ConfigError, match=r"duplicate key 'components.a.weight'"):
        SearchSpace.from_yaml(space_file(tmp_path, "components.a.weight: {type: float, low: 0, high: 1}\n"
                                                   "components.a.weight: {type: float, low: 0, high: 2}\n"))


@pytest.mark.parametrize("text, located, expected", [
    # a path the base config lacks (typo in a term name): names what is there instead
    ("components.absolute.components.latncy.weight: {type: float, low: -2, high: 0}\n",
     "components.absolute.components.latncy.weight", "has no key 'latncy' under components.absolute.components "
     "(it has: throughput, latency, logistic)"),
    ("components.delta.paramz.ema_alpha: {type: float, low: 0.1, high: 0.5}\n",
     "components.delta.paramz.ema_alpha", "has no key 'paramz' under components.delta"),
    # a parameter the component does not have
    ("components.delta.params.alpha: {type: float, low: 0.1, high: 0.5}\n", "components.delta.params.alpha",
     "unknown parameter 'alpha'"),
    # a value the component's schema refuses: sigma must be positive
    ("components.absolute.components.logistic.params.sigma: {type: float, low: -1, high: 4}\n",
     "components.absolute.components.logistic.params.sigma", "low -1.0 is refused"),
    ("components.delta.params.ema_alpha: {type: float, low: 0.5, high: 1.5}\n",
     "components.delta.params.ema_alpha", "high 1.5 is refused"),
    ("components.load_balance.normalize: {type: categorical, choices: [null, zscore_please]}\n",
     "components.load_balance.normalize", "choice 'zscore_please' is refused"),
    # inside a schedule: the base weight is a number, not a schedule mapping
    ("components.delta.weight.start: {type: float, low: 0, high: 1}\n", "components.delta.weight.start",
     "has 0.2 at components.delta.weight, not a mapping"),
])
def test_path_or_value_the_base_refuses_is_located(tmp_path, text, located, expected):
    path = space_file(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        check(tmp_path, text)
    assert info.value.source == str(path)
    assert info.value.path == located
    assert expected in str(info.value)


def test_schedule_paths_and_on_off_apply(tmp_path):
    base = {"version": 1, "components": {
        "a": {"type": "linear", "inputs": {"value": "x"}, "weight": {"schedule": "linear", "start": 1.0,
                                                                        "end": 0.0, "steps": 100}},
        "b": {"type": "linear", "inputs": {"value": "y"}}}}
    space = SearchSpace.from_dict({
        "components.a.weight.start": {"type": "float", "low": 0.0, "high": 2.0},
        "components.a.weight.schedule": {"type": "categorical", "choices": ["linear", "cosine"]},
        "components.b.enabled": {"type": "categorical", "choices": [True, False]},
        "components.b.normalize": {"type": "categorical", "choices": [None, "running_zscore"]},
    })
    space.check_against(base)
    config = space.apply(base, {"components.a.weight.start": 1.5, "components.a.weight.schedule": "cosine",
                                "components.b.enabled": True, "components.b.normalize": "running_zscore"})
    assert config["components"]["a"]["weight"] == {"schedule": "cosine", "start": 1.5, "end": 0.0, "steps": 100}
    assert config["components"]["b"]["normalize"] == "running_zscore"
    composer = RewardComposer.from_dict(config)
    assert composer.term_names == ("a", "b")
    dropped = space.apply(base, {"components.b.enabled": False, "components.b.normalize": None})
    assert list(dropped["components"]) == ["a"]
    assert base["components"]["b"] == {"type": "linear", "inputs": {"value": "y"}}  # base untouched
    # turning off the only other term is fine; a space that could drop every term is refused
    lonely = {"version": 1, "components": {"b": base["components"]["b"]}}
    with pytest.raises(ConfigError, match="choice False is refused"):
        SearchSpace.from_dict({"components.b.enabled": {"type": "categorical", "choices": [True, False]}},
                              source="s.yaml").check_against(lonely)


def test_values_in_reads_a_known_config_for_enqueueing():
    space = SearchSpace.from_dict({
        "components.absolute.weight": {"type": "float", "low": 0.0, "high": 1.0},
        "components.absolute.components.logistic.params.sigma": {"type": "float", "low": 0.5, "high": 8, "log": True},
        "components.delta.enabled": {"type": "categorical", "choices": [True, False]},
        "components.load_balance.normalize": {"type": "categorical", "choices": [None, "running_zscore"]},
        # left out of the base config: the component's default counts
        "components.absolute.components.latency.params.slope": {"type": "float", "low": 0.5, "high": 2},
    })
    values = space.values_in(load_yaml(HYBRID), source=str(HYBRID))
    assert values == {"components.absolute.weight": 0.8,
                      "components.absolute.components.logistic.params.sigma": 2.0,
                      "components.delta.enabled": True, "components.load_balance.normalize": None,
                      "components.absolute.components.latency.params.slope": 1.0}
    narrow = SearchSpace.from_dict({"components.absolute.weight": {"type": "float", "low": 0.0, "high": 0.5}})
    with pytest.raises(ConfigError) as info:
        narrow.values_in(load_yaml(HYBRID), source=str(HYBRID))
    assert info.value.source == str(HYBRID) and info.value.path == "components.absolute.weight"
    assert "float in [0.0, 0.5]" in str(info.value) and "got 0.8" in str(info.value)


# ---- bounds ---------------------------------------------------------------------
@pytest.mark.parametrize("spec, expected", [
    ("{type: float, low: 0, high: 1, step: 1.0e-7}", "expected a step giving at most 1000000 steps from low to high"),
    ("{type: float, low: 0, high: 1, step: 5.0e-324}", "expected a step giving at most 1000000 steps from low to high"),
    ("{type: float, low: 0, high: 1, step: 2}", "expected a step of at most high - low (1)"),
    ("{type: int, low: 0, high: 4, step: 5}", "expected a step of at most high - low (4)"),
])
def test_steps_too_small_or_too_large_are_refused_up_front(tmp_path, spec, expected):
    with pytest.raises(ConfigError, match=r"space.yaml: components.absolute.weight.step: " + re.escape(expected)):
        check(tmp_path, f"components.absolute.weight: {spec}\n")
    check(tmp_path, "components.absolute.weight: {type: float, low: 0, high: 1, step: 1.0e-6}\n")  # 10^6 steps


def big_base(n: int) -> dict:
    return {"version": 1, "components": {f"t{i}": {"type": "linear", "inputs": {"value": f"x{i}"}, "weight": 1.0}
                                         for i in range(n)}}


def test_the_check_builds_a_bounded_number_of_configs_whatever_the_size(monkeypatch):
    """Linear in the config's size: probes are built in rounds, not one config per probe."""
    builds = []
    real = RewardComposer.from_dict.__func__

    def counting(cls, data, *args, **kwargs):
        builds.append(len(data.get("components", {})))
        return real(cls, data, *args, **kwargs)

    monkeypatch.setattr(RewardComposer, "from_dict", classmethod(counting))
    for n in (10, 300):
        builds.clear()
        space = {f"components.t{i}.weight": {"type": "float", "low": 0.0, "high": 2.0} for i in range(n)}
        space["components.t0.normalize"] = {"type": "categorical", "choices": [None, "running_zscore", "return_std"]}
        SearchSpace.from_dict(space).check_against(big_base(n))
        assert len(builds) <= 4, (n, len(builds))  # the base, then the rounds low/first, high/second, third


def test_a_refused_probe_among_many_is_still_named(tmp_path):
    base = big_base(200)
    base["components"]["t137"] = {"type": "logistic_latency", "inputs": {"latency": "lat"},
                                  "params": {"threshold": 6.0, "sigma": 2.0}, "weight": -0.5}
    space = {f"components.t{i}.weight": {"type": "float", "low": 0.0, "high": 2.0} for i in range(200) if i != 137}
    space["components.t137.params.sigma"] = {"type": "float", "low": -1.0, "high": 3.0}
    with pytest.raises(ConfigError, match=r"components.t137.params.sigma: low -1.0 is refused by"):
        SearchSpace.from_dict(space, source="space.yaml").check_against(base)
