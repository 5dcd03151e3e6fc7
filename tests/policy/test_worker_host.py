"""Composition: a policy holds its PolicyWorkerHost, a PolicyGroup its EvalRecovery; per-algorithm configs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlightning.policy.algorithms.ppo import PPOConfig, PPOPolicy
from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.policy.eval_recovery import EvalRecovery, WorkerLostError
from rlightning.policy.policy_group import PolicyGroup
from rlightning.policy.worker_host import PolicyWorkerHost
from rlightning.utils.config import PolicyConfig
from rlightning.utils.ray.handle import WorkerHandle
from tests.support.policy_data import DISCRETE_META, env_batch


def make_ppo(role=PolicyRole.TRAIN, index=0) -> PPOPolicy:
    policy = PPOPolicy(PolicyConfig(hidden_sizes=[8]), role_type=role, worker_index=index)
    policy.setup(DISCRETE_META, seed=0)
    return policy


def test_base_policy_holds_its_worker_host_instead_of_mixins():
    assert BasePolicy.__mro__ == (BasePolicy, object)
    policy = make_ppo()
    assert isinstance(policy.host, PolicyWorkerHost) and policy.host.policy is policy
    assert policy.comm_info() == policy.host.comm_info() and policy.comm_info()["rank"] == -1
    assert policy.get_placement_info()["role"] == "train"


class CriticOnlySync(PPOPolicy):
    """Overrides the tensor selection: the host's transport must follow it."""

    def sync_named_tensors(self):
        return {k: v for k, v in super().sync_named_tensors().items() if k.startswith("critic.")}


def test_host_transport_uses_the_policys_own_tensor_selection(tmp_path):
    policy = CriticOnlySync(PPOConfig(hidden_sizes=[8]), role_type=PolicyRole.TRAIN)
    policy.setup(DISCRETE_META, seed=0)
    weights = policy.get_weights()
    assert weights and all(k.startswith("critic.") for k in weights)
    other = CriticOnlySync(PPOConfig(hidden_sizes=[8]), role_type=PolicyRole.EVAL)
    other.setup(DISCRETE_META, seed=1)
    assert other.weights_checksum() != policy.weights_checksum()
    assert other.load_state_dict(weights, weight_version=7) == 7
    assert other.weights_checksum() == policy.weights_checksum()
    with pytest.raises(KeyError, match=r"unexpected keys \['actor"):
        other.load_state_dict({**weights, "actor.0.weight": np.zeros(1)})
    # checkpoint I/O goes through the host too, and restores counters
    policy.update_count = 5
    path = policy.save_checkpoint(tmp_path / "p.pt")
    fresh = CriticOnlySync(PPOConfig(hidden_sizes=[8]), role_type=PolicyRole.TRAIN)
    fresh.setup(DISCRETE_META, seed=3)
    assert fresh.load_checkpoint(path)["update_count"] == 5 and fresh.update_count == 5
    torch.testing.assert_close(fresh.state_dict()["critic.0.weight"], policy.state_dict()["critic.0.weight"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        fresh.load_checkpoint(tmp_path / "missing.pt")


def test_policy_refuses_another_algorithms_config():
    from rlightning.policy.algorithms.sac import SACConfig

    with pytest.raises(TypeError, match=r"PPOPolicy\(config=...\) needs a PPOConfig \(its config_cls\), got SACConfig"):
        PPOPolicy(SACConfig(type="sac"))


def test_policy_group_holds_its_eval_recovery_and_replaces_a_worker():
    config = PolicyConfig(hidden_sizes=[8], max_restarts=2)
    train, evals = make_ppo(), [make_ppo(PolicyRole.EVAL, i) for i in range(2)]
    group = PolicyGroup([train], evals, config)
    group.init_placement_info()
    group.construct_network(DISCRETE_META, seed=0)
    assert isinstance(group.recovery, EvalRecovery) and group.recovery.max_restarts == 2
    assert group.dead_workers("eval") == [] and group.restart_dead_eval_workers() == []  # local workers never die
    new = make_ppo(PolicyRole.EVAL, 1)
    new.load_state_dict(train.get_weights(), group.weight_version)
    group.replace_eval_worker(1, WorkerHandle(new), new.get_placement_info())
    assert group.eval_workers[1].worker is new
    group.rollout_batch(env_batch(4))
    assert new.stats()["rollout_calls"] >= 1  # the router sends work to the new worker
    assert group.verify_eval_weight_consistency()["consistent"]
    assert group.stats()["eval_restarts"] == [0, 0]


class _Host:
    def __init__(self, workers):
        self.train_workers, self.eval_workers, self.weight_version = [], workers, 0

    def replace_eval_worker(self, index, worker, placement):
        raise AssertionError("nothing may be replaced")


def test_eval_recovery_without_a_relauncher_names_the_worker():
    recovery = EvalRecovery(_Host([WorkerHandle(make_ppo(PolicyRole.EVAL))]), 1, max_restarts=1)
    with pytest.raises(WorkerLostError, match="eval worker 0 died and this group has no way to relaunch it"):
        recovery._restart(0, None)
    recovery.set_relauncher(lambda i: make_ppo(PolicyRole.EVAL, i))
    recovery.restarts[0] = 1
    with pytest.raises(WorkerLostError, match=r"already restarted 1 time\(s\); max_restarts=1 reached"):
        recovery._restart(0, None)


def test_copy_weights_from_reuses_its_pairs_and_checks_again_when_modules_change():
    learner = make_ppo()
    actor = make_ppo(role=PolicyRole.EVAL)
    assert actor.copy_weights_from(learner, 1) == 1
    assert actor.weights_checksum() == learner.weights_checksum()
    assert actor.host._copy_plan is not None and actor.host._copy_plan[0] is learner
    with torch.no_grad():  # the learner moves: the kept pairs copy the new values
        for p in learner.get_trainable_parameters():
            p.add_(0.5)
    assert actor.weights_checksum() != learner.weights_checksum()
    assert actor.copy_weights_from(learner, 2) == 2 and actor.weight_version == 2
    assert actor.weights_checksum() == learner.weights_checksum()
    # a module registered again on the learner: the next copy is a checked one that reads the new tensors
    fresh = make_ppo(index=1)
    learner.register_module("actor", fresh.modules["actor"])
    assert actor.weights_checksum() != learner.weights_checksum()
    assert actor.copy_weights_from(learner, 3) == 3
    assert actor.weights_checksum() == learner.weights_checksum()
    # another source policy: checked too
    other = make_ppo(index=2)
    with torch.no_grad():
        for p in other.get_trainable_parameters():
            p.mul_(-1.0)
    actor.copy_weights_from(other, 4)
    assert actor.weights_checksum() == other.weights_checksum() and actor.host._copy_plan[0] is other
    # a mismatched source still fails with the checked path's error, and nothing is kept
    small = PPOPolicy(PolicyConfig(hidden_sizes=[4]), role_type=PolicyRole.TRAIN)
    small.setup(DISCRETE_META, seed=0)
    with pytest.raises(ValueError, match="has shape"):
        actor.copy_weights_from(small, 5)
    assert actor.host._copy_plan is None


def test_apply_gradients_without_the_norm_makes_the_same_step():
    a, b = make_ppo(), make_ppo()
    x = torch.randn(16, DISCRETE_META.observation_space.shape[0], generator=torch.Generator().manual_seed(0))
    for policy, return_norm in ((a, True), (b, False)):
        loss = policy.modules["critic"](x).pow(2).mean()
        opt = policy.optimizers["main"]
        out = policy.apply_gradients(loss, opt, policy.modules["critic"].parameters(), return_norm=return_norm)
        assert (out is None) is (not return_norm)
        if return_norm:
            assert out > 0
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)


def test_apply_gradients_clears_every_gradient_and_calls_an_overridden_zero_grad():
    policy = make_ppo()
    x = torch.randn(16, DISCRETE_META.observation_space.shape[0], generator=torch.Generator().manual_seed(1))
    opt = policy.optimizers["main"]
    actor = list(policy.modules["actor"].parameters())
    for p in actor:  # a stale gradient of a parameter the loss does not reach: cleared, as zero_grad(set_to_none)
        p.grad = torch.ones_like(p)
    policy.apply_gradients(policy.modules["critic"](x).pow(2).mean(), opt, policy.modules["critic"].parameters())
    assert all(p.grad is None for p in actor)
    calls = []

    class Counting(torch.optim.SGD):
        def zero_grad(self, set_to_none: bool = True) -> None:
            calls.append(set_to_none)
            super().zero_grad(set_to_none)

    sgd = Counting(policy.modules["critic"].parameters(), lr=0.1)
    policy.apply_gradients(policy.modules["critic"](x).pow(2).mean(), sgd, policy.modules["critic"].parameters())
    assert calls == [True]


def _flush_supported() -> bool:
    supported = torch.set_flush_denormal(True)
    torch.set_flush_denormal(False)
    return supported


@pytest.mark.skipif(not _flush_supported(), reason="this CPU has no flush-to-zero mode (torch.set_flush_denormal)")
@pytest.mark.parametrize("flush", [True, False])
def test_gradient_steps_treat_subnormal_floats_as_zero_and_restore_the_thread(flush):
    # A subnormal gradient (1e-39) reaches Adam's first moment as 0 while flushing, as 1e-40 without; outside
    # the step the thread computes subnormals again either way.
    policy = PPOPolicy(PolicyConfig(hidden_sizes=[8], optim={"flush_denormals": flush}), role_type=PolicyRole.TRAIN)
    policy.setup(DISCRETE_META, seed=0)
    weight = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.Adam([weight], lr=1e-3)
    policy.apply_gradients((weight * 1e-39).sum(), opt, [weight], return_norm=False)
    exp_avg = opt.state[weight]["exp_avg"]
    if flush:
        assert torch.count_nonzero(exp_avg) == 0
    else:
        assert torch.all((exp_avg > 0) & (exp_avg < 1.2e-38))
    assert float(torch.tensor([1e-38]) / 100) > 0  # the thread's own setting is back: subnormals survive


def test_the_contract_is_the_class_body_and_the_worker_methods_come_from_one_table():
    import inspect

    from rlightning.policy import worker_api

    bound = set(worker_api.WORKER_METHODS)
    for name in bound:  # each one is a method of every policy (what Ray and the engine call) ...
        member = inspect.getattr_static(BasePolicy, name)
        func = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        assert func.__globals__ is vars(worker_api) and func.__qualname__ == f"BasePolicy.{name}"
    source = inspect.getsource(BasePolicy)  # ... and none is written in the class body a newcomer reads
    assert not [n for n in bound if f"def {n}(" in source]
    contract = [n for n in source.split("\n") if n.startswith("    def ") and not n.startswith("    def __")]
    assert 15 <= len(contract) <= 25, contract

    class Quiet(PPOPolicy):  # a subclass still overrides a worker method as usual
        def stats(self):
            return {"quiet": True}

    policy = Quiet(PolicyConfig(hidden_sizes=[8]))
    assert policy.stats() == {"quiet": True} and policy.comm_info()["rank"] == -1
