"""Recurrent PPO end to end: the state carried in the record re-runs to the same log-probs and values.

Two rollouts per layout (the second continues the episodes of the first from a non-zero state), stored as
episode pieces (``buffer.unit: episode``), then re-run through the train worker's core from each piece's
stored first state: if the state were not carried, not reset at episode starts or misaligned with its
step anywhere on the way (env worker copy, eval worker, Ray actor, record, storage), the re-run log-probs
and values would differ from the ones the acting policy computed.
"""

import pytest
import torch

from rlightning.policy.algorithms.recurrent_ppo import sequence_dataset
from rlightning.utils.config import ConfigError, apply_overrides, load_preset
from rlightning.utils.validate import validate_config


def _replay(engine):
    """Per-step log-prob and value differences between acting and a training re-run of the stored sequences."""
    batch = engine.buffer.sample(None)[0]
    policy = engine.policy_group.train_workers[0].worker
    ds = sequence_dataset(policy, batch, "action")
    b, length = ds["obs"].shape[:2]
    with torch.no_grad():
        feats = policy.encoder(ds["obs"].reshape((b * length,) + tuple(ds["obs"].shape[2:]))).reshape(b, length, -1)
        y = policy.core.unroll(feats, {k: ds[k] for k in policy.core.state_keys}, ds["is_init"])
        y_pi, y_vf = y if isinstance(y, tuple) else (y, y)  # one core each, or one shared (the preset's)
        logp, _ = policy.log_prob_entropy(y_pi.reshape(b * length, -1), ds["action"].reshape(-1))
        value = policy.critic(y_vf.reshape(b * length, -1)).squeeze(-1)
    mask = ds["mask"].reshape(-1)
    dlogp = (logp - ds["log_prob"].reshape(-1))[mask].abs().max().item()
    dvalue = (value - ds["value"].reshape(-1))[mask].abs().max().item()
    return batch, dlogp, dvalue


def _check_two_rollouts(build, tmp_path, overrides):
    cfg = apply_overrides(
        load_preset("lstm_ppo"),
        ["log.progress=false", f"log.run_dir={tmp_path}", "train.rollout_steps=40", "env.num_envs=3", *overrides],
    )
    e = build(cfg).engine
    e.rollout()
    e.rollout()
    batch, dlogp, dvalue = _replay(e)
    mask, is_init = batch["mask"], batch["is_init"]
    assert mask.sum() > 200  # both rollouts' valid steps, as pieces of episodes
    assert not is_init[:, 1:][mask[:, 1:]].any()  # a piece lies within one episode: it may only start one
    starts = batch["recurrent_h"][:, 0]
    continued = ~is_init[:, 0]
    assert continued.any() and starts[continued].abs().sum(-1).gt(0).all()  # pieces resuming an episode
    assert starts[~continued].abs().sum() == 0  # pieces starting an episode start from zero
    assert dlogp < 1e-5 and dvalue < 1e-4, (dlogp, dvalue)


def test_sequences_replay_exactly_env_worker_copies(build, tmp_path):
    _check_two_rollouts(build, tmp_path, ["cluster.inference=env_workers"])


def test_sequences_replay_exactly_eval_workers_per_step(build, tmp_path):
    overrides = ["cluster.inference=eval_workers", "policy.recurrent=gru", "policy.recurrent_shared=false"]
    _check_two_rollouts(build, tmp_path, overrides)


@pytest.mark.ray
def test_sequences_replay_exactly_ray_env_workers(build, tmp_path, ray_runtime):
    _check_two_rollouts(build, tmp_path, ["cluster.inference=env_workers", "cluster.remote_env=true"])


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["buffer.unit=transition"], "set buffer.unit to 'episode' \\(got 'transition'\\)"),
        (["cluster.inference=eval_workers", "cluster.eval_worker_num=2"], "use cluster.eval_worker_num=1"),
    ],
)
def test_recurrent_ppo_configs_that_cannot_work_are_refused_before_building(overrides, match):
    cfg = apply_overrides(load_preset("lstm_ppo"), overrides)
    with pytest.raises(ConfigError, match=match):
        validate_config(cfg)
