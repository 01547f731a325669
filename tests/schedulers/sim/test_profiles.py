"""Installing local profiling data into Vidur's hub-cache layout, and the errors for bad data."""

from __future__ import annotations

import dataclasses
import json
import lzma
import re
import shutil
from pathlib import Path

import pytest

from schedulers.sim.profiles import (
    CACHE_ENV_VAR,
    PROFILES_ENV_VAR,
    VidurSetupError,
    default_profiles_dir,
    install_profiles,
    project_root,
    resolve_cache_dir,
    resolve_profiles_dir,
)

MODEL = "codellama/CodeLlama-34b-Instruct-hf"
CLUSTER = {"model": MODEL, "device": "a100", "network_device": "a100_dgx"}


@pytest.fixture
def profiles(tmp_path) -> Path:
    """A writable copy of the shared profiling data (about 350 KB)."""
    target = tmp_path / "profiles"
    shutil.copytree(default_profiles_dir(), target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def test_install_creates_hub_cache_layout(profiles, tmp_path):
    cache = tmp_path / "cache"
    installed = install_profiles(profiles, cache, **CLUSTER)
    assert installed.compute_repo_id == "local/vidur-a100-codellama-34b"
    assert installed.network_repo_id == "local/vidur-a100-dgx"
    for kind, repo, files in (
        ("compute", "datasets--local--vidur-a100-codellama-34b", ("config.json", "mlp.csv.xz", "attention.csv.xz")),
        ("network", "datasets--local--vidur-a100-dgx", ("config.json", "all_reduce.csv.xz", "send_recv.csv.xz")),
    ):
        repo_dir = cache / "profiling_data" / kind / repo
        revision = (repo_dir / "refs" / "main").read_text()
        assert re.fullmatch(r"[0-9a-f]{40}", revision)
        assert sorted(p.name for p in (repo_dir / "snapshots" / revision).iterdir()) == sorted(files)
    assert installed.compute_snapshot.parent.parent.name == "datasets--local--vidur-a100-codellama-34b"


def test_hub_client_resolves_the_installed_snapshot_offline(profiles, tmp_path, monkeypatch):
    from huggingface_hub import snapshot_download

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    installed = install_profiles(profiles, tmp_path / "cache", **CLUSTER)
    path = snapshot_download(
        repo_id=installed.compute_repo_id,
        repo_type="dataset",
        cache_dir=f"{tmp_path / 'cache'}/profiling_data/compute/",
    )
    assert Path(path) == installed.compute_snapshot
    assert json.loads((Path(path) / "config.json").read_text())["model"] == MODEL


def test_install_is_idempotent_and_notices_changed_data(profiles, tmp_path):
    cache = tmp_path / "cache"
    first = install_profiles(profiles, cache, **CLUSTER)
    trained = cache / "predictors" / "abc123"
    trained.mkdir(parents=True)
    second = install_profiles(profiles, cache, **CLUSTER)
    assert second == first and trained.is_dir()  # unchanged data keeps trained predictors
    with lzma.open(profiles / "local" / "vidur-a100-dgx" / "send_recv.csv.xz", "at") as fh:
        fh.write("\n")
    third = install_profiles(profiles, cache, **CLUSTER)
    assert third.network_snapshot != first.network_snapshot
    assert third.compute_snapshot == first.compute_snapshot
    assert not (cache / "predictors").exists()  # predictors trained on old tables are discarded


def test_plain_csv_is_compressed_on_install(profiles, tmp_path):
    folder = profiles / "local" / "vidur-a100-dgx"
    text = lzma.open(folder / "all_reduce.csv.xz", "rt").read()
    (folder / "all_reduce.csv").write_text(text)
    (folder / "all_reduce.csv.xz").unlink()
    installed = install_profiles(profiles, tmp_path / "cache", **CLUSTER)
    assert lzma.open(installed.network_snapshot / "all_reduce.csv.xz", "rt").read() == text


def test_missing_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv(PROFILES_ENV_VAR, raising=False)
    nowhere = re.escape(str(tmp_path / "nowhere"))
    with pytest.raises(VidurSetupError, match=rf"{nowhere} \(from env config key profiles_dir\) does not exist"):
        resolve_profiles_dir(tmp_path / "nowhere")
    monkeypatch.setenv(PROFILES_ENV_VAR, str(tmp_path / "elsewhere"))
    with pytest.raises(VidurSetupError, match=rf"elsewhere \(from \${PROFILES_ENV_VAR}\)"):
        resolve_profiles_dir(None)


def test_missing_file_is_named(profiles, tmp_path):
    (profiles / "local" / "vidur-a100-codellama-34b" / "mlp.csv.xz").unlink()
    with pytest.raises(VidurSetupError,
                       match=r"vidur-a100-codellama-34b/mlp\.csv\.xz: missing; the compute profiling dataset needs"):
        install_profiles(profiles, tmp_path / "cache", **CLUSTER)


def test_mismatched_model_is_explained(profiles, tmp_path):
    config = profiles / "local" / "vidur-a100-codellama-34b" / "config.json"
    config.write_text(json.dumps({"model": "meta-llama/Llama-2-7b-hf", "device_sku": "a100"}))
    with pytest.raises(VidurSetupError, match=r"no compute profiling dataset with config\.json "
                       r"model='codellama/CodeLlama-34b-Instruct-hf'.*found: local/vidur-a100-codellama-34b .*Llama-2-7b-hf"):
        install_profiles(profiles, tmp_path / "cache", **CLUSTER)
    with pytest.raises(
        VidurSetupError,
        match=r"config\.json: model: expected 'codellama/CodeLlama-34b-Instruct-hf' \(the replica model and device\), "
              r"got 'meta-llama/Llama-2-7b-hf'",
    ):
        install_profiles(profiles, tmp_path / "cache", compute_repo_id="local/vidur-a100-codellama-34b", **CLUSTER)


def test_mismatched_network_device_is_explained(profiles, tmp_path):
    with pytest.raises(VidurSetupError, match=r"no network profiling dataset with config\.json sku='h100_dgx'"):
        install_profiles(profiles, tmp_path / "cache", model=MODEL, device="a100", network_device="h100_dgx")
    with pytest.raises(VidurSetupError, match=r"'local/nope' not found"):
        install_profiles(profiles, tmp_path / "cache", network_repo_id="local/nope", **CLUSTER)


def test_folder_precedence(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setenv(PROFILES_ENV_VAR, str(tmp_path / "b"))
    assert resolve_profiles_dir(str(tmp_path / "a")) == tmp_path / "a"  # config key wins
    assert resolve_profiles_dir(None) == tmp_path / "b"  # then the environment variable
    monkeypatch.delenv(PROFILES_ENV_VAR)
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "c"))
    assert resolve_cache_dir(None) == tmp_path / "c"
    monkeypatch.delenv(CACHE_ENV_VAR)
    assert resolve_cache_dir(None) == project_root() / ".cache" / "vidur"
    assert resolve_cache_dir("rel/dir") == project_root() / "rel" / "dir"


def test_default_profiles_dir_through_a_symlinked_shared_folder(tmp_path, monkeypatch):
    """The default is ``../shared/vidur/profiles``; ``../shared`` may be a symbolic link (a worktree's is)."""
    import schedulers.sim.profiles as vidur_profiles

    project = tmp_path / "checkout" / "project"
    project.mkdir(parents=True)
    real = tmp_path / "elsewhere" / "shared"
    (real / "vidur" / "profiles").mkdir(parents=True)
    (project.parent / "shared").symlink_to(real, target_is_directory=True)
    monkeypatch.setattr(vidur_profiles, "project_root", lambda: project)
    monkeypatch.delenv(PROFILES_ENV_VAR, raising=False)
    found = resolve_profiles_dir(None)
    # compare resolved paths: the link and its target name the same folder
    assert found.resolve() == (project.parent / "shared" / "vidur" / "profiles").resolve()
    assert found.resolve() == (real / "vidur" / "profiles").resolve()
    assert found == default_profiles_dir()


def test_env_reports_bad_profiles_before_training(tiny_config, tmp_path):
    from schedulers.sim.env import VidurRoutingEnv

    cfg = dataclasses.replace(tiny_config, profiles_dir=str(tmp_path / "missing"), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(VidurSetupError, match="missing.*does not exist"):
        VidurRoutingEnv(cfg, compute_reward=False)
    other = dataclasses.replace(tiny_config, device="h100", cache_dir=str(tmp_path / "cache"))
    with pytest.raises(VidurSetupError, match=r"device_sku='h100'"):
        VidurRoutingEnv(other, compute_reward=False)
