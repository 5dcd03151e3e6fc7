"""`RolloutWorker`: the env worker. A `BaseEnv`, where it stands, and optionally a policy copy.

One class serves both placements of the acting policy:

- per step (``cluster.inference="eval_workers"``): `reset` and `step` return
  the env's `EnvRet` (the seed API) and the eval workers answer each one;
- whole rollouts (``"env_workers"``): `attach_policy` builds an eval-role copy
  of the run's policy here (with the factory the policy side hands it: an
  `ActingPolicy`, see `rlightning.env.acting_policy`), and `collect` steps
  ``num_steps`` vector steps with it, writing one ``[N, T]`` record
  TensorDict (see `rlightning.env.utils.record_writer`)::

      worker = RolloutWorker(GymnasiumEnv, EnvConfig(name="CartPole-v1", num_envs=8))
      worker.attach_policy(PPOPolicy.acting_copy_factory(PolicyConfig(type="ppo"), worker.get_metadata(), seed=0))
      worker.reset(seed=0)
      result = worker.collect(128)            # RolloutResult: result.record is the [8, 128] TensorDict

The worker keeps its current `EnvRet`, so a rollout continues where the last
call (``step`` or ``collect``) left off. The same object runs in this process
or as a Ray actor (the `EnvGroup`'s `WorkerSlot` launches it). It imports no
torch or tensordict until a policy copy is built here, never imports the policy
package itself (the factory brings what it needs), and builds no
TensorDict itself: its rollout's arrays travel, the record is made where they
are read (`RolloutResult.record`).
"""

from __future__ import annotations

import pickle
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from rlightning.env.acting_policy import ActingPolicy, as_copy_factory, check_acting_policy
from rlightning.env.base_env import BaseEnv
from rlightning.env.errors import caller_error
from rlightning.env.utils.episodes import EpisodeIds, episode_report
from rlightning.env.utils.multi_agent_writer import multi_agent_writer
from rlightning.env.utils.record_writer import RecordWriter, arrays_to_record, start_done_flags
from rlightning.env.utils.tensor_record_writer import TensorRecordWriter, is_tensor_batch
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.types import EnvMeta, EnvRet, MultiAgentEnvRet, PolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

__all__ = ["RolloutResult", "RolloutWorker"]


@dataclass
class RolloutResult:
    """What one `RolloutWorker.collect` call returns.

    Attributes:
        env_id: The worker's env id.
        arrays: The rollout's numpy arrays (`RecordWriter.finish`; None: nothing collected, e.g. a worker
            lost mid-rollout). They are what crosses a process boundary, once each.
        num_steps: T, vector steps in the record.
        num_envs: N.
        weight_version: Version of the policy weights that acted.
        inference_s: Seconds spent computing actions.
        env_step_s: Seconds spent stepping the env and writing the record.
        episode_returns: Returns of the episodes that finished during the rollout.
        episode_lengths: Their lengths.
        agent_episode_returns: Multi-agent envs: per agent, its own return in those episodes.
        error: The exception the env's own ``step`` raised (the arrays then hold the steps before it; the
            group recreates the worker); None otherwise.
    """

    env_id: str
    arrays: Optional[Dict[str, Any]] = None
    num_steps: int = 0
    num_envs: int = 0
    weight_version: Optional[int] = None
    inference_s: float = 0.0
    env_step_s: float = 0.0
    episode_returns: List[float] = field(default_factory=list)
    episode_lengths: List[int] = field(default_factory=list)
    error: Optional[BaseException] = None
    agent_episode_returns: Dict[str, List[float]] = field(default_factory=dict)
    """Multi-agent envs: each agent's own return in the episodes that finished (agent id -> returns)."""

    @property
    def record(self) -> Any:
        """The ``[N, T]`` record TensorDict over `arrays` (built once, no copy); None without arrays."""
        if self.arrays is None:
            return None
        cached = self.__dict__.get("_record")
        if cached is None:
            cached = self.__dict__["_record"] = arrays_to_record(self.arrays, self.env_id)
        return cached

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_record", None)  # the arrays travel; the TensorDict is rebuilt where it is read
        return state


class _Rollout:
    """A rollout in progress: its writer, its result, and where the env stands."""

    __slots__ = (
        "writer",
        "result",
        "version",
        "env_ret",
        "num_steps",
        "steps",
        "inference",
        "stepping",
        "error",
        "last_value",
        "defer_value",
    )

    def __init__(self, writer: RecordWriter, result: RolloutResult, version: int, env_ret: EnvRet) -> None:
        self.writer = writer
        self.result = result
        self.version = version
        self.env_ret = env_ret
        self.num_steps = writer.num_steps
        self.steps = 0
        self.inference = 0.0
        self.stepping = 0.0
        self.error: Optional[BaseException] = None
        self.last_value: Any = None
        self.defer_value = False


class RolloutWorker:
    """An env worker: builds ``env_cls(config, ...)`` and steps it, per call or per rollout.

    Args:
        env_cls: The `BaseEnv` subclass (chosen from ``config`` by the group through ``ENVS``).
        config: The env config.
        worker_index: Global index of this worker in its group (makes ``env_id`` unique).
        preprocess_fn: `PolicyResponse` -> env action (None: `default_env_preprocess_fn`).
        episode_id_base: First episode id (a relaunched worker starts past its predecessor's ids).
        **env_kwargs: Extra constructor arguments of ``env_cls`` (from ``env_cls.prepare``).

    Raises:
        TypeError: ``env_cls`` is not a `BaseEnv` subclass; what ``env_cls`` raises for bad arguments.
    """

    def __init__(
        self,
        env_cls: type,
        config: EnvConfig,
        worker_index: int = 0,
        preprocess_fn: Optional[Callable[[PolicyResponse], Any]] = default_env_preprocess_fn,
        episode_id_base: int = 0,
        **env_kwargs: Any,
    ) -> None:
        if not (isinstance(env_cls, type) and issubclass(env_cls, BaseEnv)):
            raise TypeError(f"env_cls must be a BaseEnv subclass, got {env_cls!r}")
        self.env = env_cls(config, worker_index=worker_index, preprocess_fn=preprocess_fn, **env_kwargs)
        self.env_id = self.env.env_id
        # Rows of the env's EnvRets: its EnvMeta's num_envs, which may exceed its sub-envs (one row per agent).
        rows = getattr(self.env.get_metadata(), "num_envs", None)
        self.num_envs = int(rows) if rows else self.env.num_envs
        self.worker_index = self.env.worker_index
        self._current: Optional[EnvRet] = None
        self._episode_ids = EpisodeIds(self.num_envs, base=int(episode_id_base))
        self._policy: Optional[ActingPolicy] = None
        self._fast_acting = False
        self._synced = False

    # ------------------------------------------------------------------ the env (seed API)

    def get_metadata(self) -> EnvMeta:
        """The env's `EnvMeta`."""
        return self.env.get_metadata()

    def get_env_id(self) -> str:
        """This worker's env id."""
        return self.env_id

    def ping(self) -> str:
        """Liveness probe: returns the env id."""
        return self.env_id

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> EnvRet:
        """Reset the env (every row starts a new episode) and return its `EnvRet`."""
        env_ret = self.env.reset(seed=seed, options=options)
        self._current = env_ret
        self._episode_ids.reset()
        return env_ret

    def step(self, policy_resp: PolicyResponse) -> EnvRet:
        """Step the env with ``policy_resp`` and return its `EnvRet` (the per-step layout)."""
        previous = self._current
        env_ret = self.env.step(policy_resp)
        self._current = env_ret
        if previous is not None:  # a row done before this step starts its next episode on it
            self._episode_ids.assign(~start_done_flags(previous)[:, None])
        return env_ret

    def step_report(self, policy_resp: PolicyResponse) -> Tuple[EnvRet, Tuple[List[float], List[int]]]:
        """`step` plus the (returns, lengths) of the episodes it closed.

        The group calls this with two Ray returns when it hands EnvRets on as ObjectRefs: the small
        report comes to the driver, the EnvRet stays in the object store.
        """
        env_ret = self.step(policy_resp)
        return env_ret, episode_report(env_ret)

    def recreate_env(self, seed: Optional[int] = None) -> EnvRet:
        """Rebuild the env in place after its code raised (``env.recreate_env``) and return its reset EnvRet."""
        env_ret = self.env.recreate_env(seed=seed)
        self._current = env_ret
        self._episode_ids.reset()
        return env_ret

    def episode_stats(self) -> Dict[str, Any]:
        """The env's plain snapshot: env id, ``num_envs``, env steps and finished episodes."""
        return self.env.episode_stats()

    def close(self) -> None:
        """Close the env."""
        self.env.close()

    # ------------------------------------------------------------------ the policy copy

    @property
    def has_policy(self) -> bool:
        """True once `attach_policy` built a policy copy here."""
        return self._policy is not None

    def attach_policy(
        self,
        policy: Any,
        policy_config: Any = None,
        env_meta: Optional[EnvMeta] = None,
        seed: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Build this worker's eval-role policy copy: ``factory(worker_index)`` (see `rlightning.env.acting_policy`).

        Args:
            policy: A `PolicyCopyFactory` built by the policy side (``BasePolicy.acting_copy_factory``), or a
                policy class (a `BasePolicy` subclass; its factory is asked for with the next arguments).
            policy_config: The class's `PolicyConfig` (with a class only).
            env_meta: The spaces the networks are built for (with a class only).
            seed: Seeds the copy's RNGs, offset by this worker's index (with a class only); None leaves them alone.

        Returns:
            ``num_parameters`` and ``weight_version`` of the copy.

        Raises:
            TypeError: ``policy`` is neither a policy class nor a factory; the factory built no `ActingPolicy`.
            ValueError: a factory given with other arguments.
        """
        try:
            factory = as_copy_factory(policy, policy_config, env_meta, seed)
            built = check_acting_policy(factory(self.worker_index), factory)
        except (TypeError, ValueError) as err:  # a bad argument, or a factory that fits no ActingPolicy: the caller's
            caller_error(err)
            raise
        self._policy = built
        self._synced = False  # its own initial weights until a sync loads the run's
        # Acting straight through compute_actions unless the copy answers EnvRets itself (or carries a state).
        self._fast_acting = bool(built.acts_on_observations) and not built.stateful_acting
        return {"num_parameters": int(built.num_parameters()), "weight_version": int(built.weight_version)}

    def _require_policy(self, what: str) -> ActingPolicy:
        if self._policy is None:
            raise caller_error(
                RuntimeError(
                    f"env {self.env_id}: {what} needs a policy in the env worker; "
                    "call attach_policy first (cluster.inference='env_workers' does it)"
                )
            )
        return self._policy

    def load_state_dict(self, state_dict: Dict[str, Any], weight_version: Optional[int] = None) -> int:
        """Load weights (name -> array) into the policy copy; returns its weight version (weight sync)."""
        version = self._require_policy("load_state_dict").load_state_dict(state_dict, weight_version)
        self._synced = True
        return version

    def load_policy_weights(self, weights: Dict[str, Any], weight_version: int) -> int:
        """Same as `load_state_dict` (the name `EnvGroup.load_policy_weights` calls)."""
        return self.load_state_dict(weights, weight_version)

    def copy_weights_from(self, other: Any, weight_version: Optional[int] = None) -> int:
        """Copy another policy's weights in place (a train worker in this process: the direct-copy sync)."""
        version = self._require_policy("copy_weights_from").copy_weights_from(other, weight_version)
        self._synced = True
        return version

    def set_weight_version(self, weight_version: int) -> int:
        """Record the version of the copy's weights."""
        return self._require_policy("set_weight_version").set_weight_version(weight_version)

    def set_deterministic(self, deterministic: bool = True) -> None:
        """Make the policy copy act deterministically (or not) from now on."""
        self._require_policy("set_deterministic").set_deterministic(deterministic)

    def policy_weights_checksum(self) -> str:
        """SHA-1 of the policy copy's weights (compare with the train worker's ``weights_checksum``)."""
        return self._require_policy("policy_weights_checksum").weights_checksum()

    def policy_weight_version(self) -> int:
        """Version of the policy copy's weights."""
        return int(self._require_policy("policy_weight_version").weight_version)

    # ------------------------------------------------------------------ whole rollouts

    @property
    def acts_on_observations(self) -> bool:
        """True when the copy acts straight through ``compute_actions`` (no ``rollout_step``/``postprocess``)."""
        return self._policy is not None and self._fast_acting

    @property
    def weights_synced(self) -> bool:
        """True once the copy was given weights (a sync); before, it holds its own initial ones."""
        return self._synced

    @property
    def current_env_ret(self) -> Optional[EnvRet]:
        """The EnvRet the env stands at (what the next action answers); None before `reset`."""
        return self._current

    @property
    def policy(self) -> Optional[ActingPolicy]:
        """The policy copy (None before `attach_policy`)."""
        return self._policy

    def acting_rng_state(self) -> Optional[Dict[str, Any]]:
        """The policy copy's numpy generator state (plain data a checkpoint keeps); None without one."""
        rng = getattr(self._policy, "np_rng", None)
        return dict(rng.bit_generator.state) if rng is not None else None

    def set_acting_rng_state(self, state: Dict[str, Any]) -> None:
        """Restore what `acting_rng_state` returned (a resumed run draws the same actions)."""
        rng = getattr(self._policy, "np_rng", None)
        if rng is not None:
            rng.bit_generator.state = state

    def collect(self, num_steps: int) -> RolloutResult:
        """Act and step ``num_steps`` times from where the env stands; return the ``[N, T]`` record.

        Each step: one batched forward of the policy copy on the observation, one vector step of the
        env, one write per key into the preallocated record.

        An exception of the env's own ``step`` ends the rollout early: the result holds the steps before
        it and the exception in ``error`` (the group recreates the worker). Every other failure (the
        policy copy's, a bad argument, outputs that do not fit the record) is the caller's: raised.

        Raises:
            RuntimeError: no policy attached, or the env was never reset.
            ValueError: ``num_steps`` below 1; an observation or policy output without the leading
                dimension N.
            TypeError: a multi-agent observation that is not a dict of ``[N, ...]`` arrays per agent.
        """
        from rlightning.env.local_rollout import collect_local  # it imports this module

        self._require_policy("collect")
        return collect_local([self], num_steps)[0]

    def start_rollout(self, num_steps: int) -> _Rollout:
        """Begin a rollout of ``num_steps`` from where the env stands (see `collect`, which drives one).

        Raises:
            As `collect`.
        """
        policy = self._require_policy("collect")
        if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
            raise caller_error(ValueError(f"collect: num_steps must be an int >= 1, got {num_steps!r}"))
        env_ret = self._current
        if env_ret is None:
            raise caller_error(RuntimeError(f"env {self.env_id}: collect before reset(); reset the env first"))
        num_steps = int(num_steps)
        try:
            if isinstance(env_ret, MultiAgentEnvRet) or isinstance(env_ret.last_reward, dict):
                writer = multi_agent_writer(self.env_id, self.num_envs, num_steps, env_ret)
            elif is_tensor_batch(env_ret.observation):  # a device-resident env: the record stays on its device
                writer = TensorRecordWriter(self.env_id, self.num_envs, num_steps, env_ret)
            else:
                writer = RecordWriter(
                    self.env_id, self.num_envs, num_steps, env_ret.observation, start_done_flags(env_ret)
                )
        except (TypeError, ValueError) as err:
            caller_error(err)
            raise
        result = RolloutResult(self.env_id, num_steps=num_steps, num_envs=self.num_envs)
        run = _Rollout(writer, result, int(policy.weight_version), env_ret)
        run.defer_value = (
            self._fast_acting
            and bool(getattr(policy, "values_after_rollout", False))
            and type(writer) is RecordWriter
            and type(writer.obs) is np.ndarray
        )
        return run

    def fill_values(self, run: _Rollout, policy: Any) -> None:
        """The values of ``run``'s observations, asked of ``policy`` at once when a rollout that acted without
        them ends (``run.defer_value``; see ``ActingPolicy``); its bootstraps become ``run.last_value``."""
        if not run.defer_value or run.steps == 0:
            return
        t0 = time.perf_counter()
        try:
            run.last_value = run.writer.fill_values(policy.compute_values, run.steps)
        except Exception as err:  # noqa: BLE001 - the policy's failure is the caller's: never a restart
            caller_error(err)
            raise
        run.inference += time.perf_counter() - t0

    def finish_rollout(self, run: _Rollout) -> RolloutResult:
        """End ``run``: its arrays (the steps taken), timing and episode statistics."""
        t0 = time.perf_counter()
        result = run.result
        result.arrays = run.writer.finish(self._episode_ids, run.steps, last_value=run.last_value)
        if type(run.writer) is TensorRecordWriter:
            run.writer.report_episodes(run.steps, result)
        result.num_steps = run.steps
        result.weight_version = run.version
        result.inference_s = run.inference
        result.env_step_s = run.stepping + (time.perf_counter() - t0)
        result.error = run.error
        return result

    def __repr__(self) -> str:
        return f"RolloutWorker({self.env!r}, policy={type(self._policy).__name__ if self._policy else None})"


def _portable_error(err: BaseException, env_id: Optional[str]) -> BaseException:
    """``err`` with the worker's traceback as a note, made picklable (it travels back in a `RolloutResult`)."""
    trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    note = f"raised in env worker {env_id}:\n{trace}"
    try:
        err.add_note(note)
        pickle.dumps(err)
        return err
    except Exception:  # noqa: BLE001 - an exception that does not pickle travels as its type and text
        return RuntimeError(f"{type(err).__module__}.{type(err).__name__}: {err}\n{note}")
