"""`BasePolicy` and `PolicyRole`: the contract every policy worker implements.

A policy is a plain Python class that holds torch modules (it is not itself an
``nn.Module``, so its ``train()`` is the RL update, not ``Module.train``). The
same class runs in the calling process or as a Ray actor (``PolicyGroup``
launches it). What a user implements:

- ``construct_network(env_meta)``: build the modules (``register_module``).
- ``setup_optimizer(optim_cfg)``: build the optimizers (a default is given).
- ``compute_actions(obs, deterministic)`` *or* ``rollout_step(env_ret)``
  (plain or ``async def``): actions for a batch of observations.
- ``postprocess(env_ret, policy_resp)``: optional hook on each response.
- ``update_dataset(data)`` and ``train()`` -> metrics dict.
- ``get_trainable_parameters()`` and ``load_state_dict(state_dict)`` (defaults given).

Process groups, weight transport, checkpoint I/O and gradient all-reduce are
the worker's side, owned by the `PolicyWorkerHost` each policy holds as
``policy.host`` (``worker_host``); the methods of that name here (what Ray calls
on a worker actor, what an algorithm calls in ``train``) delegate to it.
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn

from rlightning.policy.observations import obs_rows, writable
from rlightning.policy.resources import in_ray_actor, ray_assigned_cpus, ray_gpu_ids, select_device, threads_for
from rlightning.policy.utils import build_optimizer, run_coroutine
from rlightning.policy.worker_host import PolicyWorkerHost
from rlightning.types import EnvMeta, EnvRet, PolicyResponse, is_object_ref
from rlightning.types.convert import concat_rows, leading_rows
from rlightning.utils.config import PolicyConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.utils import set_worker_threads

logger = get_logger(__name__)


def _is_config_of(config: Any, config_cls: type) -> bool:
    """``isinstance`` that also accepts a same-named class: a notebook's config class shipped to a Ray
    worker by value may arrive as a second copy of itself."""
    if isinstance(config, config_cls):
        return True
    name = (config_cls.__module__, config_cls.__qualname__)
    return any((c.__module__, c.__qualname__) == name for c in type(config).__mro__)


class PolicyRole(StrEnum):
    """What a policy worker is for: learning (``TRAIN``) or acting (``EVAL``)."""

    TRAIN = "train"
    EVAL = "eval"


class BasePolicy:
    """Base class of every policy worker.

    Args:
        config: The policy config (algorithm hyperparameters, network sizes, weight sync).
        role_type: ``PolicyRole.TRAIN`` or ``PolicyRole.EVAL``.
        worker_index: Index of this worker among the workers of its role.

    Attributes:
        device: ``cuda`` when the worker was given a GPU and CUDA is present, else ``cpu``.
        weight_version: Version of the weights this worker holds (0 = initial; +1 per sync).
        update_count: Gradient updates done by ``train()`` so far.
        env_meta: The `EnvMeta` the networks were built for.
        dataset: The data handed over by the last ``update_dataset``.
    """

    sync_module_names: Optional[Sequence[str]] = None
    """Modules an eval worker needs (sent by weight sync); None means every registered module."""

    stateful_acting: bool = False
    """True for a policy whose actions depend on earlier steps (a recurrent state): it acts on the EnvRets
    (``rollout_batch``: env ids, episode starts), never on bare observations."""

    learns_from_transitions: ClassVar[bool] = False
    """True for a learner that reads single transitions (``obs``, ``action``, ``reward``, ``next_obs``,
    ``terminated``) drawn from a replay buffer in any order (DQN, SAC, TD3); multi-agent envs hand such a
    learner each agent's transitions (`MultiAgentPolicy`)."""
    minibatch_train: ClassVar[bool] = False
    """True when ``train()`` learns from whatever rows its dataset holds, so `train_minibatches` can split one
    sample of ``k`` batches into ``k`` steps (the engine then samples and hands over an iteration's batches
    at once); False: one ``update_dataset`` and one ``train`` per gradient step."""

    reads_lent_rows: ClassVar[bool] = False
    """True when ``update_dataset`` takes an on-policy sample of the storage's rows lent in place (read-only
    views in stored order, and ``_order``: the sampler's shuffled draw as row indices; `DataBuffer.sample`
    ``views``) and gives exactly what the shuffled copy would: the engine then asks the buffer for views
    (PPO). False: a copy in the sampler's order."""

    config_cls: ClassVar[type] = PolicyConfig
    """The config class of this policy's ``policy.type`` (a `PolicyConfig` subclass with the algorithm's
    hyperparameters); ``PolicyConfig(type=...)`` and a ``policy:`` section build it. Default: the shared one."""

    def __init__(self, config: PolicyConfig, role_type: PolicyRole = PolicyRole.TRAIN, worker_index: int = 0) -> None:
        if not isinstance(config, PolicyConfig):
            raise TypeError(f"{type(self).__name__}(config=...) needs a PolicyConfig, got {type(config).__name__}")
        if not _is_config_of(config, type(self).config_cls):
            want = type(self).config_cls.__name__
            raise TypeError(
                f"{type(self).__name__}(config=...) needs a {want} (its config_cls), got {type(config).__name__} "
                f"for policy.type {config.type!r}; build it with PolicyConfig(type=<this policy's name>, ...)"
            )
        try:
            role = PolicyRole(role_type)
        except ValueError:
            raise ValueError(
                f"role_type={role_type!r} is not a PolicyRole; use PolicyRole.TRAIN or PolicyRole.EVAL"
            ) from None
        if not isinstance(worker_index, int) or isinstance(worker_index, bool) or worker_index < 0:
            raise ValueError(f"worker_index={worker_index!r} must be an int >= 0")
        self.config = config
        self.role_type = role
        self.worker_index = worker_index
        self.weight_version = 0
        self.update_count = 0
        self.train_calls = 0
        self.total_iterations: Optional[int] = None
        self.total_env_steps: Optional[int] = None
        self.env_steps: Optional[int] = None
        self.env_meta: Optional[EnvMeta] = None
        self.dataset: Any = None
        self.deterministic = role is PolicyRole.EVAL and config.deterministic_eval
        self.device = torch.device("cpu")
        self.num_threads: Optional[int] = None
        self._modules: Dict[str, nn.Module] = {}
        self._optimizers: Dict[str, torch.optim.Optimizer] = {}
        self._rollout_calls = 0
        self._rollout_rows = 0
        self._last_metrics: Dict[str, float] = {}
        self.host = PolicyWorkerHost(self)
        """Process groups, weight transport and checkpoint I/O of this worker."""
        if in_ray_actor():
            self.setup_resources(num_cpus=ray_assigned_cpus() or 1.0, gpu_ids=ray_gpu_ids())

    # ------------------------------------------------------------------ resources

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

    # ------------------------------------------------------------------ modules

    def register_module(self, name: str, module: nn.Module) -> nn.Module:
        """Keep ``module`` under ``name`` (weights, sync, checkpoints) and move it to the device."""
        if not isinstance(module, nn.Module):
            raise TypeError(f"register_module({name!r}, ...) needs an nn.Module, got {type(module).__name__}")
        self._modules[name] = module.to(self.device)
        return self._modules[name]

    def register_optimizer(self, name: str, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Keep ``optimizer`` under ``name`` (checkpoints, learning-rate schedules); on data-parallel ranks its
        steps average the gradients over the ranks whatever ``train()`` does (`PolicyWorkerHost.watch_optimizer`)."""
        self._optimizers[name] = optimizer
        self.host.watch_optimizer(optimizer)
        return optimizer

    @property
    def modules(self) -> Dict[str, nn.Module]:
        """The registered modules, by name."""
        return dict(self._modules)

    @property
    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        """The registered optimizers, by name."""
        return dict(self._optimizers)

    def get_trainable_parameters(self) -> List[nn.Parameter]:
        """Parameters of every registered module that require gradients."""
        seen, params = set(), []
        for module in self._modules.values():
            for p in module.parameters():
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        return params

    def num_parameters(self) -> int:
        """Number of scalars in the modules eval workers receive."""
        return sum(t.numel() for t in self.sync_named_tensors().values())

    # ------------------------------------------------------------------ the user contract

    def construct_network(self, env_meta: EnvMeta) -> None:
        """Build the modules for ``env_meta``'s spaces (call ``register_module`` for each)."""
        raise NotImplementedError(f"{type(self).__name__} must implement construct_network(env_meta)")

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """Build the optimizers; the default is one optimizer over ``get_trainable_parameters()``."""
        self.register_optimizer("main", build_optimizer(optim_cfg, self.get_trainable_parameters()))

    def compute_actions(self, obs: np.ndarray, deterministic: bool = False) -> Dict[str, np.ndarray]:
        """Actions and extras for a batch ``obs`` [B, *obs_shape]; every value has leading dim B."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement compute_actions(obs, deterministic) or rollout_step(env_ret)"
        )

    def postprocess(self, env_ret: EnvRet, policy_resp: PolicyResponse) -> PolicyResponse:
        """Hook run on each response before it is returned; the default returns it unchanged."""
        return policy_resp

    def update_dataset(self, data: Any) -> None:
        """Take the data the next ``train()`` learns from (a TensorDict from the buffer)."""
        self.dataset = data

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

    def train(self) -> Dict[str, float]:
        """Run the updates on the current dataset; returns float metrics."""
        raise NotImplementedError(f"{type(self).__name__} must implement train()")

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

    @classmethod
    def buffer_postprocess_fn(cls, policy_cfg: PolicyConfig) -> Optional[Callable]:
        """The buffer postprocess this policy needs (None: the buffer's default)."""
        return None

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

    def schedule_progress(self) -> Optional[float]:
        """How far through the run the next ``train()`` is, 0 to 1 (None: `set_schedule` was not called).

        The larger of ``train()`` calls made / ``total_iterations`` and env steps so far (`set_env_steps`) /
        ``total_env_steps``: the fraction of whichever limit ends the run first.
        """
        if self.total_iterations is None:
            return None
        progress = self.train_calls / self.total_iterations
        if self.total_env_steps and self.env_steps is not None:
            progress = max(progress, self.env_steps / self.total_env_steps)
        return min(1.0, progress)

    def set_env_steps(self, env_steps: int) -> None:
        """Tell the policy the run's env steps so far (the engine calls it before each iteration's training)."""
        if isinstance(env_steps, bool) or not isinstance(env_steps, (int, np.integer)) or env_steps < 0:
            raise ValueError(f"set_env_steps(env_steps={env_steps!r}) needs an int >= 0")
        self.env_steps = int(env_steps)

    def priority_update(self) -> Optional[Dict[str, Any]]:
        """New replay priorities from the last ``train()``: ``index``, ``shard``, ``priority`` (None: none).

        The engine writes them to the buffer (``DataBuffer.update_priorities``) after each train round
        when ``buffer.sampler`` is ``prioritized``; the default has none.
        """
        return None

    def set_deterministic(self, deterministic: bool = True) -> None:
        """Act deterministically (the mode of the action distribution) from now on."""
        self.deterministic = bool(deterministic)

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

    # ------------------------------------------------------------------ setup

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
            offset = 0 if self.role_type is PolicyRole.TRAIN else 10_000
            torch.manual_seed(int(seed) + offset + self.worker_index)
            self.np_rng = np.random.default_rng(int(seed) + offset + self.worker_index)
        self.construct_network(env_meta)
        if self.env_meta is None:
            self.env_meta = env_meta
        if self.role_type is PolicyRole.TRAIN:
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

    # ------------------------------------------------------------------ rollout

    def _uses_compute_actions(self) -> bool:
        return type(self).rollout_step is BasePolicy.rollout_step

    @property
    def acts_on_observations(self) -> bool:
        """True when ``compute_actions`` on bare observations answers as ``rollout_batch`` would (no
        ``rollout_step`` or ``postprocess`` of its own, no recurrent state): an env worker then acts that way."""
        cls = type(self)
        return self._uses_compute_actions() and cls.postprocess is BasePolicy.postprocess and not self.stateful_acting

    @classmethod
    def acting_copy_factory(cls, config: PolicyConfig, env_meta: EnvMeta, seed: Optional[int] = None) -> Any:
        """The picklable factory an env worker builds its eval-role copy of this class with (`EvalCopyFactory`)."""
        from rlightning.policy.acting_copy import EvalCopyFactory

        return EvalCopyFactory(cls, config, env_meta, seed)

    def rollout_step(self, env_ret: EnvRet) -> PolicyResponse:
        """Answer one `EnvRet` (observation [num_envs, *obs_shape]) with a `PolicyResponse`."""
        return self._rollout_batched([env_ret])[0]

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

    #: The response `rollout_batch` answers each EnvRet with.
    response_type: ClassVar[type] = PolicyResponse

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

    # ------------------------------------------------------------------ weights (the host's transport)

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

    def load_state_dict(self, state_dict: Dict[str, Any], weight_version: Optional[int] = None) -> int:
        """Copy weights (numpy arrays or tensors) into the live modules, in place.

        Nothing is copied unless every key and shape matches.

        Raises:
            RuntimeError: the networks are not built yet.
            TypeError: ``state_dict`` is not a dict.
            KeyError: missing or unexpected keys (both listed).
            ValueError: a shape differs.
        """
        return self.host.load_state_dict(state_dict, weight_version)

    def copy_weights_from(self, other: BasePolicy, weight_version: Optional[int] = None) -> int:
        """Direct in-process copy of another policy's weights (local workers, colocated sync)."""
        if type(self).load_state_dict is not BasePolicy.load_state_dict:  # a policy that loads its own way
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

    # ------------------------------------------------------------------ process groups (the host's)

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

    # ------------------------------------------------------------------ gradients (for train())

    def apply_gradients(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        parameters: Optional[Any] = None,
        max_grad_norm: Optional[float] = None,
        return_norm: bool = True,
    ) -> Optional[float]:
        """Backward, average gradients over ranks, clip, step. Returns the gradient norm before clipping
        (``return_norm=False``: None, and the norm is computed only when clipping needs it)."""
        return self.host.apply_gradients(loss, optimizer, parameters, max_grad_norm, return_norm)

    def allreduce_gradients(self, parameters: Any) -> None:
        """Average the gradients of ``parameters`` over the data-parallel ranks (no-op alone)."""
        self.host.allreduce_gradients(parameters)

    def allreduce_mean(self, value: float) -> float:
        """Mean of a float over the data-parallel ranks (the value itself alone)."""
        return self.host.allreduce_mean(value)

    def allreduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum of a tensor over the data-parallel ranks (the tensor itself alone)."""
        return self.host.allreduce_sum(tensor)

    # ------------------------------------------------------------------ checkpoints (the host's I/O)

    def extra_checkpoint_state(self) -> Dict[str, Any]:
        """Algorithm state beyond modules and optimizers (plain values or tensors); default none."""
        return {}

    def load_extra_checkpoint_state(self, extra: Dict[str, Any]) -> None:
        """Restore what `extra_checkpoint_state` returned."""

    def upgrade_checkpoint_state(self, state: Dict[str, Any]) -> Dict[str, Any]:
        """A checkpoint dict as this version lays it out (a policy whose modules changed maps older layouts
        here); default: unchanged. Called before a checkpoint is checked and loaded."""
        return state

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

    # ------------------------------------------------------------------ snapshots

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
