"""Policy groups of Ray actors shared by the policy tests (built once per session: actors start slowly)."""

from __future__ import annotations

import pytest

from rlightning.utils.config import ClusterConfig, PolicyConfig
from rlightning.utils.utils import InternalFlag


def _build(policy_type: str, policy_cfg: PolicyConfig, cluster_cfg: ClusterConfig, **flags: bool):
    from rlightning.policy.builder import build_policy_group

    before = InternalFlag.snapshot()
    InternalFlag.set(**flags)
    try:
        return build_policy_group(policy_type, policy_cfg, cluster_cfg, backend="nccl")
    finally:
        InternalFlag.set(**before)


@pytest.fixture(scope="session")
def ddp_collective_group(ray_runtime):
    """PPO: 2 remote train workers (DDP on gloo) and 1 remote eval worker synced by collective broadcast."""
    import tests.support.policy_workers  # noqa: F401 - registers the test policies

    cluster = ClusterConfig(train_worker_num=2, eval_worker_num=1, train_each_cpu_num=0.5, eval_each_cpu_num=0.5)
    group = _build(
        "ppo",
        PolicyConfig(hidden_sizes=[16], weight_sync="collective", num_minibatches=2, update_epochs=2),
        cluster,
        REMOTE_TRAIN=True,
        REMOTE_EVAL=True,
    )
    yield group
    group.shutdown()


@pytest.fixture(scope="session")
def ddp_plain_step_group(ray_runtime):
    """A policy whose train() steps its optimizer by hand: 2 remote train workers (DDP on gloo)."""
    import tests.support.policy_workers  # noqa: F401 - registers the test policies

    cluster = ClusterConfig(train_worker_num=2, eval_worker_num=0, train_each_cpu_num=0.5)
    group = _build("test_plain_step", PolicyConfig(), cluster, REMOTE_TRAIN=True, REMOTE_EVAL=True)
    yield group
    group.shutdown()


@pytest.fixture(scope="session")
def object_store_group(ray_runtime):
    """PPO: 1 remote train worker and 1 remote eval worker synced through the object store."""
    cluster = ClusterConfig(train_worker_num=1, eval_worker_num=1, train_each_cpu_num=0.5, eval_each_cpu_num=0.5)
    group = _build(
        "ppo", PolicyConfig(hidden_sizes=[16], weight_sync="object_store"), cluster, REMOTE_TRAIN=True, REMOTE_EVAL=True
    )
    yield group
    group.shutdown()


@pytest.fixture(scope="session")
def async_echo_group(ray_runtime):
    """Echo policy: a local train worker and 2 remote async eval workers (max_concurrency > 1)."""
    import tests.support.policy_workers  # noqa: F401 - registers the test policies

    cluster = ClusterConfig(train_worker_num=1, eval_worker_num=2, eval_each_cpu_num=0.5)
    group = _build(
        "test_echo",
        PolicyConfig(rollout_mode="async", max_concurrency=4),
        cluster,
        REMOTE_TRAIN=False,
        REMOTE_EVAL=True,
    )
    yield group
    group.shutdown()
