"""Tests of rlightning/env/base_env.py: the env worker interface and its argument checks."""

import numpy as np
import pytest

from rlightning.env import BaseEnv, GymnasiumEnv
from rlightning.types import EnvMeta, EnvRet, PolicyResponse
from rlightning.utils.config import EnvConfig


class _Minimal(BaseEnv):
    def reset(self, seed=None, options=None):
        return EnvRet(self.env_id, np.zeros((self.num_envs, 1), np.float32))

    def step(self, policy_resp):
        self.check_policy_resp(policy_resp)
        return EnvRet(
            self.env_id,
            np.zeros((self.num_envs, 1), np.float32),
            last_reward=np.ones(self.num_envs, np.float32),
            last_terminated=np.ones(self.num_envs, bool),
            last_truncated=np.zeros(self.num_envs, bool),
            info={"episode_return": np.full(self.num_envs, 5.0), "episode_length": np.full(self.num_envs, 5)},
        )

    def get_metadata(self):
        return EnvMeta(self.env_id, num_envs=self.num_envs)


def test_base_env_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        BaseEnv(EnvConfig())


def test_attributes_from_config_and_index():
    env = _Minimal(EnvConfig(name="my:Env", num_envs=3), worker_index=4)
    assert env.env_id == "my.Env-4" and env.get_env_id() == "my.Env-4" and env.ping() == "my.Env-4"
    assert env.num_envs == 3 and env.worker_index == 4
    assert env.episode_stats() == {"env_id": "my.Env-4", "num_envs": 3, "env_steps": 0, "episodes": 0}
    env.close()


def test_constructor_argument_errors():
    with pytest.raises(TypeError, match=r"config must be an EnvConfig, got dict"):
        _Minimal({"name": "CartPole-v1"})
    with pytest.raises(ValueError, match=r"worker_index must be an int >= 0, got -1"):
        _Minimal(EnvConfig(), worker_index=-1)
    with pytest.raises(ValueError, match=r"num_envs must be an int >= 1 \(sub-environments per worker\), got 0"):
        _Minimal(EnvConfig.model_construct(num_envs=0, name="x"))
    with pytest.raises(TypeError, match=r"preprocess_fn must be callable"):
        _Minimal(EnvConfig(), preprocess_fn="action")


def test_num_envs_below_one_is_rejected_by_the_config():
    with pytest.raises(ValueError, match=r"num_envs"):
        EnvConfig(num_envs=0)


def test_check_policy_resp_rejects_other_envs_and_other_types():
    env = _Minimal(EnvConfig(), worker_index=0)
    with pytest.raises(ValueError, match=r"env CartPole-v1-0: got a PolicyResponse for env 'CartPole-v1-1'"):
        env.step(PolicyResponse("CartPole-v1-1", action=np.zeros(1)))
    with pytest.raises(TypeError, match=r"env CartPole-v1-0: step\(\) takes a PolicyResponse, got dict"):
        env.step({"action": np.zeros(1)})


def test_step_report_returns_the_finished_episodes():
    """step_report moved from BaseEnv to the RolloutWorker that holds the env (BaseEnv: reset/step/metadata)."""
    from rlightning.env import RolloutWorker

    worker = RolloutWorker(_Minimal, EnvConfig(num_envs=2))
    assert not hasattr(worker.env, "step_report") and not hasattr(worker.env, "collect")
    env_ret, (returns, lengths) = worker.step_report(PolicyResponse(worker.env_id, action=np.zeros(2)))
    assert isinstance(env_ret, EnvRet)
    assert returns == [5.0, 5.0] and lengths == [5, 5]


def test_gymnasium_env_is_a_base_env():
    assert issubclass(GymnasiumEnv, BaseEnv)
