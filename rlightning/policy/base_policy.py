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

The class body is that contract and the helpers ``train()`` calls
(``register_module``, ``apply_gradients``, ``schedule_progress``, ...). The
worker shell around it (resources and setup, the learner call, answering
EnvRets, weights, process groups, checkpoints, snapshots: what the engine, the
policy group and Ray call) is in `rlightning.policy.worker_api`, bound onto the
class from one table; its state and transport belong to the `PolicyWorkerHost`
each policy holds as ``policy.host``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

from rlightning.policy.resources import in_ray_actor, ray_assigned_cpus, ray_gpu_ids
from rlightning.policy.utils import build_optimizer
from rlightning.policy.worker_api import bind as bind_worker_methods
from rlightning.policy.worker_host import PolicyWorkerHost
from rlightning.types import EnvMeta, EnvRet, PolicyResponse
from rlightning.utils.config import PolicyConfig
from rlightning.utils.logger import get_logger

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

    def train(self) -> Dict[str, float]:
        """Run the updates on the current dataset; returns float metrics."""
        raise NotImplementedError(f"{type(self).__name__} must implement train()")

    @classmethod
    def buffer_postprocess_fn(cls, policy_cfg: PolicyConfig) -> Optional[Callable]:
        """The buffer postprocess this policy needs (None: the buffer's default)."""
        return None

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

    def priority_update(self) -> Optional[Dict[str, Any]]:
        """New replay priorities from the last ``train()``: ``index``, ``shard``, ``priority`` (None: none).

        The engine writes them to the buffer (``DataBuffer.update_priorities``) after each train round
        when ``buffer.sampler`` is ``prioritized``; the default has none.
        """
        return None

    def set_deterministic(self, deterministic: bool = True) -> None:
        """Act deterministically (the mode of the action distribution) from now on."""
        self.deterministic = bool(deterministic)

    # ------------------------------------------------------------------ acting on EnvRets

    def rollout_step(self, env_ret: EnvRet) -> PolicyResponse:
        """Answer one `EnvRet` (observation [num_envs, *obs_shape]) with a `PolicyResponse`."""
        return self._rollout_batched([env_ret])[0]

    #: The response `rollout_batch` answers each EnvRet with.
    response_type: ClassVar[type] = PolicyResponse

    # ------------------------------------------------------------------ weights

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

    def allreduce_mean(self, value: float) -> float:
        """Mean of a float over the data-parallel ranks (the value itself alone)."""
        return self.host.allreduce_mean(value)

    def allreduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum of a tensor over the data-parallel ranks (the tensor itself alone)."""
        return self.host.allreduce_sum(tensor)

    # ------------------------------------------------------------------ checkpoints: algorithm state

    def extra_checkpoint_state(self) -> Dict[str, Any]:
        """Algorithm state beyond modules and optimizers (plain values or tensors); default none."""
        return {}

    def load_extra_checkpoint_state(self, extra: Dict[str, Any]) -> None:
        """Restore what `extra_checkpoint_state` returned."""

    def upgrade_checkpoint_state(self, state: Dict[str, Any]) -> Dict[str, Any]:
        """A checkpoint dict as this version lays it out (a policy whose modules changed maps older layouts
        here); default: unchanged. Called before a checkpoint is checked and loaded."""
        return state


bind_worker_methods(BasePolicy)
