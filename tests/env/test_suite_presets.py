"""The env-suite presets: each loads, and without its suite's package fails in validation with the install hint."""

from __future__ import annotations

import importlib
import importlib.util

import gymnasium as gym
import pytest

from rlightning.env import suites
from rlightning.env.suites import MissingSuiteError
from rlightning.utils.config import load_preset
from rlightning.utils.validate import validate_config

PRESETS = {  # preset: (env id, module its suite needs, extra)
    "minatar_ppo": ("MinAtar/Breakout-v1", "minatar", "minatar"),
    "minatar_dqn": ("MinAtar/Breakout-v1", "minatar", "minatar"),
    "minatar_appo": ("MinAtar/Breakout-v1", "minatar", "minatar"),
    "atari_ppo": ("ALE/Pong-v5", "ale_py", "atari"),
    "atari_dqn": ("ALE/Pong-v5", "ale_py", "atari"),
    "mujoco_ppo": ("HalfCheetah-v5", "mujoco", "mujoco"),
    "mujoco_sac": ("HalfCheetah-v5", "mujoco", "mujoco"),
    "lunar_ppo": ("LunarLander-v3", "Box2D", "box2d"),
}


def _without(monkeypatch, missing: str):
    real_import, real_find = importlib.import_module, importlib.util.find_spec

    def fake_import(name, *args, **kwargs):
        if name == missing or name.startswith(missing + "."):
            raise ModuleNotFoundError(f"No module named {missing!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(suites.importlib, "import_module", fake_import)
    monkeypatch.setattr(suites.importlib.util, "find_spec", lambda n, *a: None if n == missing else real_find(n, *a))


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_preset_whose_suite_is_missing_fails_in_validation_with_the_install_hint(monkeypatch, preset):
    env_id, missing, extra = PRESETS[preset]
    cfg = load_preset(preset)
    assert cfg.env.name == env_id
    for key in [k for k in gym.registry if k.split("/")[0] == env_id.split("/")[0] and "/" in env_id]:
        monkeypatch.delitem(gym.registry, key)  # a fresh process: the suite's ids are not registered yet
    _without(monkeypatch, missing)
    with pytest.raises(MissingSuiteError, match=rf'env {env_id!r} is from the .* pip install "rlightning\[{extra}\]"'):
        validate_config(cfg)


@pytest.mark.parametrize("preset", ["minatar_ppo", "minatar_dqn", "minatar_appo"])
def test_the_minatar_presets_validate_and_build_their_env_with_the_papers_network(preset):
    from rlightning.env.gym_env import GymnasiumEnv
    from rlightning.policy.networks import MinAtarCNN, build_encoder

    cfg = load_preset(preset)
    validate_config(cfg)
    env = GymnasiumEnv(cfg.env)
    try:
        space = env.single_observation_space
        assert space.shape == (10, 10, 4) and space.dtype == bool
        enc = build_encoder(space, cnn=cfg.policy.cnn)
        assert isinstance(enc, MinAtarCNN) and enc.channels == 4 and enc.channels_last
    finally:
        env.close()


@pytest.mark.parametrize("preset", ["atari_ppo", "atari_dqn"])
def test_the_atari_presets_wrappers_resolve_to_the_standard_preprocessing(preset):
    from rlightning.env.wrappers import resolve_wrappers

    specs = resolve_wrappers(load_preset(preset).env.wrappers)
    assert [s.cls for s in specs] == [
        gym.wrappers.AtariPreprocessing,
        gym.wrappers.ClipReward,
        gym.wrappers.FrameStackObservation,
    ]
    assert specs[0].kwargs["screen_size"] == 84 and specs[2].kwargs == {"stack_size": 4}
