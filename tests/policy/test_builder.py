"""build_policy_group and create_distributed_policy_class (rlightning/policy/builder.py)."""

from __future__ import annotations

import pytest

from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.policy.builder import build_policy_group, check_gpu_request, create_distributed_policy_class
from rlightning.utils.config import ClusterConfig, PolicyConfig
from rlightning.utils.ray.remote_class import DistributedMixin
from tests.support.policy_data import DISCRETE_META, env_batch


def test_create_distributed_policy_class_mixes_in_distributed_mixin():
    cls = create_distributed_policy_class(PPOPolicy, PolicyRole.TRAIN)
    assert cls.__name__ == "PPOPolicy_train"
    assert issubclass(cls, PPOPolicy) and issubclass(cls, DistributedMixin)
    policy = cls(PolicyConfig(), role_type=PolicyRole.TRAIN, worker_index=1)
    assert policy.policy_class_name() == "PPOPolicy"
    assert policy.rank == 0 and policy.world_size == 1


def test_local_group_from_a_registered_name():
    group = build_policy_group("ppo", PolicyConfig(hidden_sizes=[8]), ClusterConfig(eval_worker_num=2))
    assert [w.is_remote for w in group.train_workers + group.eval_workers] == [False, False, False]
    group.construct_network(DISCRETE_META)
    assert len(group.rollout_batch(env_batch(3))) == 3
    assert group.stats()["weight_sync"]["effective"] == "local_copy"


def test_policy_class_can_be_passed_directly():
    group = build_policy_group(PPOPolicy, PolicyConfig(), ClusterConfig(eval_worker_num=0))
    assert group.eval_workers == [] and isinstance(group.train_workers[0].worker, PPOPolicy)


def test_unregistered_policy_type_lists_the_registered_ones():
    names = r"Registered policy names: .*dqn, .*impala, .*ppo, .*sac, .*td3"
    with pytest.raises(KeyError, match=r"unknown policy 'ppx'.*" + names):
        build_policy_group("ppx", PolicyConfig(), ClusterConfig())


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ({"policy_cfg": {"type": "ppo"}}, TypeError, "policy_cfg must be a PolicyConfig, got dict"),
        ({"cluster_cfg": None}, TypeError, "cluster_cfg must be a ClusterConfig, got NoneType"),
        ({"backend": "mpi"}, ValueError, "backend='mpi' is not a torch.distributed backend here"),
        ({"policy_cls": 3}, TypeError, "policy_cls must be a registered name or a BasePolicy subclass"),
        (
            {"cluster_cfg": ClusterConfig(train_worker_num=2)},
            ValueError,
            "train_worker_num=2 needs remote train workers",
        ),
    ],
)
def test_bad_arguments(args, error, match):
    kwargs = {"policy_cls": "ppo", "policy_cfg": PolicyConfig(), "cluster_cfg": ClusterConfig(), **args}
    with pytest.raises(error, match=match):
        build_policy_group(**kwargs)


def test_local_workers_asking_for_missing_gpus_fail_clearly(remote_flags):
    remote_flags(REMOTE_TRAIN=False, REMOTE_EVAL=False)
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    cluster = ClusterConfig(train_each_gpu_num=1.0)
    with pytest.raises(ValueError, match=r"local policy workers ask for 1 GPUs .* this process sees 0"):
        build_policy_group("ppo", PolicyConfig(), cluster)


@pytest.mark.ray
def test_gpus_beyond_the_cluster_fail_before_any_actor_starts(ray_runtime, remote_flags):
    remote_flags(REMOTE_TRAIN=True, REMOTE_EVAL=True)
    cluster = ClusterConfig(train_worker_num=2, train_each_gpu_num=1.0, eval_worker_num=1, eval_each_gpu_num=0.5)
    before = {a["name"] for a in ray_runtime.util.list_named_actors(all_namespaces=True)}
    msg = (
        r"the policy group asks for 2.5 GPUs \(train_worker_num=2 x train_each_gpu_num=1.0 \+ "
        r"eval_worker_num=1 x eval_each_gpu_num=0.5\) but the Ray cluster has 0"
    )
    with pytest.raises(ValueError, match=msg):
        build_policy_group("ppo", PolicyConfig(), cluster)
    after = {a["name"] for a in ray_runtime.util.list_named_actors(all_namespaces=True)}
    assert after == before


@pytest.mark.ray
def test_gpu_check_counts_only_remote_roles(ray_runtime, remote_flags):
    remote_flags(REMOTE_TRAIN=True, REMOTE_EVAL=False)
    report = check_gpu_request(ClusterConfig(train_each_gpu_num=0.0, eval_each_gpu_num=0.0))
    assert report["asked_remote"] == 0 and report["asked_local"] == 0


@pytest.mark.ray
def test_remote_workers_are_actors_with_placement(object_store_group):
    group = object_store_group
    assert all(w.is_remote for w in group.train_workers + group.eval_workers)
    stats = group.stats()
    pids = [w["pid"] for w in stats["train_workers"] + stats["eval_workers"]]
    assert len(set(pids)) == 2
    assert all(w["device"] == "cpu" and w["gpu_ids"] == [] for w in stats["train_workers"])
    threads = group.train_workers[0].call("stats")["threads"]
    assert threads == 1


class _Answers:
    def get_placement_info(self):
        return {"pid": __import__("os").getpid()}


class _DiesAtStart:
    def __init__(self):
        __import__("os")._exit(1)  # the process goes before the actor runs anything of ours

    def get_placement_info(self):
        return {}


class _RaisesAtStart:
    def __init__(self):
        raise ValueError("a bad policy config")

    def get_placement_info(self):
        return {}


def test_an_actor_lost_before_it_ran_is_started_once_more(ray_runtime):
    from rlightning.policy.builder import _restart_unstarted

    ray = ray_runtime
    lost = ray.remote(num_cpus=0)(_DiesAtStart).remote()
    good = ray.remote(num_cpus=0)(_Answers).remote()
    workers = {"train": [lost], "eval": [good]}
    starts = [("train", 0, lambda: ray.remote(num_cpus=0)(_Answers).remote()), ("eval", 0, None)]
    _restart_unstarted(starts, workers)
    assert workers["eval"][0] is good  # a healthy actor is kept
    assert workers["train"][0] is not lost and ray.get(workers["train"][0].get_placement_info.remote())["pid"] > 0
    for w in workers["train"] + workers["eval"]:
        ray.kill(w)


def test_an_actor_lost_again_is_started_again_up_to_the_retries(ray_runtime, monkeypatch):
    from ray.exceptions import RayActorError

    import rlightning.policy.builder as builder

    ray = ray_runtime
    monkeypatch.setattr(builder.time, "sleep", lambda s: None)
    made = [_DiesAtStart, _Answers]  # lost at the first restart too, then one that runs
    starts = []

    def start():
        starts.append(1)
        return ray.remote(num_cpus=0)(made.pop(0)).remote()

    workers = {"train": [ray.remote(num_cpus=0)(_DiesAtStart).remote()], "eval": []}
    builder._restart_unstarted([("train", 0, start)], workers)
    assert len(starts) == 2 and ray.get(workers["train"][0].get_placement_info.remote())["pid"] > 0
    ray.kill(workers["train"][0])

    def always_lost():
        starts.append(1)
        return ray.remote(num_cpus=0)(_DiesAtStart).remote()

    starts.clear()
    monkeypatch.setattr(builder, "UNSTARTED_RETRIES", 2)
    with pytest.raises(RayActorError):  # every start lost: the last loss is raised after the retries
        builder._restart_unstarted([("train", 0, always_lost)], {"train": [always_lost()], "eval": []})
    assert len(starts) == 1 + 2


def test_an_actor_whose_constructor_raised_is_not_restarted(ray_runtime):
    from ray.exceptions import RayActorError

    from rlightning.policy.builder import _restart_unstarted

    ray = ray_runtime
    bad = ray.remote(num_cpus=0)(_RaisesAtStart).remote()
    started = []
    with pytest.raises(RayActorError, match="a bad policy config"):
        _restart_unstarted([("train", 0, lambda: started.append(1))], {"train": [bad], "eval": []})
    assert started == []
