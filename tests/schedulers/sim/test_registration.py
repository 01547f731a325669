"""Our global schedulers registered into Vidur, and Vidur's own CLI accepting them."""

from __future__ import annotations

import sys

import pytest

@pytest.mark.vidur
def test_schedulers_registered_with_vidur():
    from vidur.config import BaseGlobalSchedulerConfig
    from vidur.scheduler import GlobalSchedulerRegistry

    from schedulers.sim import registration as reg

    for name, (key, config_cls, scheduler_cls) in reg.REGISTERED.items():
        assert str(key) == name
        assert GlobalSchedulerRegistry.get_class(key) is scheduler_cls
        assert config_cls.get_type() is key
        assert BaseGlobalSchedulerConfig.create_from_type(key).__class__ is config_cls
        assert isinstance(reg.global_scheduler_config(name), config_cls)
    assert reg.global_scheduler_config("lor").get_type().name == "LOR"
    with pytest.raises(ValueError, match="unknown global scheduler 'best'"):
        reg.global_scheduler_config("best")


@pytest.mark.vidur
def test_vidur_cli_accepts_registered_scheduler(tmp_path, monkeypatch):
    """Vidur's own argument parser builds a config with our scheduler and the PPO checkpoint option."""
    import schedulers.sim.registration as reg
    from vidur.config import SimulationConfig

    argv = [
        "vidur",
        "--global_scheduler_config_type",
        "ppo",
        "--ppo_global_scheduler_config_checkpoint",
        "runs/x/policy.pt",
        "--metrics_config_output_dir",
        str(tmp_path),
        "--no-metrics_config_store_plots",
        "--no-metrics_config_enable_chrome_trace",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    config = SimulationConfig.create_from_cli_args()
    gs = config.cluster_config.global_scheduler_config
    assert isinstance(gs, reg.REGISTERED["ppo"][1]) and gs.checkpoint == "runs/x/policy.pt"
    monkeypatch.setattr(sys, "argv", argv[:1] + ["--global_scheduler_config_type", "least_prefill"] + argv[5:])
    config = SimulationConfig.create_from_cli_args()
    assert isinstance(config.cluster_config.global_scheduler_config, reg.REGISTERED["least_prefill"][1])


@pytest.mark.vidur
def test_every_registered_policy_becomes_a_vidur_scheduler_with_its_checkpoint_and_parameters():
    """One loop over the registry: no policy is written out by hand, and a policy's parameters are
    options of its Vidur config."""
    from schedulers.routing.policy import registered_policies
    from schedulers.sim import registration as reg

    ours = [n for n in registered_policies() if n not in reg.VIDUR_BUILTIN_CONFIGS]
    assert list(reg.REGISTERED) == ours and {"llm_d_default", "affinity_token_load", "ppo"} <= set(ours)
    assert reg.global_scheduler_config("cache_aware").cache_threshold == 0.3
    assert reg.global_scheduler_config("cache_aware", cache_threshold=0.6).cache_threshold == 0.6
    assert hasattr(reg.global_scheduler_config("ppo"), "checkpoint")
    assert not hasattr(reg.global_scheduler_config("jsq"), "checkpoint")
    assert all(issubclass(cls, reg.PolicyGlobalScheduler) and cls.policy_name == name
               for name, (_, _, cls) in reg.REGISTERED.items())
