"""Envs that raise: the worker is recreated, its episodes in flight dropped, the error counted; past
``max_restarts`` the run stops naming the env, the count and the exception; caller errors are never retried."""

from __future__ import annotations

import numpy as np
import pytest

from rlightning.env import EnvGroup, EnvWorkerError
from rlightning.env.errors import caller_error, classify_env_failure, is_caller_error
from rlightning.types import BatchedData, PolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.ray.handle import WorkerHandle
from tests.support.configs import small_ppo
from tests.support.env_flaky import count_lines

FLAKY = "tests.support.env_flaky:Flaky-v0"  # importing the module registers Flaky-v0
EPISODE = 5
IN_ENV_WORKERS = "cluster.inference=env_workers"
IN_EVAL_WORKERS = "cluster.inference=eval_workers"


def _flaky_run(tmp_path, build, layout, fail_every, *extra):
    cfg = small_ppo(
        tmp_path, False, f"env.name={FLAKY}", "env.max_restarts=1000", "train.target_return=null", layout, *extra
    )
    log = tmp_path / "raises.log"
    cfg.env.env_kwargs = {"episode_length": EPISODE, "fail_every": fail_every, "log_path": str(log)}
    return build(cfg).engine, log


def _assert_only_whole_episodes_are_complete(td):
    """Every stored step is a real step of one episode; every episode stored as complete is all of it."""
    obs, nxt = td["obs"].numpy(), td["next_obs"].numpy()
    terminated, truncated = td["terminated"].numpy(), td["truncated"].numpy()
    assert len(obs) > 0
    # No step pairs an action with the outcome of another episode (a reset after an error, say).
    np.testing.assert_array_equal(nxt[:, 0], obs[:, 0] + 1)
    np.testing.assert_array_equal(nxt[:, 1], obs[:, 1])
    np.testing.assert_array_equal(terminated, nxt[:, 0] == EPISODE)
    complete = truncated_ones = 0
    for u in np.unique(obs[:, 1]):  # u is drawn at reset: one value per episode
        rows = obs[:, 1] == u
        steps = np.sort(obs[rows, 0])
        if terminated[rows].any():  # stored as complete: every step of it, once
            np.testing.assert_array_equal(steps, np.arange(EPISODE))
            assert not truncated[rows].any()
            complete += 1
        else:  # an episode cut by an error or by the rollout's end: contiguous from its start, marked truncated
            np.testing.assert_array_equal(steps, np.arange(len(steps)))
            assert truncated[rows][np.argmax(obs[rows, 0])]
            truncated_ones += 1
    return complete, truncated_ones


def _run_and_check(engine, log, iterations=3):
    for i in range(iterations):
        metrics = engine.step()
        assert metrics["iteration"] == i + 1 and np.isfinite(metrics["policy_loss"])
    raises = count_lines(log, "step")
    assert raises >= iterations  # the env really raised, every iteration or so
    stats = engine.env_group.stats()
    assert metrics["env_errors"] == raises == stats["total_env_errors"]
    assert sum(stats["env_errors"].values()) == raises and metrics["env_restarts"] == raises
    assert metrics["episode_return_mean"] == float(EPISODE) and metrics["episode_length_mean"] == float(EPISODE)
    engine.rollout()  # a rollout kept in the buffer (training consumes it): what was stored?
    assert count_lines(log, "step") > raises  # errors in this rollout too
    complete, cut = _assert_only_whole_episodes_are_complete(engine.buffer.get_data())
    assert complete >= 4 and cut > 0
    return metrics


@pytest.mark.parametrize("layout", [IN_EVAL_WORKERS, IN_ENV_WORKERS])
def test_a_local_env_that_raises_every_few_steps_does_not_stop_training(tmp_path, build, layout):
    from rlightning.widgets.dashboard import EngineDashboard, engine_state

    # With the policy in the env workers an error ends that worker's rollout: raise less often there.
    engine, log = _flaky_run(tmp_path, build, layout, 7 if layout == IN_EVAL_WORKERS else 13)
    metrics = _run_and_check(engine, log)
    state = engine_state(engine)  # now, after the extra rollout
    assert state["env_errors"] == count_lines(log, "step") > metrics["env_errors"]
    html = EngineDashboard(engine, live=False).render_html(state)
    assert f"env errors <span class='rl-env-errors'>{state['env_errors']}</span>" in html


@pytest.mark.ray
@pytest.mark.parametrize("layout", [IN_EVAL_WORKERS, IN_ENV_WORKERS])
def test_a_ray_env_worker_that_raises_is_recreated_and_training_goes_on(tmp_path, ray_runtime, build, layout):
    engine, log = _flaky_run(tmp_path, build, layout, 25, "cluster.remote_env=true", "env.num_cpus=0.25")
    assert engine.env_group.is_remote
    _run_and_check(engine, log, iterations=2)
    if layout == IN_ENV_WORKERS:  # the recreated actors got their policy copy and the current weights back
        checksum = engine.policy_group.train_workers[0].call("weights_checksum")
        copies = {WorkerHandle(w).call("policy_weights_checksum") for w in engine.env_group.workers.values()}
        assert copies == {checksum}


def test_past_max_total_restarts_the_run_stops_naming_the_env(tmp_path, build):
    engine, log = _flaky_run(tmp_path, build, IN_EVAL_WORKERS, 3, "env.max_restarts=2", "env.max_total_restarts=2")
    with pytest.raises(
        EnvWorkerError,
        match=r"env worker tests\.support\.env_flaky\.Flaky-v0-\d raised RuntimeError in step: simulator crashed at "
        r"step call 3; that is env error 3 of this worker, and it was already recreated 2 time\(s\): "
        r"max_total_restarts=2 reached \(restarts over the run",
    ) as info:
        engine.step()
    assert info.value.env_id in engine.env_ids and isinstance(info.value.__cause__, RuntimeError)
    assert engine.iteration == 0 and engine.phase == "idle"


def _group(tmp_path, max_restarts=2, num_envs=1, remote=False, max_total_restarts=None, **kwargs):
    kwargs.setdefault("log_path", str(tmp_path / "raises.log"))
    cpus = {"num_cpus": 0.25} if remote else {}
    cfg = EnvConfig(
        name=FLAKY,
        num_envs=num_envs,
        max_restarts=max_restarts,
        max_total_restarts=max_total_restarts,
        env_kwargs=kwargs,
        **cpus,
    )
    return EnvGroup([cfg])


def _act(rets, action=0):
    resps = [PolicyResponse(i, action=np.full(r.observation.shape[0], action)) for i, r in rets.items()]
    return BatchedData(rets.ids(), resps)


@pytest.mark.parametrize("remote", [False, pytest.param(True, marks=pytest.mark.ray)])
def test_past_max_restarts_the_error_names_the_env_the_count_and_the_exception(tmp_path, request, remote):
    if remote:
        request.getfixturevalue("ray_runtime")
        request.getfixturevalue("remote_flags")(REMOTE_ENV=True)
    group = _group(tmp_path, max_restarts=2, max_total_restarts=2, remote=remote, fail_every=3)
    env_id = "tests.support.env_flaky.Flaky-v0-0"
    try:
        group.init()
        rets = group.reset(seed=0)
        for step in range(1, 9):  # the 3rd step call of every instance raises: steps 3 and 6 recreate it
            rets = group.step(_act(rets))
            if step % 3 == 0:
                assert group.pop_restarted_env_ids() == [env_id]
                np.testing.assert_array_equal(rets[0][1].observation[:, 0], [0.0])  # the fresh reset
        assert group.stats()["env_errors"] == {env_id: 2} and group.stats()["total_restarts"] == 2
        with pytest.raises(
            EnvWorkerError,
            match=rf"env worker {env_id} raised RuntimeError in step: simulator crashed at step call 3; that is "
            r"env error 3 of this worker, and it was already recreated 2 time\(s\): max_total_restarts=2 reached",
        ) as info:
            group.step(_act(rets))
        err = info.value
        assert (err.env_id, err.env_errors, err.restarts) == (env_id, 3, 2)
        assert isinstance(err.__cause__, RuntimeError) and isinstance(err.cause, RuntimeError)
        assert "simulator crashed at step call 3" in str(err.cause)
        assert group.stats()["total_env_errors"] == 3 == count_lines(tmp_path / "raises.log", "step")
        with pytest.raises(EnvWorkerError, match=rf"env worker {env_id} is gone: it failed \(raised or died\)"):
            group.reset()
    finally:
        group.close()


@pytest.mark.parametrize("remote", [False, pytest.param(True, marks=pytest.mark.ray)])
def test_a_reset_that_raises_recreates_the_worker(tmp_path, request, remote):
    if remote:
        request.getfixturevalue("ray_runtime")
        request.getfixturevalue("remote_flags")(REMOTE_ENV=True)
    group = _group(tmp_path, max_restarts=3, num_envs=2, remote=remote, fail_resets=2)
    try:
        group.init()
        rets = group.reset(seed=0)  # raises in the worker, then in the first recreation; the second one works
        env_id = group.env_ids[0]
        assert group.pop_restarted_env_ids() == [env_id, env_id]
        st = group.stats()
        assert st["env_errors"] == {env_id: 2} and st["restarts"] == {env_id: 2}
        assert count_lines(tmp_path / "raises.log", "reset") == 2
        np.testing.assert_array_equal(rets[0][1].observation[:, 0], [0.0, 0.0])
        assert len(group.step(_act(rets))) == 1
    finally:
        group.close()
    (tmp_path / "more").mkdir()
    group = _group(tmp_path / "more", max_restarts=1, num_envs=2, remote=remote, fail_resets=5)
    try:
        group.init()
        with pytest.raises(
            EnvWorkerError, match=r"raised RuntimeError in reset: simulator failed to reset; that is env error 2"
        ):
            group.reset(seed=0)
    finally:
        group.close()


@pytest.mark.parametrize("remote", [False, pytest.param(True, marks=pytest.mark.ray)])
def test_caller_errors_are_raised_at_once_not_retried(tmp_path, request, remote):
    if remote:
        request.getfixturevalue("ray_runtime")
        request.getfixturevalue("remote_flags")(REMOTE_ENV=True)
    group = _group(tmp_path, max_restarts=5, num_envs=2, remote=remote)
    try:
        group.init()
        rets = group.reset(seed=0)
        env_id = group.env_ids[0]
        worker = group.workers[env_id]
        bad_action = BatchedData([env_id], [PolicyResponse(env_id, action=np.array([0, 7]))])
        with pytest.raises(ValueError, match=rf"env {env_id}: action 7 \(sub-env 1\) is outside the action space"):
            group.step(bad_action)
        wrong_env = BatchedData([env_id], [PolicyResponse("other-3", action=np.array([0, 1]))])
        with pytest.raises(ValueError, match=rf"env {env_id}: got a PolicyResponse for env 'other-3'"):
            group.step(wrong_env)
        with pytest.raises(TypeError, match=rf"env {env_id}: step\(\) takes a PolicyResponse, got dict"):
            group.step(BatchedData([env_id], [{"action": np.array([0, 1])}]))
        st = group.stats()
        assert st["total_restarts"] == 0 and st["total_env_errors"] == 0 and group.pop_restarted_env_ids() == []
        assert group.workers[env_id] is worker  # the same worker, still stepping
        assert len(group.step(_act(rets))) == 1
    finally:
        group.close()


@pytest.mark.parametrize("remote", [False, pytest.param(True, marks=pytest.mark.ray)])
def test_gymnasium_envs_are_rebuilt_in_place_other_workers_are_built_anew(tmp_path, request, remote):
    if remote:
        request.getfixturevalue("ray_runtime")
        request.getfixturevalue("remote_flags")(REMOTE_ENV=True)
    cpus = {"num_cpus": 0.25} if remote else {}
    kwargs = {"fail_every": 2, "log_path": str(tmp_path / "raises.log")}
    group = EnvGroup(
        [
            EnvConfig(name=FLAKY, num_envs=2, env_kwargs=kwargs, **cpus),
            EnvConfig(name="flaky_counter", num_envs=2, env_kwargs={"fail_every": 2}, **cpus),
        ]
    )
    try:
        group.init()
        gym_id, counter_id = group.env_ids
        before = dict(group.workers)
        rets = group.step(_act(group.reset(seed=0)))
        np.testing.assert_array_equal(rets[1][1].observation[:, 0], [1.0, 1.0])
        rets = group.step(_act(rets), return_refs=remote)  # the 2nd step call raises in both
        assert sorted(group.pop_restarted_env_ids()) == sorted(group.env_ids)
        for _, ret in rets.items():  # both stand in with a fresh reset (values, also where refs were asked for)
            np.testing.assert_array_equal(ret.observation[:, 0], [0.0, 0.0])
        assert group.workers[gym_id] is before[gym_id]  # the same worker, its env rebuilt
        assert group.workers[counter_id] is not before[counter_id]  # a new worker
        assert group.stats()["env_errors"] == {gym_id: 1, counter_id: 1}
        rets = group.step(_act(rets))
        np.testing.assert_array_equal(rets[1][1].observation[:, 0], [1.0, 1.0])
    finally:
        group.close()


def test_an_env_error_of_a_step_in_flight_is_counted_when_the_group_resets(tmp_path):
    group = _group(tmp_path, max_restarts=3, fail_every=1)
    try:
        group.init()
        rets = group.reset(seed=0)
        group.step_async(_act(rets))
        group.reset(seed=1)  # the step in flight raised: dropped, counted, the worker recreated before the reset
        assert group.stats()["env_errors"] == {group.env_ids[0]: 1}
        assert group.pop_restarted_env_ids() == group.env_ids
        group.step_async(_act(rets))
        out = group.collect_async()  # an error collected: the recreated worker's reset EnvRet stands in
        assert list(out.ids()) == group.env_ids and group.stats()["total_env_errors"] == 2
    finally:
        group.close()


def _ppo_group(configs, weights_version=None):
    from rlightning.policy.algorithms.ppo import PPOPolicy
    from rlightning.utils.config import PolicyConfig

    group = EnvGroup(configs)
    metas = group.init()
    policy_cfg = PolicyConfig(type="ppo", hidden_sizes=[8])
    group.attach_policy(PPOPolicy, policy_cfg, metas[0], seed=0)
    train = None
    if weights_version is not None:
        from rlightning.policy.base_policy import PolicyRole

        train = PPOPolicy(policy_cfg, PolicyRole.TRAIN)
        train.setup(metas[0], 3)
        group.load_policy_weights(train.get_weights(), weight_version=weights_version)
    return group, train


def test_a_rollout_cut_by_an_env_error_keeps_the_steps_before_it(tmp_path):
    log = str(tmp_path / "raises.log")
    group, _ = _ppo_group(
        [
            EnvConfig(name=FLAKY, num_envs=2, env_kwargs={"fail_every": 4, "log_path": log}),
            EnvConfig(name=FLAKY, num_envs=2, env_kwargs={"log_path": log}),
        ]
    )
    try:
        flaky, steady = group.env_ids
        group.reset(seed=0)
        results = dict(group.collect_rollouts(num_steps=6))
        cut = results[flaky]
        assert cut.num_steps == 3 and isinstance(cut.error, RuntimeError)  # the 4th step call raised
        assert "simulator crashed at step call 4" in str(cut.error)
        assert cut.record["obs"][0, :, 0].tolist() == [0.0, 1.0, 2.0]  # the record holds the steps before it
        # The rebuilt env's reset is where the worker stands now.
        np.testing.assert_array_equal(group.workers[flaky].current_env_ret.observation[:, 0], [0.0, 0.0])
        assert results[steady].num_steps == 6 and results[steady].error is None
        assert group.pop_restarted_env_ids() == [flaky] and group.stats()["env_errors"][flaky] == 1
        assert group.stats()["env_steps"] == 3 * 2 + 6 * 2
        again = dict(group.collect_rollouts(2))
        assert again[flaky].num_steps == 2 and again[flaky].record["obs"][:, 0, 0].tolist() == [0.0, 0.0]
    finally:
        group.close()


def test_a_worker_built_anew_gets_its_policy_copy_and_weights_back():
    group, train = _ppo_group(
        [EnvConfig(name="flaky_counter", num_envs=2, env_kwargs={"fail_every": 3})], weights_version=7
    )
    try:
        (env_id,) = group.env_ids
        old = group.workers[env_id]
        group.reset(seed=0)
        ((_, result),) = list(group.collect_rollouts(num_steps=5))
        assert result.num_steps == 2 and isinstance(result.error, RuntimeError)
        new = group.workers[env_id]
        assert new is not old and new.policy_weights_checksum() == train.weights_checksum()
        ((_, result),) = list(group.collect_rollouts(num_steps=2))
        assert result.error is None and result.weight_version == 7 and result.num_steps == 2
    finally:
        group.close()


def test_a_failing_policy_copy_is_raised_not_retried(tmp_path, monkeypatch):
    group, _ = _ppo_group([EnvConfig(name=FLAKY, num_envs=2, env_kwargs={"log_path": str(tmp_path / "r.log")})])
    try:
        worker = group.workers[group.env_ids[0]]

        def broken(obs, deterministic=False):
            raise RuntimeError("the network produced NaN")

        monkeypatch.setattr(worker.policy, "compute_actions", broken)
        group.reset(seed=0)
        with pytest.raises(RuntimeError, match="the network produced NaN"):
            list(group.collect_rollouts(num_steps=3))
        assert group.stats()["total_restarts"] == 0 and group.workers[group.env_ids[0]] is worker
    finally:
        group.close()


def test_failure_classes():
    err = caller_error(ValueError("bad action"))
    assert is_caller_error(err) and classify_env_failure(err, remote=False) is None
    assert classify_env_failure(RuntimeError("sim"), remote=False) == "raised"
    assert classify_env_failure(RuntimeError("driver side"), remote=True) is None  # not from a worker call
    assert classify_env_failure(KeyboardInterrupt(), remote=False) is None
    import pickle

    assert is_caller_error(pickle.loads(pickle.dumps(err)))  # the mark travels with the exception
    e = pickle.loads(pickle.dumps(EnvWorkerError("m", "e-0", 2, 3, RuntimeError("x"))))
    assert (str(e), e.env_id, e.restarts, e.env_errors, str(e.cause)) == ("m", "e-0", 2, 3, "x")
