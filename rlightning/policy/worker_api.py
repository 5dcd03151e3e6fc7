"""The worker side of `BasePolicy`: what the engine, the policy group and Ray call on a policy worker.

`rlightning.policy.base_policy` holds the algorithm contract a policy implements and the helpers its
``train()`` calls (networks, acting, the update, config). The methods here are the worker shell around it:
resources and setup, the run's schedule and the learner call, answering EnvRets (eval workers), weights,
process groups, checkpoints and snapshots. Their state and transport belong to the `PolicyWorkerHost` each
policy holds (``policy.host``); most of them hand the call to it.

Each function here is a method of `BasePolicy` (its first parameter is the policy), bound onto the class by
`bind` from `WORKER_METHODS`: a Ray actor of any policy answers them, and a subclass may override any of
them as usual.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from rlightning.policy.observations import obs_rows, writable
from rlightning.policy.resources import select_device, threads_for
from rlightning.policy.utils import run_coroutine
from rlightning.types import EnvMeta, EnvRet, PolicyResponse, is_object_ref
from rlightning.types.convert import concat_rows, leading_rows
from rlightning.utils.config import PolicyConfig
from rlightning.utils.utils import set_worker_threads

__all__ = ["WORKER_METHODS", "bind"]


def _base() -> type:
    from rlightning.policy.base_policy import BasePolicy

    return BasePolicy


def setup_resources(self, num_cpus: float = 1.0, num_gpus: float = 0.0, gpu_ids: Optional[List[int]] = None) -> str:
    """Set torch threads to the CPUs given and pick the device; returns the device name.

    Called by the worker itself inside a Ray actor, and by the builder for local workers.
    """
    self.num_threads = threads_for(num_cpus)
    set_worker_threads(self.num_threads)
    device = select_device(num_gpus=num_gpus, gpu_ids=gpu_ids)
    if device != self.device:
        self.device = device
        for module in self._modules.values():
            module.to(device)
    return str(self.device)


def num_parameters(self) -> int:
    """Number of scalars in the modules eval workers receive."""
    return sum(t.numel() for t in self.sync_named_tensors().values())


def set_data_source(self, source: Any) -> None:
    """Keep a source of batches that lives with this worker (the offline engine's shard of a Ray Dataset,
    read where this worker runs); `update_dataset_from_source` draws from it."""
    self._data_source = source


def update_dataset_from_source(self, num_batches: int = 1) -> Dict[str, Any]:
    """``update_dataset`` with the next ``num_batches`` batches of the `set_data_source` source
    (``source.next_batches(num_batches)``, one TensorDict); returns ``source.report()`` (rows read so far).

    Raises:
        RuntimeError: no source was set.
    """
    source = getattr(self, "_data_source", None)
    if source is None:
        raise RuntimeError(f"{type(self).__name__}: update_dataset_from_source before set_data_source(source)")
    self.update_dataset(source.next_batches(num_batches))
    return source.report()


def train_minibatches(self, num_minibatches: int) -> Dict[str, float]:
    """``num_minibatches`` x ``train()`` on consecutive row ranges of the dataset; the mean metrics.

    See `rlightning.policy.minibatches.train_minibatches` (the engine uses it when `minibatch_train`).
    """
    from rlightning.policy.minibatches import train_minibatches

    return train_minibatches(self, num_minibatches)


def learn(self, num_minibatches: Optional[int] = None) -> Dict[str, float]:
    """One learner call, what the policy group runs on each train worker: ``train()``, or
    ``train_minibatches(num_minibatches)``, in the update's arithmetic (``optim.flush_denormals`` and
    ``optim.matmul_precision``, see `PolicyWorkerHost.update_numerics`)."""
    with self.host.update_numerics():
        return self.train() if num_minibatches is None else self.train_minibatches(num_minibatches)


def set_schedule(self, total_iterations: int, total_env_steps: Optional[int] = None) -> None:
    """Tell the policy how long the run is (learning-rate and clip annealing).

    Args:
        total_iterations: The run's ``train()`` iterations (``train.iterations``).
        total_env_steps: The run's env-step budget (``train.total_env_steps``), or None. A run ends at
            whichever comes first, so a schedule reaches its end at whichever comes first too.
    """
    if not isinstance(total_iterations, int) or isinstance(total_iterations, bool) or total_iterations < 1:
        raise ValueError(f"set_schedule(total_iterations={total_iterations!r}) needs an int >= 1")
    steps_ok = isinstance(total_env_steps, (int, np.integer)) and not isinstance(total_env_steps, bool)
    if total_env_steps is not None and not (steps_ok and total_env_steps >= 1):
        raise ValueError(f"set_schedule(total_env_steps={total_env_steps!r}) needs an int >= 1 or None")
    self.total_iterations = total_iterations
    self.total_env_steps = None if total_env_steps is None else int(total_env_steps)


def set_env_steps(self, env_steps: int) -> None:
    """Tell the policy the run's env steps so far (the engine calls it before each iteration's training)."""
    if isinstance(env_steps, bool) or not isinstance(env_steps, (int, np.integer)) or env_steps < 0:
        raise ValueError(f"set_env_steps(env_steps={env_steps!r}) needs an int >= 0")
    self.env_steps = int(env_steps)


def set_hyperparameters(self, values: Dict[str, float]) -> Dict[str, float]:
    """Change config values from the next ``train()`` on (``Run.set``); returns them as now in effect.

    A name that is not a field of the policy config is one of its optimizer's (``lr``). A changed
    learning rate goes to the optimizer groups that were using the old one (and ``base_lr``).
    """
    for name, value in values.items():
        target = self.config if name in type(self.config).model_fields else self.config.optim
        old = getattr(target, name)
        setattr(target, name, value)
        if name.endswith("lr") and old is not None:
            if getattr(self, "base_lr", None) == old:
                self.base_lr = float(value)
            for opt in self._optimizers.values():
                for group in opt.param_groups:
                    if abs(float(group["lr"]) - float(old)) <= 1e-12 * max(1.0, abs(float(old))):
                        group["lr"] = float(value)
    return {
        name: getattr(self.config if name in type(self.config).model_fields else self.config.optim, name)
        for name in values
    }


def setup(self, env_meta: EnvMeta, seed: Optional[int] = None) -> Dict[str, Any]:
    """Everything a worker needs once the env spaces are known (what `PolicyGroup` calls).

    Builds the networks, the optimizers (train workers), makes data-parallel
    ranks start from rank 0's weights, allocates the weight broadcast buffer
    when this worker is in a broadcast group, and loads ``config.checkpoint``.

    Returns:
        ``num_parameters``, ``weight_signature`` (None without a broadcast buffer),
        ``weight_version`` and ``device``.
    """
    if seed is not None:
        offset = 0 if self.role_type == "train" else 10_000
        torch.manual_seed(int(seed) + offset + self.worker_index)
        self.np_rng = np.random.default_rng(int(seed) + offset + self.worker_index)
    self.construct_network(env_meta)
    if self.env_meta is None:
        self.env_meta = env_meta
    if self.role_type == "train":
        self.setup_optimizer(self.config.optim)
    self.broadcast_from_rank0()
    signature = self.alloc_weight_buffer()
    if self.config.checkpoint:
        self.load_checkpoint(self.config.checkpoint)
    return {
        "num_parameters": self.num_parameters(),
        "weight_signature": signature,
        "weight_version": self.weight_version,
        "device": str(self.device),
    }


def _uses_compute_actions(self) -> bool:
    return type(self).rollout_step is _base().rollout_step


@property
def acts_on_observations(self) -> bool:
    """True when ``compute_actions`` on bare observations answers as ``rollout_batch`` would (no
    ``rollout_step`` or ``postprocess`` of its own, no recurrent state): an env worker then acts that way."""
    cls = type(self)
    return self._uses_compute_actions() and cls.postprocess is _base().postprocess and not self.stateful_acting


@classmethod
def acting_copy_factory(cls, config: PolicyConfig, env_meta: EnvMeta, seed: Optional[int] = None) -> Any:
    """The picklable factory an env worker builds its eval-role copy of this class with (`EvalCopyFactory`)."""
    from rlightning.policy.acting_copy import EvalCopyFactory

    return EvalCopyFactory(cls, config, env_meta, seed)


def rollout_batch(self, env_rets: Sequence[Any]) -> List[PolicyResponse]:
    """Answer several `EnvRet` at once: one forward pass over all their observations.

    Items may be Ray ObjectRefs (resolved here with one ``ray.get``). A policy
    that overrides ``rollout_step`` instead of ``compute_actions`` is called once per item.
    """
    env_rets = list(env_rets)
    if any(is_object_ref(r) for r in env_rets):
        from rlightning.utils.ray.handle import resolve

        env_rets = resolve(env_rets)
    if self._uses_compute_actions():
        return self._rollout_batched(env_rets)
    out = [run_coroutine(self.rollout_step(r)) for r in env_rets]
    self._rollout_calls += 1
    return out


def rollout_many(self, *env_rets: EnvRet) -> List[PolicyResponse]:
    """`rollout_batch` with the items as arguments (Ray resolves ObjectRef arguments first)."""
    return self.rollout_batch(env_rets)


def rollout_unpacked(self, *env_rets: EnvRet) -> Any:
    """`rollout_many` returning one value per item (for Ray calls with ``num_returns``)."""
    out = self.rollout_batch(env_rets)
    return out[0] if len(out) == 1 else tuple(out)


def _check_obs(self, env_ret: Any, position: int, space: Any) -> Any:
    """``env_ret``'s observation as arrays with a leading ``num_envs`` dimension (nested like a Dict or
    Tuple space), checked against ``space``."""
    if not isinstance(env_ret, EnvRet):
        raise TypeError(f"rollout expects EnvRet items, got {type(env_ret).__name__} at position {position}")
    return obs_rows(env_ret.observation, space, env_ret.env_id, "observation")


def _rollout_batched(self, env_rets: Sequence[EnvRet]) -> List[PolicyResponse]:
    if self.env_meta is None:
        raise RuntimeError(f"{type(self).__name__}: rollout called before construct_network(env_meta)")
    if not env_rets:
        return []
    batch, counts = self._observation_batch(env_rets)
    with self.host.weights_lock:
        out = self.compute_actions(batch, deterministic=self.deterministic)
        version = self.weight_version
    total = sum(counts)
    self._check_outputs(out, total)
    responses, start = [], 0
    for env_ret, n in zip(env_rets, counts):
        data = self._output_rows(out, start, n)
        start += n
        resp = self.response_type(
            env_id=env_ret.env_id, weight_version=version, ts_env_sent_ns=env_ret.ts_env_sent_ns, **data
        )
        resp = self.postprocess(env_ret, resp) or resp
        responses.append(resp.mark_policy_sent())
    self.count_rollout(total)
    return responses


def _observation_batch(self, env_rets: Sequence[EnvRet]) -> Tuple[Any, List[int]]:
    """The observations of ``env_rets`` as one batch for ``compute_actions``, and each item's rows.

    Dict and Tuple observations stay structured: a dict (tuple) of ``[rows, ...]`` arrays, each leaf
    concatenated over the items.
    """
    space = self.env_meta.observation_space
    obs_list = [self._check_obs(r, i, space) for i, r in enumerate(env_rets)]
    counts = [leading_rows(o) for o in obs_list]
    batch = obs_list[0] if len(obs_list) == 1 else concat_rows(obs_list)
    return writable(batch), counts


def _check_outputs(self, out: Dict[str, Any], total: int) -> None:
    for key, value in out.items():
        if np.shape(value)[:1] != (total,):
            raise ValueError(
                f"{type(self).__name__}.compute_actions returned {key!r} with shape {np.shape(value)}; "
                f"every value needs the leading batch dim {total}"
            )


def _output_rows(self, out: Dict[str, Any], start: int, n: int) -> Dict[str, Any]:
    """Rows ``start .. start + n`` of every output (one EnvRet's share of the batch)."""
    return {k: v[start : start + n] for k, v in out.items()}


def count_rollout(self, rows: int) -> None:
    """Count one acting call that answered ``rows`` rows (`rollout_batch` counts its own; an env worker
    acting straight through ``compute_actions`` reports its calls here). Schedules that run on the rows a
    copy answered before it hears the run's env steps (DQN's epsilon, TD3's uniform steps) read the count."""
    self._rollout_calls += 1
    self._rollout_rows += int(rows)


def sync_named_tensors(self) -> Dict[str, torch.Tensor]:
    """Name -> live tensor (parameters and buffers) of the modules eval workers need."""
    return self.host.sync_named_tensors()


def state_dict(self) -> Dict[str, torch.Tensor]:
    """The weights eval workers need, as detached tensors (no copy)."""
    return self.host.state_dict()


def get_weights(self) -> Dict[str, np.ndarray]:
    """The weights eval workers need, as numpy copies on the host."""
    return self.host.get_weights()


def export_weights(self, weight_version: int) -> Dict[str, np.ndarray]:
    """Record ``weight_version`` and return `get_weights` (train rank 0 in a sync)."""
    self.weight_version = int(weight_version)
    return self.get_weights()


def set_weight_version(self, weight_version: int) -> int:
    """Record the version of the weights this worker holds."""
    self.weight_version = int(weight_version)
    return self.weight_version


def copy_weights_from(self, other: Any, weight_version: Optional[int] = None) -> int:
    """Direct in-process copy of another policy's weights (local workers, colocated sync)."""
    if type(self).load_state_dict is not _base().load_state_dict:  # a policy that loads its own way
        return self.load_state_dict(other.state_dict(), weight_version)
    return self.host.copy_weights_from(other, weight_version)


def weights_checksum(self) -> str:
    """SHA-1 of the exact bytes of the weights eval workers need."""
    return self.host.weights_checksum()


def alloc_weight_buffer(self) -> Optional[str]:
    """Allocate the flat broadcast buffer; returns its layout signature (None: in no broadcast group)."""
    return self.host.alloc_weight_buffer()


def broadcast_weights(self, weight_version: int) -> int:
    """Send this worker's weights to the broadcast group (train rank 0)."""
    return self.host.broadcast_weights(weight_version)


def receive_weights(self, weight_version: int) -> int:
    """Receive weights from train rank 0 over the broadcast group (eval workers)."""
    return self.host.receive_weights(weight_version)


def get_placement_info(self) -> Dict[str, Any]:
    """Node ip, node id, GPU ids, pid, device and CUDA availability of this worker."""
    return self.host.get_placement_info()


def comm_address(self) -> Dict[str, Any]:
    """This worker's node ip and a free port on it (rank 0 hosts the rendezvous)."""
    return self.host.comm_address()


def init_comm(self, rank: int, world_size: int, *args: Any, **kwargs: Any) -> Dict[str, Any]:
    """Join the policy world as ``rank`` (see `PolicyWorkerHost.init_comm`); returns `comm_info`."""
    info = self.host.init_comm(rank, world_size, *args, **kwargs)
    self._dist_rank, self._dist_world_size = rank, world_size  # what a DistributedMixin wrapper reports
    return info


def comm_info(self) -> Dict[str, Any]:
    """Rank, world size and the groups this worker belongs to."""
    return self.host.comm_info()


def destroy_comm(self) -> None:
    """Leave the policy world."""
    self.host.destroy_comm()


def broadcast_from_rank0(self) -> None:
    """Make every data-parallel rank hold rank 0's module states (no-op outside a group)."""
    self.host.broadcast_from_rank0()


def allreduce_gradients(self, parameters: Any) -> None:
    """Average the gradients of ``parameters`` over the data-parallel ranks (no-op alone)."""
    self.host.allreduce_gradients(parameters)


def checkpoint_state(self) -> Dict[str, Any]:
    """Everything needed to resume: module and optimizer states (on CPU), counters, config."""
    return self.host.checkpoint_state()


def load_checkpoint_state(self, state: Dict[str, Any]) -> Dict[str, int]:
    """Restore a `checkpoint_state` dict (nothing changes unless every module matches); returns the counters."""
    return self.host.load_checkpoint_state(state)


def save_checkpoint(self, path: Union[str, os.PathLike]) -> str:
    """Write `checkpoint_state` to ``path`` (parent folders are created); returns the path."""
    return self.host.save_checkpoint(path)


def rng_state(self, process: bool = False) -> Dict[str, Any]:
    """This worker's generator states and acting counters (`rlightning.policy.checkpoint.worker_rng_state`)."""
    from rlightning.policy.checkpoint import worker_rng_state

    return worker_rng_state(self, process)


def set_rng_state(self, state: Dict[str, Any]) -> None:
    """Restore `rng_state` (`rlightning.policy.checkpoint.set_worker_rng_state`)."""
    from rlightning.policy.checkpoint import set_worker_rng_state

    set_worker_rng_state(self, state)


def load_checkpoint(self, path: Union[str, os.PathLike]) -> Dict[str, int]:
    """Read a checkpoint with ``torch.load(weights_only=True)`` and restore it.

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    return self.host.load_checkpoint(path)


def stats(self) -> Dict[str, Any]:
    """A plain snapshot of this worker."""
    return {
        "class": self.policy_class_name(),
        "role": str(self.role_type),
        "worker_index": self.worker_index,
        "device": str(self.device),
        "threads": self.num_threads,
        "weight_version": self.weight_version,
        "update_count": self.update_count,
        "train_calls": self.train_calls,
        "rollout_calls": self._rollout_calls,
        "rollout_rows": self._rollout_rows,
        "deterministic": self.deterministic,
        "num_parameters": self.num_parameters() if self._modules else 0,
        "comm_rank": self.host.comm.rank,
        "data_parallel": self.host.comm.data_parallel,
        "last_train_metrics": dict(self._last_metrics),
    }


def policy_class_name(self) -> str:
    """Name of the user's policy class (not the distributed or Ray wrapper around it)."""
    for cls in type(self).__mro__:
        if "_rl_distributed_wrapper" in cls.__dict__ or "__ray_actor_class__" in cls.__dict__:
            continue
        return cls.__name__
    return type(self).__name__


WORKER_METHODS: Tuple[str, ...] = (
    "setup_resources",
    "num_parameters",
    "set_data_source",
    "update_dataset_from_source",
    "train_minibatches",
    "learn",
    "set_schedule",
    "set_env_steps",
    "set_hyperparameters",
    "setup",
    "_uses_compute_actions",
    "acts_on_observations",
    "acting_copy_factory",
    "rollout_batch",
    "rollout_many",
    "rollout_unpacked",
    "_check_obs",
    "_rollout_batched",
    "_observation_batch",
    "_check_outputs",
    "_output_rows",
    "count_rollout",
    "sync_named_tensors",
    "state_dict",
    "get_weights",
    "export_weights",
    "set_weight_version",
    "copy_weights_from",
    "weights_checksum",
    "alloc_weight_buffer",
    "broadcast_weights",
    "receive_weights",
    "get_placement_info",
    "comm_address",
    "init_comm",
    "comm_info",
    "destroy_comm",
    "broadcast_from_rank0",
    "allreduce_gradients",
    "checkpoint_state",
    "load_checkpoint_state",
    "save_checkpoint",
    "rng_state",
    "set_rng_state",
    "load_checkpoint",
    "stats",
    "policy_class_name",
)
"""The methods of `BasePolicy` defined here, in the order above."""


def bind(cls: type) -> type:
    """Make every function of `WORKER_METHODS` a method (property, classmethod) of ``cls``."""
    namespace = globals()
    for name in WORKER_METHODS:
        member = namespace[name]
        func = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        # A method of the class, where tools look it up (documentation, pickling by reference, introspection);
        # its code and globals stay this module's.
        func.__module__, func.__qualname__ = cls.__module__, f"{cls.__qualname__}.{name}"
        setattr(cls, name, member)
    return cls
