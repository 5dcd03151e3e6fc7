"""The conformance matrix: every built-in algorithm x placement x observation / action space trains two
iterations, or the build refuses it at once with an error naming the policy, the space and what would work.

No cell may fail from inside (an IndexError, a KeyError, a dead actor): an error from a cell that should train
fails the test with the cell's name. Masked cells use `SpaceEnv(mask=True)`, which raises on any action its
mask did not allow, so a path that ignores the mask fails too.
"""

from __future__ import annotations

import pytest

from rlightning.utils.config import ConfigError, config_from_dict
from rlightning.utils.registry import POLICIES
from tests.support.space_envs import ACTION_KINDS as ENV_ACTIONS
from tests.support.space_envs import OBS_KINDS

ENV = "tests.support.space_envs:SpaceEnv"
ON_POLICY_SEQ = {"type": "rollout", "unit": "episode", "capacity": 64, "sampler": "all"}
ALGOS = {
    "ppo": ({"type": "ppo", "num_minibatches": 2, "update_epochs": 1}, {"type": "rollout", "sampler": "all"}),
    "a2c": ({"type": "a2c"}, {"type": "rollout", "sampler": "all"}),
    "recurrent_ppo": ({"type": "ppo", "recurrent": "gru", "recurrent_size": 8, "num_minibatches": 1}, ON_POLICY_SEQ),
    "appo": ({"type": "appo", "num_minibatches": 1, "update_epochs": 1}, ON_POLICY_SEQ),
    "impala": ({"type": "impala"}, ON_POLICY_SEQ),
    "dqn": ({"type": "dqn", "epsilon_decay_steps": 50}, {"type": "replay", "sampler": "uniform"}),
    "sac": ({"type": "sac"}, {"type": "replay", "sampler": "uniform"}),
    "td3": ({"type": "td3"}, {"type": "replay", "sampler": "uniform"}),
}
LOCAL = {"remote_env": False, "remote_eval": False, "remote_train": False, "remote_storage": False}
RAY = {**LOCAL, "remote_env": True, "remote_eval": True}
PLACEMENTS = {
    "env_workers": (LOCAL, "env_workers", "syncrl"),
    "eval_workers": (LOCAL, "eval_workers", "syncrl"),
    "ray_env_workers": (RAY, "env_workers", "syncrl"),
    "ray_eval_workers": (RAY, "eval_workers", "syncrl"),
    "asyncrl": (LOCAL, "eval_workers", "asyncrl"),
}
NATURAL_ACTION = {"sac": "box_asym", "td3": "box_asym"}  # the others: Discrete(4, start=1)
ACTION_OF_KIND = {"discrete_start": "discrete", "multi_discrete": "multi_discrete", "multi_binary": "multi_binary"}


def _config(tmp_path, algo: str, placement: str, obs: str, act: str, mask: bool):
    policy, buffer = ALGOS[algo]
    cluster, inference, engine = PLACEMENTS[placement]
    return config_from_dict(
        {
            "engine": engine,
            "env": {
                "name": ENV,
                "num_workers": 2,
                "num_envs": 2,
                "num_cpus": 0.25,
                "env_kwargs": {"obs": obs, "act": act, "mask": mask},
            },
            "policy": {"hidden_sizes": [16], "cnn": "minatar", **policy},
            "buffer": {"capacity": 256, **buffer},
            "train": {"iterations": 2, "rollout_steps": 8, "batch_size": 16, "learning_starts": 16},
            "cluster": {
                **cluster,
                "inference": inference,
                "eval_each_cpu_num": 0.25,
                "train_each_cpu_num": 0.25,
                "buffer_each_cpu_num": 0.25,
            },
            "log": {"progress": False, "run_dir": str(tmp_path)},
        }
    )


def _refusal(algo: str, placement: str, act: str, mask: bool) -> str | None:
    """The build error a cell must give (a regex), or None when it must train."""
    supported = POLICIES.get(ALGOS[algo][0]["type"]).supported_action_spaces
    kind = ACTION_OF_KIND.get(act, "continuous")
    if kind not in supported:
        return rf"policy '{ALGOS[algo][0]['type']}' supports {', '.join(supported)} actions.*{kind} action space"
    if mask and kind not in ("discrete", "multi_discrete"):
        return r"'action_mask' observation, which masks Discrete and MultiDiscrete actions"
    engine = PLACEMENTS[placement][2]
    if engine == "asyncrl" and algo in ("ppo", "a2c", "recurrent_ppo"):
        return r"engine 'asyncrl' with buffer.type 'rollout' trains on data acted with stale weights"
    return None


def _run_cell(build, tmp_path, algo, placement, obs, act, mask):
    cfg = _config(tmp_path, algo, placement, obs, act, mask)
    expected = _refusal(algo, placement, act, mask)
    if expected is not None:
        with pytest.raises(ConfigError, match=expected):
            build(cfg)
        return
    engine = build(cfg).engine
    for _ in range(2):
        metrics = engine.step()
    assert engine.env_steps >= 2 * 8 * 2 * 2, (algo, placement, obs, act, engine.env_steps)
    losses = [v for k, v in metrics.items() if "loss" in k and isinstance(v, float)]
    assert all(v == v for v in losses), metrics  # no NaN losses


def _local_cells():
    for algo in ALGOS:
        natural = NATURAL_ACTION.get(algo, "discrete_start")
        for placement in ("env_workers", "eval_workers"):
            for obs in OBS_KINDS:
                yield pytest.param(algo, placement, obs, natural, False, id=f"{algo}-{placement}-obs_{obs}")
            for act in ENV_ACTIONS:
                if act != natural:
                    yield pytest.param(algo, placement, "box", act, False, id=f"{algo}-{placement}-act_{act}")
            yield pytest.param(algo, placement, "nested_dict", natural, True, id=f"{algo}-{placement}-masked")
            if natural == "discrete_start":
                yield pytest.param(algo, placement, "box", "multi_discrete", True, id=f"{algo}-{placement}-masked_md")
        # the async engine (local workers): a masked nested Dict, or a nested Dict for continuous actions
        yield pytest.param(algo, "asyncrl", "nested_dict", natural, natural != "box_asym", id=f"{algo}-asyncrl")


@pytest.mark.slow
@pytest.mark.parametrize("algo, placement, obs, act, mask", list(_local_cells()))
def test_local_cell_trains_or_is_refused_at_build(build, tmp_path, algo, placement, obs, act, mask):
    _run_cell(build, tmp_path, algo, placement, obs, act, mask)


def _ray_cells():
    """One algorithm per family with Ray env workers answered by Ray eval workers (the per-step layout), and with
    Ray env workers acting with their own copies: what Ray adds to the local cells is the transport of the
    structured observations, masks and outputs, which the families share (CI time: each cell starts actors)."""
    for algo, placements in {
        "ppo": ("ray_eval_workers", "ray_env_workers"),
        "recurrent_ppo": ("ray_eval_workers",),
        "appo": ("ray_env_workers",),
        "dqn": ("ray_eval_workers",),
        "sac": ("ray_eval_workers",),
    }.items():
        natural = NATURAL_ACTION.get(algo, "discrete_start")
        for placement in placements:
            yield pytest.param(algo, placement, "nested_dict", natural, natural != "box_asym", id=f"{algo}-{placement}")


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.parametrize("algo, placement, obs, act, mask", list(_ray_cells()))
def test_ray_cell_trains_or_is_refused_at_build(ray_runtime, build, tmp_path, algo, placement, obs, act, mask):
    _run_cell(build, tmp_path, algo, placement, obs, act, mask)


@pytest.mark.slow
@pytest.mark.parametrize("inference", ["env_workers", "eval_workers"])
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_multi_agent_masked_cell_trains(build, tmp_path, algo, inference):
    """PettingZoo's convention, per agent: each agent's Dict observation carries its action_mask."""
    policy, buffer = ALGOS[algo]
    cfg = config_from_dict(
        {
            "env": {"backend": "pettingzoo", "name": "tests.support.pz_envs:masked_pair", "num_envs": 2},
            "policy": {"hidden_sizes": [16], **policy},
            "buffer": {"capacity": 256, **buffer},
            "train": {"iterations": 2, "rollout_steps": 8, "batch_size": 16, "learning_starts": 16},
            "cluster": {**LOCAL, "inference": inference},
            "log": {"progress": False, "run_dir": str(tmp_path)},
        }
    )
    if inference == "eval_workers":  # refused at build, naming what works
        with pytest.raises(ConfigError, match=r"multi-agent env .* trains with cluster.inference='env_workers'"):
            build(cfg)
        return
    engine = build(cfg).engine
    for _ in range(2):
        metrics = engine.step()
    assert engine.env_steps == 2 * 8 * 2, metrics
