"""The device-resident env (``env.backend: gymnax``): JAX envs through DLPack, rollouts and records in torch."""

from __future__ import annotations

import contextlib
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("gymnax", reason="the jax extra (in dev) is not installed")

from rlightning.env import RolloutWorker  # noqa: E402
from rlightning.env.gymnax_env import GymnaxEnv, make_gymnax  # noqa: E402
from rlightning.env.suites import MissingSuiteError  # noqa: E402
from rlightning.env.utils.episodes import EpisodeIds  # noqa: E402
from rlightning.env.utils.tensor_record_writer import _episode_ids  # noqa: E402
from rlightning.types import PolicyResponse  # noqa: E402
from rlightning.utils.config import EnvConfig, PolicyConfig, apply_overrides, load_preset  # noqa: E402


def _config(num_envs: int = 16, **kwargs) -> EnvConfig:
    return EnvConfig(name="CartPole-v1", backend="gymnax", num_envs=num_envs, **kwargs)


@contextlib.contextmanager
def no_numpy_from_tensors():
    """Every way a torch tensor becomes (or is read as) a numpy array raises inside the block: ``Tensor.numpy``,
    ``Tensor.__array__`` (``np.asarray``, ``np.any`` ... on a tensor) and ``torch.from_numpy`` of data."""

    from_numpy = torch.from_numpy

    def refuse(*args, **kwargs):
        raise AssertionError("a numpy round trip on the device path")

    def refuse_data(array):  # an empty array is a dtype probe (record validation), not data
        if np.size(array):
            refuse()
        return from_numpy(array)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.Tensor, "numpy", refuse)
        mp.setattr(torch.Tensor, "__array__", refuse)
        mp.setattr(torch, "from_numpy", refuse_data)
        yield


def _engine(tmp_path, preset: str, backend: str, overrides: list):
    """The engine of ``preset`` on the device env ``backend``, logging into ``tmp_path``, with ``overrides``."""
    from rlightning.utils.builders import build_run

    base = ["log.progress=false", f"log.run_dir={tmp_path}", f"env.backend={backend}"]
    return build_run(apply_overrides(load_preset(preset), base + overrides)).engine


def _ppo_worker(num_envs: int) -> RolloutWorker:
    from rlightning.policy.algorithms.ppo import PPOPolicy

    worker = RolloutWorker(GymnaxEnv, _config(num_envs))
    worker.attach_policy(PPOPolicy.acting_copy_factory(PolicyConfig(type="ppo"), worker.get_metadata(), seed=0))
    return worker


def test_env_steps_next_step_autoreset_with_tensors():
    env = GymnaxEnv(_config(16, max_episode_steps=5))
    first = env.reset(seed=0)
    assert isinstance(first.observation, torch.Tensor) and first.observation.shape == (16, 4)
    assert first.observation.device == env.device
    seen_trunc = False
    prev_done = torch.zeros(16, dtype=torch.bool)
    for _ in range(12):
        ret = env.step(PolicyResponse(env.env_id, action=torch.zeros(16, dtype=torch.int64)))
        done = ret.last_terminated | ret.last_truncated
        # a row done on the previous step comes back reset: reward 0, not done, fresh totals
        assert torch.all(ret.last_reward[prev_done] == 0)
        assert not torch.any(done[prev_done])
        assert torch.all(ret.info["episode_length"][prev_done] == 0)
        assert torch.all(ret.info["episode_length"] <= 5)
        seen_trunc |= bool(ret.last_truncated.any())
        # a truncated row reached the time limit without failing
        assert torch.all(ret.info["episode_length"][ret.last_truncated] == 5)
        assert not torch.any(ret.last_terminated & ret.last_truncated)
        prev_done = done
    assert seen_trunc or bool((ret.info["episode_length"] < 5).all())
    meta = env.get_metadata()
    assert meta.num_envs == 16 and meta.action_space.n == 2 and meta.observation_space.shape == (4,)


@pytest.mark.parametrize("resetting", [4, 64], ids=["few rows (gathered)", "every row (selected)"])
def test_only_done_rows_reset_each_with_its_own_draw(resetting):
    # 64 rows: the first `resetting` push left every step (CartPole falls in about 10 steps), the rest alternate
    # (they stay up); a step resets at most 16 rows by gathering them, more by a select over every row.
    env = GymnaxEnv(_config(64))
    env.reset(seed=3)
    action = torch.zeros(64, dtype=torch.int64)
    prev_done, resets, most = torch.zeros(64, dtype=torch.bool), 0, 0
    for t in range(40):
        action[resetting:] = t % 2
        ret = env.step(PolicyResponse(env.env_id, action=action.clone()))
        obs, length = ret.observation, ret.info["episode_length"]
        # every reset row is a fresh CartPole (each coordinate drawn from [-0.05, 0.05]) with its own draw
        fresh = obs[prev_done]
        assert torch.all(fresh.abs() <= 0.05) and torch.all(length[prev_done] == 0)
        assert len({tuple(row.tolist()) for row in fresh}) == len(fresh)
        # no other row was touched
        assert torch.all(length[~prev_done] > 0)
        resets, most = resets + int(prev_done.sum()), max(most, int(prev_done.sum()))
        prev_done = ret.last_terminated | ret.last_truncated
    assert resets >= 2 * resetting
    assert (most <= 16) == (resetting <= 16), f"the step that reset most rows reset {most}"


def test_rollout_is_torch_end_to_end_without_numpy():
    """A PPO rollout of the device env (env, actor, record writer) and its record: no tensor is turned into numpy
    and every record tensor is on the env's device (the same monitor trips on the gymnasium backend's rollout, so
    it can fail); the storage takes the record."""
    from rlightning.buffer.utils.storage import Storage
    from rlightning.policy.algorithms.ppo import PPOPolicy

    worker = _ppo_worker(16)
    worker.reset(seed=0)
    storage = Storage(16 * 40, env_meta_list=[worker.get_metadata()], seed=0)
    for _ in range(2):
        with no_numpy_from_tensors():
            result = worker.collect(20)
            record = result.record
        storage.add_rollout(record)  # the storage plans its episode slices on the host (lengths, not data)
    env_device = worker.env.device
    for key in ("obs", "action", "log_prob", "value", ("next", "obs"), ("next", "reward"), ("next", "value")):
        assert record[key].device == env_device, key
    assert record.batch_size == torch.Size([16, 20])
    assert storage.size > 0
    assert result.episode_returns and all(r >= 1 for r in result.episode_returns)

    from rlightning.env.gym_env import GymnasiumEnv

    numpy_worker = RolloutWorker(GymnasiumEnv, EnvConfig(name="CartPole-v1", num_envs=4))
    numpy_worker.attach_policy(
        PPOPolicy.acting_copy_factory(PolicyConfig(type="ppo"), numpy_worker.get_metadata(), seed=0)
    )
    numpy_worker.reset(seed=0)
    with pytest.raises(AssertionError, match="numpy round trip"), no_numpy_from_tensors():
        numpy_worker.collect(4).record  # noqa: B018 - building the record is what trips


def test_record_episode_ids_match_the_numpy_writer():
    rng = np.random.default_rng(0)
    for n, t in ((4, 7), (3, 1), (5, 12)):
        valid = rng.random((n, t)) > 0.3
        ref, dev = EpisodeIds(n, base=10), EpisodeIds(n, base=10)
        ref.reset(), dev.reset()
        for _ in range(3):
            want = ref.assign(valid)
            got = _episode_ids(dev, torch.as_tensor(valid))
            assert torch.equal(got, torch.as_tensor(want))
            valid = rng.random((n, t)) > 0.3
        assert dev._next == ref._next  # noqa: SLF001


def test_episode_returns_reported_once_per_rollout():
    worker = _ppo_worker(16)
    worker.reset(seed=1)
    result = worker.collect(60)
    rec = result.record
    done = rec["next", "done"]
    assert len(result.episode_returns) == int(done.sum())
    assert result.episode_lengths == [int(x) for x in result.episode_returns]  # CartPole: 1 per step


def test_unknown_gymnax_id_names_close_ids():
    with pytest.raises(KeyError, match=r"'CartPol-v1' is not a gymnax id.*'CartPole-v1'"):
        make_gymnax("CartPol-v1")
    with pytest.raises(ValueError, match=r"env_kwargs \['gravty'\].*valid: .*gravity"):
        make_gymnax("CartPole-v1", {"gravty": 3.0})


def test_env_kwargs_override_params():
    _, params = make_gymnax("CartPole-v1", {"gravity": 3.0})
    assert params.gravity == 3.0


def test_missing_jax_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax raises ImportError
    with pytest.raises(MissingSuiteError, match=r'pip install "rlightning\[jax\]"'):
        make_gymnax("CartPole-v1")


def test_bad_action_shape_is_the_callers_error():
    from rlightning.env.errors import is_caller_error

    env = GymnaxEnv(_config(16))
    env.reset(seed=0)
    with pytest.raises(
        ValueError, match=r"action of shape \(3,\) does not fit 16 sub-envs.*expected shape \(16,\)"
    ) as e:
        env.step(PolicyResponse(env.env_id, action=torch.zeros(3, dtype=torch.int64)))
    assert is_caller_error(e.value)
    with pytest.raises(ValueError, match=r"action 2 is outside Discrete\(2\); valid actions are 0..1") as e:
        env.step(PolicyResponse(env.env_id, action=torch.full((16,), 2)))
    assert is_caller_error(e.value)
    with pytest.raises(ValueError, match="step\\(\\) before reset"):
        GymnaxEnv(_config(16)).step(PolicyResponse(env.env_id, action=torch.zeros(16)))


@pytest.mark.slow
def test_gymnax_cartpole_1024_envs_trains_ppo_to_475(tmp_path):
    """PPO on gymnax CartPole with 1024 envs reaches the cartpole_ppo presets' target (a mean return of 475 over
    20 episodes, the bar gymnasium's CartPole is held to in tests/engine/test_learning.py) within 1M env steps.

    Settings: cartpole_ppo_fast with 1024 envs x 16 steps per iteration, 8 minibatches of 2048, 4 epochs. Seed 1
    reached 478.65 at 606k env steps (37 iterations, about 60 s on two busy cores); a 500-step episode alone needs
    500 vector steps (512k env steps at 1024 envs), so 1M leaves room.
    """
    overrides = ["env.num_envs=1024", "train.rollout_steps=16", "buffer.capacity=16400", "train.iterations=60"]
    engine = _engine(
        tmp_path, "cartpole_ppo_fast", "gymnax", overrides + ["policy.num_minibatches=8", "policy.update_epochs=4"]
    )
    try:
        engine.run(env_steps=1_000_000)
        assert engine.last_metrics["episode_return_mean"] >= 475, engine.last_metrics
        assert engine.env_steps <= 1_000_000 + 16 * 1024
    finally:
        engine.close()


# ------------------------------------------------------------------------------------------------------------- brax


def _brax_config(num_envs: int = 8, **kwargs) -> EnvConfig:
    # brax's "fast" env: a trivial one of its own (2 observations, 1 action), compiled in seconds on a CPU
    return EnvConfig(name="fast", backend="brax", num_envs=num_envs, **kwargs)


def test_brax_env_steps_next_step_autoreset_with_tensors():
    pytest.importorskip("brax", reason="brax (in dev) is not installed")
    from rlightning.env import BraxEnv
    from rlightning.utils.registry import ENVS

    assert ENVS.get("brax") is BraxEnv
    env = BraxEnv(_brax_config(8, max_episode_steps=4))
    first = env.reset(seed=0)
    meta = env.get_metadata()
    assert meta.observation_space.shape == (2,) and meta.action_space.shape == (1,)
    assert float(meta.action_space.low[0]) == -1.0 and float(meta.action_space.high[0]) == 1.0
    assert isinstance(first.observation, torch.Tensor) and first.observation.shape == (8, 2)
    prev_done = torch.zeros(8, dtype=torch.bool)
    truncated = 0
    for _ in range(11):
        with no_numpy_from_tensors():
            ret = env.step(PolicyResponse(env.env_id, action=torch.full((8, 1), 0.5)))
        done = ret.last_terminated | ret.last_truncated
        assert torch.all(ret.last_reward[prev_done] == 0) and not torch.any(done[prev_done])
        assert torch.all(ret.info["episode_length"][prev_done] == 0)
        assert torch.all(ret.info["episode_length"][ret.last_truncated] == 4)
        truncated += int(ret.last_truncated.sum())
        prev_done = done
    assert truncated == 8 * 2  # steps 4 and 9 of every row: the time limit, then a reset step, then 4 more
    with pytest.raises(KeyError, match=r"'fsat' is not a brax env.*'fast'"):
        BraxEnv(EnvConfig(name="fsat", backend="brax", num_envs=2))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "brax.envs", None)  # import brax.envs raises ImportError
        with pytest.raises(MissingSuiteError, match=r'needs jax and brax.*pip install "rlightning\[brax\]"'):
            BraxEnv(_brax_config(2))


def test_brax_ppo_rollout_without_numpy_and_two_engine_iterations(tmp_path):
    """Continuous PPO on a brax env: an env worker's rollout is torch end to end (the acting copy answers a tensor
    observation with tensors, the record stays on the env's device), and the engine trains two iterations."""
    pytest.importorskip("brax", reason="brax (in dev) is not installed")
    from rlightning.env import BraxEnv
    from rlightning.policy.algorithms.ppo import PPOPolicy

    worker = RolloutWorker(BraxEnv, _brax_config(8, max_episode_steps=6))
    worker.attach_policy(PPOPolicy.acting_copy_factory(PolicyConfig(type="ppo"), worker.get_metadata(), seed=0))
    worker.reset(seed=0)
    with no_numpy_from_tensors():
        record = worker.collect(10).record
    assert record.batch_size == torch.Size([8, 10])
    for key in ("obs", "action", "raw_action", "log_prob", "value", ("next", "obs")):
        assert record[key].device == worker.env.device, key
    assert float(record["action"].abs().max()) <= 1.0  # clipped to the Box in torch

    overrides = ["env.name=fast", "env.num_envs=16", "env.max_episode_steps=20", "env.wrappers=[]"]
    overrides += ["train.rollout_steps=8", "buffer.capacity=256", "train.iterations=2", "policy.num_minibatches=2"]
    engine = _engine(tmp_path, "mujoco_ppo", "brax", overrides + ["policy.update_epochs=1"])
    try:
        engine.run(iterations=2)
        assert engine.iteration == 2 and engine.env_steps == 2 * 16 * 8, (engine.iteration, engine.env_steps)
    finally:
        engine.close()
