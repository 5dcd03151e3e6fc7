"""Typed configuration: pydantic models, packaged YAML presets, dotted overrides.

Every field has a default and a one-line docstring. Unknown keys are rejected
with the closest valid name; invalid values name the field and what is valid.

    cfg = load_preset("cartpole_ppo")
    cfg = apply_overrides(cfg, ["train.iterations=50", "env.num_envs=16"])
    cfg.cluster.eval_worker_num = 2          # validated on assignment
    text = to_yaml(cfg)                      # YAML that load_config reads back

The ``policy`` section is the config class of its ``policy.type``: shared settings (network,
optimizer, gamma, weight sync) in `PolicyConfig`, each algorithm's own in a subclass beside its
code (``PPOConfig``, ``SACConfig``, ``DQNConfig``; a registered policy brings its own, see
`policy_config_class`). ``PolicyConfig(type="sac", tau=0.01)`` builds a ``SACConfig``; the
override ``policy.type=sac`` switches the class and keeps the shared settings.

Bad input ends in one documented exception type, `ConfigError` (a ``ValueError``),
whose message names the dotted field and what would be valid:

- unknown keys (in a dict, a YAML file, an override or an attribute assignment);
- wrong types (a string or a boolean where a number goes, a list where a section goes);
- out-of-range values (``env.num_envs=0``, ``policy.gamma=2``), NaN or infinite floats,
  integers beyond 64 bits;
- unreadable files: missing, a directory, not UTF-8, not YAML, nested too deeply,
  duplicate keys, or not a mapping at the top level;
- malformed overrides (no ``=``, empty key parts, a string instead of a list).

Two subclasses keep the usual Python types too: names that do not exist (an
unknown preset; in `rlightning.utils.validate`, an unregistered engine, policy,
buffer or env backend) raise `UnknownNameError`, also a ``KeyError``; assigning
an attribute that is not a field (``cfg.train.iteratons = 5``) raises
`UnknownKeyError`, also an ``AttributeError``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, Union, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from typing_extensions import Annotated

from rlightning.utils.registry import closest

__all__ = [
    "BufferConfig",
    "ClusterConfig",
    "ConfigError",
    "EnvConfig",
    "LogConfig",
    "MainConfig",
    "OptimConfig",
    "PolicyConfig",
    "policy_config_class",
    "policy_config_classes",
    "TrainConfig",
    "UnknownKeyError",
    "UnknownNameError",
    "apply_overrides",
    "config_from_dict",
    "list_presets",
    "load_config",
    "load_preset",
    "to_yaml",
]


class ConfigError(ValueError):
    """A config could not be built: unknown key, bad value or unreadable file."""


class UnknownKeyError(ConfigError, AttributeError):
    """Setting an attribute that is not a field of the config section (also an ``AttributeError``)."""


class UnknownNameError(ConfigError, KeyError):
    """A name that does not exist: a preset, or an engine, policy, buffer or env backend not registered."""

    __str__ = Exception.__str__  # the message as written, not quoted like a KeyError's


_INT64 = 2**63


class _Config(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        validate_assignment=True,
        use_attribute_docstrings=True,
        validate_default=True,
        allow_inf_nan=False,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _strict_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads True as 1 and accepts any Python int: a flag or a huge number in a count is a mistake.
        if isinstance(value, bool):
            kinds = get_args(cls.model_fields[info.field_name].annotation) or (
                cls.model_fields[info.field_name].annotation,
            )
            if bool not in kinds and Any not in kinds and (int in kinds or float in kinds):
                raise ValueError(f"Input should be a number, not the boolean {value}")
        elif isinstance(value, int) and not -_INT64 <= value < _INT64:
            raise ValueError("Input should fit in a 64-bit integer")
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            return super().__setattr__(name, value)
        if name not in type(self).model_fields:
            raise UnknownKeyError(_unknown_key_message(type(self), name))
        try:
            super().__setattr__(name, value)
        except ValidationError as err:
            _raise_config_error(err, f"for {type(self).__name__}")

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = set(cls.model_fields)
            for key in data:
                if key not in known:
                    raise ValueError(_unknown_key_message(cls, str(key)))
        return data


def _unknown_key_message(cls: type, key: str) -> str:
    fields = sorted(cls.model_fields)
    near = closest(key, fields, n=1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    if issubclass(cls, PolicyConfig):
        hint += _other_algorithm_hint(cls, key)
    return f"unknown {cls.__name__} key {key!r}.{hint} Valid keys: {', '.join(fields)}"


def _other_algorithm_hint(cls: type, key: str) -> str:
    """Names the policy types whose config has ``key`` (a PPO key given to a SAC config...)."""
    try:
        owners = [n for n, c in policy_config_classes().items() if key in c.model_fields and c is not cls]
    except Exception:  # noqa: BLE001 - a broken user registration must not hide the unknown-key message
        return ""
    if not owners:
        return ""
    return f" ({key!r} is a setting of policy.type {', '.join(repr(n) for n in owners)}, not of this policy type)"


class EnvConfig(_Config):
    """One kind of environment, replicated over ``num_workers`` env workers."""

    name: str = "CartPole-v1"
    """Gymnasium id (``CartPole-v1``), ``module:Class`` entry point, or a name registered in ``ENVS``."""
    backend: str = "gymnasium"
    """Env backend registered in ``ENVS`` that wraps ``name`` (``gymnasium``, or a custom `BaseEnv`)."""
    num_workers: int = Field(1, ge=1)
    """Number of env workers (one Ray actor each when envs are remote)."""
    num_envs: int = Field(1, ge=1)
    """Vectorised sub-environments per worker; one `EnvRet` carries all of them."""
    env_kwargs: Dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments passed to the environment constructor."""
    max_episode_steps: Optional[int] = Field(None, ge=1)
    """Truncate episodes after this many steps (None: the env's own limit)."""
    vectorization_mode: Literal["auto", "vector_entry_point", "sync", "async"] = "auto"
    """How sub-environments are vectorised; ``auto`` uses the env's own vector implementation if it has one."""
    num_cpus: float = Field(1.0, ge=0)
    """Logical CPUs reserved by each remote env worker."""
    num_gpus: float = Field(0.0, ge=0)
    """GPUs reserved by each remote env worker."""
    resources: Dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources reserved by each remote env worker (``{"node_a": 1}`` pins them to nodes offering it)."""
    max_restarts: int = Field(3, ge=0)
    """Consecutive failures of an env worker (its actor died, its env raised or hung) that are recreated before
    the run stops; a worker that steps cleanly after a restart is forgiven (its count starts again at 0)."""
    max_total_restarts: Optional[int] = Field(None, ge=0)
    """Restarts of an env worker over the whole run before the run stops (None: unlimited)."""
    failure_rate_limit: Optional[int] = Field(None, ge=1)
    """Failures of one env worker allowed within any ``failure_rate_window_s`` seconds, in a row or not; one more
    stops the run (None: no rate limit). Catches an env that fails often but steps cleanly in between, which
    ``max_restarts`` forgives (``failure_rate_limit=5`` with the default window: at most 5 failures in 10 minutes)."""
    failure_rate_window_s: float = Field(600.0, gt=0)
    """The window of ``failure_rate_limit``, in seconds."""
    step_timeout_s: Optional[float] = Field(None, gt=0)
    """Seconds a Ray env worker's step or rollout may take before the worker is killed and recreated (its
    partial episodes dropped, counted as ``env_timeouts``); None: ``max(60, 100 x`` the median measured time
    of that call``)``, so it never fires on a healthy run. Local workers (in this process) cannot be stopped."""
    out_of_bounds_action: Literal["pass", "clip", "raise"] = "pass"
    """Box actions outside the bounds: passed to the env unchanged (most envs clip), clipped here, or rejected."""
    wrappers: List[Union[str, Dict[str, Any]]] = Field(default_factory=list)
    """Gymnasium wrappers around every sub-env, in order: short names (``frame_stack``, ``atari_preprocessing``,
    ...), ``gymnasium.wrappers`` class names or ``module:Class``, each optionally ``{name: ..., kwargs: {...}}``."""

    @field_validator("wrappers")
    @classmethod
    def _known_wrappers(cls, value: List[Any]) -> List[Any]:
        # Resolved here, so an unknown wrapper or argument fails when the config is built, before any actor.
        from rlightning.env.wrappers import resolve_wrappers

        try:
            resolve_wrappers(value)
        except (KeyError, TypeError) as err:
            raise ValueError(err.args[0] if err.args else str(err)) from None
        return value


class OptimConfig(_Config):
    """Optimizer settings handed to ``BasePolicy.setup_optimizer``."""

    name: Literal["adam", "adamw", "sgd"] = "adam"
    """Torch optimizer."""
    lr: float = Field(3e-4, gt=0)
    """Learning rate (actor and critic unless the algorithm overrides it)."""
    eps: float = Field(1e-5, gt=0)
    """Adam epsilon."""
    weight_decay: float = Field(0.0, ge=0)
    """L2 weight decay."""
    max_grad_norm: Optional[float] = Field(0.5, gt=0)
    """Clip gradients to this global norm (None: no clipping)."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to zero over the run: ``TrainConfig.iterations``, or
    ``TrainConfig.total_env_steps`` when that budget ends the run first."""
    flush_denormals: bool = True
    """Treat subnormal floats (below 1.2e-38) as zero during the learner's updates on the CPU (each ``train()``
    call and each ``apply_gradients``; ``torch.set_flush_denormal``, the calling thread only, switched off after).
    A ReLU unit that stopped firing leaves Adam's moments decaying through the subnormal range, where every CPU
    operation on them is many times slower: a quarter of the 256-wide DQN layer's ``exp_avg`` entries at once,
    and a fused Adam step 3.4x slower. The update differs only below 1.2e-38. False: left as the process has it."""
    matmul_precision: Optional[Literal["highest", "high", "medium"]] = None
    """Internal precision of float32 matrix products during the learner's updates (the forward passes, backward
    and optimizer steps of ``train()``; ``torch.set_float32_matmul_precision``, restored after each update;
    acting is unaffected). None: as the process has it (torch's default is ``"highest"``). ``"highest"``:
    float32. ``"high"``/``"medium"``: TensorFloat-32 on CUDA; on a CPU with bfloat16 units (AMX or AVX512-BF16),
    ``"medium"`` multiplies bfloat16-rounded inputs with float32 accumulation (oneDNN), about 3x faster for
    TD3's 400x300 layers, while tensors, losses, targets and the optimizer stay float32 (unlike
    ``torch.autocast``, whose bfloat16 activations and TD targets diverged). A CPU without bfloat16 units keeps
    float32: emulated bfloat16 would be slower."""


DEFAULT_POLICY_TYPE = "ppo"


class _PolicyConfigMeta(type(_Config)):
    """Makes ``PolicyConfig(type=..., ...)`` build the config class of that policy type."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is PolicyConfig and not args:
            target = policy_config_class(kwargs.get("type", DEFAULT_POLICY_TYPE))
            if target is not PolicyConfig:
                return target(**kwargs)
        return super().__call__(*args, **kwargs)


class PolicyConfig(_Config, metaclass=_PolicyConfigMeta):
    """The policy: its type, network, optimizer and the settings every algorithm shares.

    Each algorithm's own hyperparameters live in a subclass beside its code (``PPOConfig`` in
    ``rlightning.policy.algorithms.ppo``, ...), chosen by ``type``: ``PolicyConfig(type="sac", tau=0.01)``
    and a ``policy:`` section with ``type: sac`` both give a ``SACConfig``. A policy brings its config as
    the class attribute ``config_cls`` or with ``POLICIES.register(name, config=...)``; one that declares
    none gets this shared config.
    """

    type: str = DEFAULT_POLICY_TYPE
    """Policy class registered in ``POLICIES`` (``ppo``, ``sac``, ``dqn`` or your own); selects the config class."""
    rollout_mode: Literal["sync", "async"] = "sync"
    """``async`` lets an eval worker serve several env workers concurrently."""
    max_concurrency: int = Field(16, ge=1)
    """Concurrent calls an async eval actor accepts."""
    hidden_sizes: List[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [64, 64])
    """Hidden layer widths of the MLPs."""
    activation: Literal["tanh", "relu", "elu", "gelu"] = "tanh"
    """Hidden activation."""
    cnn: Literal["nature", "impala", "minatar"] = "nature"
    """Encoder of image observations: the Nature-DQN CNN (84x84 frames), the IMPALA ResNet (any size) or
    the MinAtar paper's one-convolution network (small frames)."""
    optim: OptimConfig = Field(default_factory=OptimConfig)
    """Optimizer settings."""
    gamma: float = Field(0.99, ge=0, le=1)
    """Discount factor."""
    norm_obs: bool = False
    """Normalise observations with running mean/std statistics kept by the policy."""
    weight_sync: Literal["object_store", "collective", "colocated"] = "object_store"
    """How train weights reach eval workers: Ray object store, a torch.distributed broadcast, or in-process."""
    deterministic_eval: bool = False
    """Eval workers act deterministically (the ``eval`` engine always does)."""
    checkpoint: Optional[str] = None
    """Load weights from this checkpoint file when the policy is built."""
    max_restarts: int = Field(3, ge=0)
    """How many times a dead eval worker actor is relaunched (and given the current weights) before the run stops."""
    agent_groups: Optional[Dict[str, List[str]]] = None
    """Multi-agent envs: policy group name -> the agent ids it acts for, one set of parameters per group (every
    agent in exactly one group; a group's agents have the same spaces). None: one policy shared by all agents."""

    @model_validator(mode="wrap")
    @classmethod
    def _select_algorithm_config(cls, data: Any, handler: Any) -> Any:
        # A ``policy:`` mapping validated as PolicyConfig becomes the config class of its type.
        if cls is PolicyConfig and isinstance(data, dict):
            try:
                target = policy_config_class(data.get("type", DEFAULT_POLICY_TYPE))
            except ConfigError as err:
                error = {"error": str(err).removeprefix("policy.type: ").removeprefix("policy.type ")}
                line = {"type": "value_error", "loc": ("type",), "input": data.get("type"), "ctx": error}
                raise ValidationError.from_exception_data(cls.__name__, [line]) from None
            if target is not PolicyConfig:
                return target.model_validate(data)
        return handler(data)

    @field_validator("type")
    @classmethod
    def _type_fits_config_class(cls, value: str) -> str:
        # A type registered in this process must take this class (or one it derives from); a type this
        # process has not registered is accepted (a worker process unpickling a notebook's policy).
        registered = _registered_policy_config(value)
        if registered is not None and not issubclass(cls, registered):
            raise ValueError(
                f"policy type {value!r} takes {registered.__name__}, not {cls.__name__}; build it with "
                f"PolicyConfig(type={value!r}, ...) or assign the whole section (cfg.policy = {{'type': {value!r}}})"
            )
        return value


def _registered_policy_config(name: str) -> Optional[type]:
    """The config class of a registered policy type, or None when ``name`` is not registered here."""
    from rlightning.utils.registry import POLICIES

    if not isinstance(name, str) or name not in POLICIES:
        return None
    return policy_config_class(name)


def policy_config_class(name: str) -> type:
    """The config class of the policy registered as ``name`` (`PolicyConfig` when it declares none).

    The config is what ``POLICIES.register(name, config=...)`` was given, else the policy class's
    ``config_cls`` attribute, else the shared `PolicyConfig`.

    Raises:
        UnknownNameError: ``name`` is not a registered policy (the message names the closest ones).
        ConfigError: ``name`` is not a string.
        TypeError: the policy declares a config that is not a `PolicyConfig` subclass.
    """
    from rlightning.utils.registry import POLICIES

    if not isinstance(name, str):
        raise ConfigError(f"policy.type must be the name of a registered policy (a string), got {name!r}")
    try:
        policy_cls = POLICIES.get(name)
    except KeyError as err:
        raise UnknownNameError(f"policy.type: {err.args[0]}") from None
    config = POLICIES.config_of(name) or getattr(policy_cls, "config_cls", None) or PolicyConfig
    if not (isinstance(config, type) and issubclass(config, PolicyConfig)):
        raise TypeError(f"policy {name!r} declares config {config!r}, which is not a PolicyConfig subclass")
    return config


def policy_config_classes() -> Dict[str, type]:
    """Every registered policy type and its config class."""
    from rlightning.utils.registry import POLICIES

    return {name: policy_config_class(name) for name in POLICIES.names()}


class BufferConfig(_Config):
    """The data buffer: storage layout, sampling and sharding."""

    type: str = "rollout"
    """Buffer class registered in ``BUFFERS`` (``rollout`` for on-policy, ``replay`` for off-policy)."""
    capacity: int = Field(100_000, ge=1)
    """Capacity of each storage shard, in transitions or episodes (see ``unit``)."""
    mode: Literal["circular", "standard"] = "circular"
    """``circular`` overwrites the oldest data; ``standard`` raises once full."""
    unit: Literal["transition", "episode"] = "transition"
    """What an index addresses: one transition, or one whole episode."""
    sampler: Literal["uniform", "all", "batch", "prioritized"] = "uniform"
    """Uniform with replacement, the whole buffer shuffled, batches without replacement, or prioritized."""
    slice_len: Optional[int] = Field(None, ge=1)
    """Episode unit: sample fixed-length slices of this many steps (None: whole episodes)."""
    burn_in: int = Field(0, ge=0)
    """Episode unit with ``slice_len``: also sample this many steps before each slice (flagged ``burn_in``,
    outside ``mask``) for a recurrent learner to warm up its state on (R2D2's burn-in)."""
    device: str = "cpu"
    """Device the storage tensors live on."""
    auto_truncate_episode: bool = True
    """End an episode when an EnvRet says terminated or truncated."""
    priority_alpha: float = Field(0.6, ge=0)
    """Prioritized sampler: priority exponent."""
    priority_beta: float = Field(0.4, ge=0)
    """Prioritized sampler: importance-weight exponent."""
    priority_eps: float = Field(1e-6, gt=0)
    """Prioritized sampler: added to every priority."""
    normalize_obs: bool = False
    """Store observations normalised by running mean/std."""
    normalize_reward: bool = False
    """Store rewards scaled by a running estimate of the return's std."""
    nan_guard: Literal["raise", "drop", "warn"] = "raise"
    """What a NaN or inf in an observation or reward does: raise, drop the episode, or log a warning."""
    seed: Optional[int] = Field(None, ge=0)
    """Seed of the samplers (shard ``i`` uses ``seed + i``); None: derived from the run's ``seed`` when an
    engine builds the buffer (``DataBuffer.init(run_seed=...)``), random for a buffer initialised without one."""
    on_shard_loss: Literal["replace", "raise"] = "replace"
    """A storage shard actor that dies: replaced by an empty shard (what it held is reported), or the run stops."""
    node_affinity_env: bool = False
    """Remote shards: placed on the nodes their env workers landed on, each env writing to a shard on its node."""
    node_affinity_train: bool = False
    """Each train worker samples from the shards on its own node (with ``node_affinity_env``)."""


class TrainConfig(_Config):
    """The training loop run by the engine."""

    iterations: int = Field(100, ge=1)
    """Engine iterations (rollout, update, train, sync) to run."""
    rollout_steps: int = Field(128, ge=1)
    """Env steps per env worker per iteration (each step advances all sub-environments)."""
    batch_size: int = Field(256, ge=1)
    """Transitions sampled per train worker per iteration (on-policy: ignored, the whole rollout is used)."""
    learning_starts: int = Field(0, ge=0)
    """Off-policy: env steps collected before training starts."""
    updates_per_iteration: int = Field(1, ge=1)
    """Off-policy: gradient updates per iteration."""
    store_open_episodes: bool = False
    """Off-policy, syncrl: at the end of each rollout also store the episodes still running (as truncated
    segments that continue in the next rollout), so training sees every step collected so far, as SB3 does;
    False: an episode is stored once it ends. The critic targets use ``terminated`` only, so a cut does not
    change them (n-step returns stop at it)."""
    batched_updates: bool = True
    """Off-policy with the uniform sampler and a policy that supports it (DQN, SAC, TD3): draw an iteration's
    ``updates_per_iteration`` batches in one buffer sample and train them in one call per train worker (the
    same batches in distribution, the same updates in order); False: one sample and one call per update.
    Prioritized replay always samples once per update (each draw sees the priorities written before it)."""
    total_env_steps: Optional[int] = Field(None, ge=1)
    """Stop once this many env steps are collected (None: ``iterations`` decides)."""
    target_return: Optional[float] = None
    """Stop once the mean return of the last ``return_window`` episodes reaches this."""
    return_window: int = Field(20, ge=1)
    """Episodes averaged into ``episode_return_mean`` (and checked against ``target_return``)."""
    eval_interval: int = Field(0, ge=0)
    """Run an evaluation every this many iterations (0: never)."""
    eval_episodes: int = Field(10, ge=1)
    """Episodes per evaluation."""
    checkpoint_interval: int = Field(0, ge=0)
    """Save a checkpoint every this many iterations (0: only at the end)."""
    keep_checkpoints: Optional[int] = Field(None, ge=1)
    """Keep the newest this many checkpoints of the run (plus the best by evaluation return when
    ``eval_interval`` is set); None: keep all."""
    checkpoint_buffer: bool = False
    """Periodic checkpoints also hold the buffer's stored data (a resumed off-policy run keeps its replay)."""
    checkpoint_resets_envs: bool = False
    """Reset the envs (seeded) after each periodic checkpoint, so that a run resumed from any checkpoint
    repeats the uninterrupted run exactly; False: episodes run on across checkpoints and a resumed run starts
    new ones (episodes in flight are not in a checkpoint)."""
    dataset: Optional[str] = None
    """``offline`` engine: the Minari dataset it trains from (a folder, or a Minari id in Minari's local root)."""
    dataset_stream: bool = False
    """``offline`` engine: stream batches from a Ray Dataset split over the train workers, each reading only its
    share where it runs (datasets larger than one node's memory); False: the dataset is loaded into the buffer."""
    max_policy_lag: int = Field(4, ge=0)
    """Async engine: most learner updates the acting weights may be behind the learner's; beyond it
    the rollout thread waits for the next weight sync (0: act only with the newest weights)."""


class ClusterConfig(_Config):
    """Where and how the workers run."""

    address: Optional[str] = None
    """Ray address to join (``auto``, ``host:port``, ``ray://host:port``); None starts or joins a local runtime."""
    num_cpus: Optional[int] = Field(None, ge=1)
    """Logical CPUs of a local Ray runtime this config starts (None: Ray's default)."""
    num_gpus: Optional[int] = Field(None, ge=0)
    """GPUs of a local Ray runtime this config starts (None: detected)."""
    dashboard_host: str = "127.0.0.1"
    """Interface the Ray dashboard of a runtime started here listens on."""
    include_dashboard: bool = False
    """Start the Ray dashboard with a local runtime."""
    namespace: str = "rlightning"
    """Ray namespace of the actors started."""
    train_worker_num: int = Field(1, ge=1)
    """Train workers (data-parallel with DDP when more than one)."""
    eval_worker_num: int = Field(1, ge=0)
    """Eval (inference) workers that compute actions during rollouts."""
    buffer_worker_num: int = Field(1, ge=1)
    """Storage shards of the data buffer (Ray actors when ``remote_storage``)."""
    train_each_gpu_num: float = Field(0.0, ge=0)
    """GPUs per train worker."""
    eval_each_gpu_num: float = Field(0.0, ge=0)
    """GPUs per eval worker."""
    train_each_cpu_num: float = Field(1.0, ge=0)
    """Logical CPUs per train worker."""
    eval_each_cpu_num: float = Field(1.0, ge=0)
    """Logical CPUs per eval worker."""
    buffer_each_cpu_num: float = Field(1.0, ge=0)
    """Logical CPUs per storage shard actor."""
    is_colocated: bool = False
    """Train and eval policies share one process per worker (weights synced in place)."""
    inference: Literal["eval_workers", "env_workers"] = "eval_workers"
    """Where rollout actions are computed: ``eval_workers`` (the policy group's, one call per env worker per
    step) or ``env_workers`` (each env worker acts with its own copy of the policy and steps a whole rollout
    in one call; weights reach it after every sync; the fastest layout for small networks on CPUs; not asyncrl)."""
    remote_env: bool = False
    """Run env workers as Ray actors."""
    remote_eval: bool = False
    """Run eval policy workers as Ray actors."""
    remote_train: bool = False
    """Run train policy workers as Ray actors."""
    remote_storage: bool = False
    """Run storage shards as Ray actors."""
    backend: Literal["auto", "nccl", "gloo"] = "auto"
    """torch.distributed backend: ``auto`` is nccl with GPUs, gloo otherwise."""
    train_resources: Dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources reserved by each remote train worker (``{"node_a": 1}`` pins them to such nodes)."""
    train_placement: Optional[Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]] = None
    """Remote train workers gathered in a Ray placement group with this strategy (None: no placement group)."""


class LogConfig(_Config):
    """Logging, metrics and run directory."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Log level of the rlightning loggers."""
    run_dir: str = "runs"
    """Directory under which each run writes its metrics and checkpoints."""
    name: Optional[str] = None
    """Run name (None: the preset or engine name and a timestamp)."""
    jsonl: bool = True
    """Write metrics as JSON lines."""
    tensorboard: bool = False
    """Also write TensorBoard scalars (needs ``tensorboard`` installed)."""
    progress: bool = True
    """Show a progress bar in ``run()``."""
    group: Optional[str] = None
    """The experiment the run belongs to: MLflow's experiment and W&B's group (a sweep sets its name)."""
    mlflow: bool = False
    """Also log the run (each sweep trial) as one MLflow run: its config as params, its metrics each iteration."""
    mlflow_uri: Optional[str] = None
    """MLflow tracking URI, e.g. an ``mlflow server``'s ``http://host:5000`` (None: a local store,
    ``sqlite:///<run_dir>/mlflow.db``)."""
    wandb: bool = False
    """Also log the run (each sweep trial) as one Weights & Biases run, grouped by ``group``."""
    wandb_project: str = "rlightning"
    """The W&B project."""
    wandb_mode: Literal["online", "offline"] = "online"
    """``offline``: W&B writes its files under the run folder only (``wandb sync`` uploads them later)."""


class MainConfig(_Config):
    """Everything a run needs; presets are YAML files of this shape."""

    engine: str = "syncrl"
    """Engine registered in ``ENGINE`` (``syncrl``, ``asyncrl``, ``eval``, ``offline``)."""
    seed: int = Field(0, ge=0)
    """Seed for envs (worker index offsets it), torch and numpy."""
    env: EnvConfig = Field(default_factory=EnvConfig)
    """Environment settings."""
    policy: SerializeAsAny[PolicyConfig] = Field(default_factory=PolicyConfig)
    """Policy settings (the config class of ``policy.type``)."""
    buffer: BufferConfig = Field(default_factory=BufferConfig)
    """Buffer settings."""
    train: TrainConfig = Field(default_factory=TrainConfig)
    """Training loop settings."""
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    """Cluster and placement settings."""
    log: LogConfig = Field(default_factory=LogConfig)
    """Logging settings."""


# --------------------------------------------------------------------------- loading


def _short_repr(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the config error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _raise_config_error(err: ValidationError, source: str) -> None:
    lines = []
    errors = err.errors()
    for e in errors[:10]:
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        given = e.get("input")
        shown = "" if isinstance(given, dict) else f" (got {_short_repr(given)})"
        lines.append(f"{loc}: {msg}{shown}")
    if len(errors) > 10:
        lines.append(f"... and {len(errors) - 10} more")
    raise ConfigError(f"invalid config {source}: " + "; ".join(lines)) from None


# The readers and writers live in config_loading (they need the models above).
from rlightning.utils.config_loading import (  # noqa: E402
    apply_overrides,
    config_from_dict,
    list_presets,
    load_config,
    load_preset,
    to_yaml,
)
