"""``WorkloadMixEnv``: each episode plays the variant its seed picks; bad mix files are located errors."""

from __future__ import annotations

import pytest
import yaml

from rewardkit.errors import ConfigError

pytest.importorskip("vidur")


def write_mix(tmp_path, variants, base="configs/envs/tiny.yaml"):
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump({"base": base, "variants": variants}))
    return path


def test_each_episode_plays_the_variant_its_seed_picks(tmp_path, vidur_predictor) -> None:
    from schedulers.environments import policy_action
    from schedulers.routing.policy import make_policy
    from schedulers.sim.workload_mix import WorkloadMixEnv

    mix = write_mix(tmp_path, {"plain": {"qps": 3.0},
                               "shared": {"qps": 3.0, "shared_prefix": {"groups": 2, "prefix_tokens": 256},
                                          "max_tokens": 1024}})
    env = WorkloadMixEnv(mix, compute_reward=False, evaluate=True)
    seen = {}
    policy = make_policy("cache_aware")
    for seed in (4, 5):
        obs, _ = env.reset(seed=seed)
        policy.reset(seed)
        while True:
            obs, _, term, trunc, _ = env.step(policy_action(policy, env, obs))
            if term or trunc:
                break
        seen[env.variant] = env.episode_metrics().prefix_hit_rate
    assert set(seen) == {"plain", "shared"}  # seed 4 -> variant 0, seed 5 -> variant 1
    assert seen["plain"] == 0.0 < seen["shared"]
    env.close()


@pytest.mark.parametrize("variants, message", [
    ({"fast": {"qsp": 3}}, r"mix\.yaml: variants\.fast\.qsp: unknown key"),
    ({"big": {"num_replicas": 3}}, r"mix\.yaml: variants\.big: expected the base's 2 replicas, got 3"),
    ({}, r"mix\.yaml: variants: expected a non-empty mapping"),
    ({"x": [1]}, r"mix\.yaml: variants\.x: expected a mapping of env overrides"),
])
def test_a_bad_mix_names_the_file_and_key(tmp_path, variants, message) -> None:
    from schedulers.sim.workload_mix import load_workload_mix

    with pytest.raises(ConfigError, match=message):
        load_workload_mix(write_mix(tmp_path, variants))
