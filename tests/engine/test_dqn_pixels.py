"""DQN on image observations end to end: uint8 frames from the env stay uint8 in the replay buffer (one byte per
pixel, also the n-step next frames), the CNN chosen by the encoder logic feeds the (dueling) Q head, and a
Rainbow-style update (double Q, dueling, 3-step returns, prioritized replay) trains on them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlightning.utils.config import config_from_dict

LOCAL = {"remote_env": False, "remote_eval": False, "remote_train": False, "remote_storage": False}


class FramesEnv(gym.Env):
    """Stacked uint8 frames, channels first as frame stacking of grayscale Atari frames gives ``(4, 36, 36)``:
    a bright column moves right each step; action 1 is rewarded."""

    def __init__(self, side: int = 36):
        self.observation_space = spaces.Box(0, 255, (4, side, side), np.uint8)
        self.action_space = spaces.Discrete(3)
        self.side, self.t = side, 0

    def _obs(self):
        frames = np.zeros(self.observation_space.shape, np.uint8)
        for k in range(4):
            frames[k, :, (self.t + k) % self.side] = 255
        return frames

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action == 1), self.t >= 12 and self.t % 5 == 0, self.t >= 20, {}


def _config(tmp_path, policy: dict, buffer: dict):
    return config_from_dict(
        {
            "env": {"name": "tests.engine.test_dqn_pixels:FramesEnv", "num_envs": 2},
            "policy": {"type": "dqn", "hidden_sizes": [32], "epsilon_decay_steps": 100, **policy},
            "buffer": {"type": "replay", "capacity": 512, **buffer},
            "train": {"iterations": 3, "rollout_steps": 16, "batch_size": 16, "learning_starts": 16},
            "cluster": {**LOCAL, "inference": "env_workers"},
            "log": {"progress": False, "run_dir": str(tmp_path)},
        }
    )


RAINBOW = (
    {"double_q": True, "dueling": True, "n_step": 3, "priority_beta_start": 0.4, "priority_beta_steps": 200},
    {"sampler": "prioritized", "priority_beta": 0.4},
)


@pytest.mark.parametrize("setting", [({}, {"sampler": "uniform"}), RAINBOW], ids=["dqn", "rainbow"])
def test_dqn_trains_on_uint8_frames_stored_as_uint8_through_the_cnn(tmp_path, build, setting):
    from rlightning.policy.algorithms.dqn import DuelingHead
    from rlightning.policy.networks import NatureCNN

    policy, buffer = setting
    e = build(_config(tmp_path, {"cnn": "nature", **policy}, buffer)).engine
    learner = e.policy_group.train_workers[0].worker
    assert isinstance(learner.encoder, NatureCNN) and learner.encoder.channels == 4
    assert not learner.encoder.channels_last  # (4, 36, 36): channels first, told from the shape
    assert isinstance(learner.q, DuelingHead) == bool(policy.get("dueling"))
    assert "encoder_target" in learner.modules  # the CNN is trained, so the target network has its own copy
    for _ in range(3):
        metrics = e.step()
    assert np.isfinite(metrics["q_loss"]), metrics
    batch = e.buffer.sample(8)[0]
    frame_keys = ["obs", "next_obs"] + (["nstep_next_obs"] if policy.get("n_step", 1) > 1 else [])
    for key in frame_keys:
        assert batch[key].dtype == torch.uint8 and tuple(batch[key].shape[1:]) == (4, 36, 36), key
    assert int(batch["obs"].max()) == 255  # raw pixels, not scaled on the way in
    with torch.no_grad():  # scaled to [0, 1] inside the Q network
        torch.testing.assert_close(learner.q_values(batch["obs"]), learner.q_values(batch["obs"].float() / 255.0))
    # one byte per pixel in the shard: the frame keys and a few small columns, never 4-byte floats
    frame_bytes = 4 * 36 * 36
    nbytes = sum(st["nbytes"] for st in e.buffer.shards.call_all("stats"))
    assert 512 * len(frame_keys) * frame_bytes <= nbytes < 512 * (len(frame_keys) + 1) * frame_bytes, nbytes


def test_the_atari_dqn_preset_builds_and_trains_a_few_iterations_on_pong(tmp_path, build):
    """atari_dqn through ale-py: the standard preprocessing gives (4, 84, 84) uint8 frames, the Nature CNN takes
    them channels first, and they reach the replay buffer as uint8. The buffer and the start of learning are
    shrunk (the preset's 100k-frame buffer is 5.6 GB of frames; its learning starts at 80k frames)."""
    from rlightning.policy.networks import NatureCNN
    from rlightning.utils.config import apply_overrides, load_preset

    torch.set_num_threads(1)
    cfg = apply_overrides(
        load_preset("atari_dqn"),
        ["log.progress=false", f"log.run_dir={tmp_path}", "buffer.capacity=256", "train.learning_starts=32"],
    )
    e = build(cfg).engine
    learner = e.policy_group.train_workers[0].worker
    assert isinstance(learner.encoder, NatureCNN) and learner.encoder.obs_shape == (4, 84, 84)
    assert not learner.encoder.channels_last and learner.n_actions == 6
    for _ in range(10):  # 40 env steps: training starts at the 9th iteration
        metrics = e.step()
    assert e.env_steps == 40 and np.isfinite(metrics["q_loss"]), metrics
    batch = e.buffer.sample(4)[0]
    assert batch["obs"].dtype == torch.uint8 and batch["next_obs"].dtype == torch.uint8
    assert tuple(batch["obs"].shape) == (4, 4, 84, 84)
