"""`Lab`: a notebook's lease on a Ray cluster, and the runs and pieces built on it.

lab = Lab.local()                       # start or reuse a local runtime
lab = Lab.connect("127.0.0.1:6379", token_file="~/.ray/auth_token")
run = lab.build(cfg)                    # re-running the cell replaces the previous run
lab.shutdown()                          # stops exactly what this Lab started
"""

from __future__ import annotations

import atexit
import html
import os
import socket
import threading
import weakref
from pathlib import Path
from typing import Any, Dict, Optional, Union

from rlightning.notebook.checks import actor_resources, check_config, describe_need
from rlightning.notebook.errors import ResourceError, install_short_errors
from rlightning.notebook.run import Run
from rlightning.notebook.worker_logs import DEFAULT_LINES_PER_S, install_worker_log_relay
from rlightning.utils.config import BufferConfig, ClusterConfig, EnvConfig, LogConfig, MainConfig, PolicyConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.runtime import acquire_ray, release_ray

logger = get_logger(__name__)

_LIVE: weakref.WeakSet[Lab] = weakref.WeakSet()
_LOCK = threading.Lock()


class ClusterConnectionError(ConnectionError):
    """No Ray cluster could be reached at the given address, or it refused our credentials."""


def _split_address(address: str) -> tuple[str, int]:
    rest = address.removeprefix("ray://")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"cluster address {address!r} must look like 'host:port', 'ray://host:port' or 'auto'")
    return host, int(port)


def _check_reachable(address: str, timeout_s: float) -> None:
    host, port = _split_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as err:
        raise ClusterConnectionError(
            f"no Ray cluster answers at {address!r} ({err.strerror or err}); start one with "
            f"`ray start --head --node-ip-address={host} --port={port}` or check the address"
        ) from None


def _use_token(token: Optional[str], token_file: Optional[str]) -> None:
    """Point Ray's client at the cluster token (env vars Ray reads), refreshing Ray's cached config."""
    if token is None and token_file is None:
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    if token is not None:
        os.environ["RAY_AUTH_TOKEN"] = token
        os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    else:
        path = Path(token_file).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"token file {str(path)!r} does not exist; `ray get-auth-token` prints the token")
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)
        os.environ.pop("RAY_AUTH_TOKEN", None)
    try:  # Ray caches its config at import; re-read the auth settings just set
        from ray._raylet import Config

        Config.initialize("")
    except Exception as err:  # noqa: BLE001 - older Ray: the env vars alone are read at connect
        logger.debug("could not refresh Ray's config: %s", err)


def notebook_run_dir() -> Path:
    """Where runs built in a notebook write (metrics, checkpoints) unless ``log.run_dir`` is set.

    ``$RLIGHTNING_RUN_DIR``, else ``<temp dir>/rlightning-<user>/runs``: never the notebook's folder.
    """
    explicit = os.environ.get("RLIGHTNING_RUN_DIR")
    if explicit:
        return Path(explicit).expanduser()
    import getpass
    import tempfile

    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name (some containers)
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"rlightning-{user}" / "runs"


def _check_remote(remote: Any) -> None:
    if not isinstance(remote, bool):
        raise TypeError(f"remote must be True (Ray actors) or False (in this process), got {remote!r}")


class Lab:
    """A lease on a Ray runtime plus everything built through it.

    Use `Lab.local` or `Lab.connect`, not the constructor.
    """

    def __init__(self, address: Optional[str]) -> None:
        self.address = address
        self._runs: Dict[str, Run] = {}
        self._pieces: Dict[str, Any] = {}
        self._open = True
        _LIVE.add(self)
        install_short_errors()

    # ------------------------------------------------------------------ factories
    @classmethod
    def local(cls, worker_log_lines_per_s: Optional[float] = DEFAULT_LINES_PER_S, **ray_init_kwargs: Any) -> Lab:
        """Start a local Ray runtime, or reuse the one this process already has.

        Re-running the cell returns the same Lab. The dashboard, if enabled,
        listens on 127.0.0.1 unless ``dashboard_host`` says otherwise.

        Args:
            worker_log_lines_per_s: What env, policy and storage actors print reaches the running cell,
                at most this many lines a second, repeats folded (`rlightning.notebook.worker_logs`);
                None leaves Ray's own printing.
            **ray_init_kwargs: Passed to ``ray.init`` (``num_cpus``, ``include_dashboard``, ...).
        """
        with _LOCK:
            for lab in list(_LIVE):
                if lab._open and lab.address is None:
                    install_worker_log_relay(worker_log_lines_per_s)
                    return lab
            import ray

            if ray.is_initialized():
                acquire_ray(None)
            else:
                try:
                    acquire_ray(None, **ray_init_kwargs)
                except ValueError as err:
                    if "connecting to an existing cluster" not in str(err):
                        raise
                    # A stale cluster record (an earlier cluster that died uncleanly): forget it and start fresh.
                    os.environ.pop("RAY_ADDRESS", None)
                    acquire_ray(None, **ray_init_kwargs)
            install_worker_log_relay(worker_log_lines_per_s)
            return cls(None)

    @classmethod
    def connect(
        cls,
        address: str = "auto",
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        timeout_s: float = 10.0,
        worker_log_lines_per_s: Optional[float] = DEFAULT_LINES_PER_S,
        **ray_init_kwargs: Any,
    ) -> Lab:
        """Join an existing cluster (``"auto"``, ``"host:port"`` or ``"ray://host:port"``).

        Args:
            address: The cluster's address.
            token: The cluster's auth token (clusters started with ``ray start`` require one).
            token_file: A file holding the token (e.g. ``~/.ray/auth_token`` on the head).
            timeout_s: How long to wait for the address to answer before failing.
            worker_log_lines_per_s: Worker output shown in the running cell per second (see `Lab.local`).

        Raises:
            ClusterConnectionError: nothing answers at the address, or the token was refused.
        """
        import ray

        if address != "auto":
            _check_reachable(address, timeout_s)
        with _LOCK:
            for lab in list(_LIVE):
                if lab._open and lab.address == address:
                    return lab
            if ray.is_initialized():
                raise RuntimeError(
                    "this process is already connected to a Ray runtime; call shutdown() on its Lab "
                    "before connecting to another cluster"
                )
            _use_token(token, token_file)
            try:
                acquire_ray(address, **ray_init_kwargs)
            except ConnectionError as err:
                hint = ""
                if token is None and token_file is None and os.environ.get("RAY_AUTH_MODE") != "token":
                    hint = (
                        "; clusters started with `ray start` require token authentication: pass "
                        "Lab.connect(address, token=...) or token_file='~/.ray/auth_token' (from the head node)"
                    )
                raise ClusterConnectionError(
                    f"could not connect to the Ray cluster at {address!r}: {err}{hint}"
                ) from None
            except Exception as err:
                if "AuthToken" in type(err).__name__ or "authentication" in str(err).lower():
                    raise ClusterConnectionError(
                        f"the Ray cluster at {address!r} requires token authentication and refused this client: "
                        "pass Lab.connect(..., token=...) or token_file=... (the head's ~/.ray/auth_token, "
                        "or the output of `ray get-auth-token`)"
                    ) from None
                raise
            install_worker_log_relay(worker_log_lines_per_s)
            return cls(address)

    # ------------------------------------------------------------------ cluster facts
    def cluster_info(self) -> Dict[str, Any]:
        """Nodes, CPUs, GPUs, address, and what this Lab has started."""
        import ray

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        total = ray.cluster_resources()
        avail = ray.available_resources()
        return {
            "address": self.address or "local",
            "node_ips": sorted({n.get("NodeManagerAddress", "?") for n in nodes}),
            "nodes": len(nodes),
            "cpus": float(total.get("CPU", 0)),
            "cpus_free": float(avail.get("CPU", 0)),
            "gpus": float(total.get("GPU", 0)),
            "gpus_free": float(avail.get("GPU", 0)),
            "runs": sorted(self._runs),
            "pieces": sorted(self._pieces),
        }

    def _require_gpus(self, asked: float, what: str) -> None:
        if asked <= 0:
            return
        import ray

        have = float(ray.cluster_resources().get("GPU", 0))
        if asked > have:
            raise ValueError(f"{what} asks for {asked:g} GPU(s) but the cluster has {have:g}; lower the GPU count")

    # ------------------------------------------------------------------ building
    def _check_open(self) -> None:
        if not self._open:
            raise RuntimeError("this Lab was shut down; make a new one with Lab.local() or Lab.connect()")

    def build(
        self, cfg: MainConfig, name: str = "default", resume: Optional[Union[str, Path]] = None, **buffer_fns: Any
    ) -> Run:
        """Build env group, policy group, buffer and engine; replaces (and stops) an earlier run of that name.

        The whole config (env id included) is checked, and so are the CPUs and GPUs it asks of the
        cluster, before any worker starts.

        ``resume``: a run folder (``<log.run_dir>/<log.name>``) to continue from its newest complete checkpoint
        (counters, metrics, RNG, optimizer and schedules; see `BaseEngine.resume`); the run keeps writing there.

        Raises:
            ConfigError: a config problem (a ``ValueError``; an unknown name is also a ``KeyError``).
            ResourceError: the cluster has not the CPUs/GPUs free that the config asks for (a ``ValueError``).
        """
        self._check_open()
        if not isinstance(cfg, MainConfig):
            raise TypeError(
                f"Lab.build expects a MainConfig (e.g. load_preset('cartpole_ppo')), got {type(cfg).__name__}"
            )
        check_config(cfg)
        c = cfg.cluster
        self._require_gpus(
            c.train_worker_num * c.train_each_gpu_num + c.eval_worker_num * c.eval_each_gpu_num, "this config"
        )
        self._require_free(cfg, name)
        self._close_named(name)
        from rlightning.utils.builders import build_run

        cfg = cfg.model_copy(deep=True)
        if cfg.log.run_dir == LogConfig().run_dir:  # the default "runs": not the notebook's folder ("./runs" is)
            cfg.log.run_dir = str(notebook_run_dir())
        if resume is not None:  # the resumed run writes on into its folder
            cfg.log.run_dir, cfg.log.name = str(Path(resume).parent), Path(resume).name
        parts = build_run(cfg, **buffer_fns)
        if resume is not None:
            try:
                parts.engine.resume(str(resume))
            except BaseException:
                parts.engine.close()
                raise
        logger.info("run %r writes to %s", name, parts.engine.run_dir)
        run = Run(name, parts.engine.config, parts, freeze=True)
        self._runs[name] = run
        return run

    def _require_free(self, cfg: MainConfig, name: str) -> None:
        """Fail at once when the actors of ``cfg`` cannot all be placed (Ray would wait forever)."""
        import ray

        need = actor_resources(cfg)
        avail = ray.available_resources()
        held = {other: actor_resources(run.config) for other, run in self._runs.items() if not run.closed}
        returned = held.pop(name, {})  # the run this build replaces gives its share back
        for kind in ("CPU", "GPU"):
            asked = need.get(kind, 0.0)
            free = float(avail.get(kind, 0.0)) + returned.get(kind, 0.0)
            if asked <= free + 1e-9:
                continue
            others = ", ".join(f"{n!r} holds {r.get(kind, 0):g}" for n, r in held.items() if r.get(kind)) or "none"
            total = float(ray.cluster_resources().get(kind, 0.0))
            raise ResourceError(
                f"run {name!r} needs {asked:g} {kind}s for its Ray actors ({describe_need(cfg, kind)}) but only "
                f"{free:g} of the cluster's {total:g} are free (runs of this Lab: {others}); close a run "
                f"(lab.runs[...].close() or build it under the same name to replace it), lower the per-worker "
                f"{kind}s or worker counts, or start the Lab with more logical {kind}s "
                f"(Lab.local(num_{kind.lower()}s=...))"
            )

    @property
    def is_open(self) -> bool:
        """True until `shutdown` (a shut-down Lab refuses to build; start a new one)."""
        return self._open

    @property
    def runs(self) -> Dict[str, Run]:
        """The runs built by this Lab, by name."""
        return dict(self._runs)

    def compare(self, *runs: Run, live: bool = True) -> Any:
        """Overlay several runs' curves (return against env steps, throughput) in one live view.

        ``lab.compare()`` without arguments compares every run of this Lab.
        """
        from rlightning.widgets.compare import CompareView

        chosen = list(runs) or [r for r in self._runs.values() if not r.closed]
        return CompareView(chosen, live=live)

    def _close_named(self, name: str) -> None:
        old = self._runs.pop(name, None)
        if old is not None:
            logger.info("replacing run %r: stopping the one built before", name)
            old.close()
        piece = self._pieces.pop(name, None)
        if piece is not None and hasattr(piece, "close"):
            piece.close()

    def env_group(self, env_cfg: EnvConfig, name: str = "env_group", remote: bool = True) -> Any:
        """Build and init an `EnvGroup` on its own (replacing an earlier one of that name).

        ``remote``: the env workers are Ray actors (default) or objects in this process.
        """
        self._check_open()
        from rlightning.env.builder import build_env_group

        _check_remote(remote)
        self._close_named(name)
        group = build_env_group(env_cfg, remote=remote)
        group.init()
        self._pieces[name] = group
        return group

    def policy_group(
        self,
        policy_cfg: PolicyConfig,
        cluster_cfg: Optional[ClusterConfig] = None,
        gpus: float = 0.0,
        name: str = "policy_group",
        remote: bool = True,
    ) -> Any:
        """Build a `PolicyGroup`; ``gpus`` is the GPUs per train and per eval worker (a GPU policy group).

        ``remote``: the train and eval workers are Ray actors (default) or objects in this process.
        """
        self._check_open()
        from rlightning.policy.builder import build_policy_group
        from rlightning.utils.placement import Placement

        _check_remote(remote)
        cluster = (cluster_cfg or ClusterConfig()).model_copy()
        if gpus:
            cluster.train_each_gpu_num = gpus
            cluster.eval_each_gpu_num = gpus
        self._require_gpus(
            cluster.train_worker_num * cluster.train_each_gpu_num + cluster.eval_worker_num * cluster.eval_each_gpu_num,
            f"policy group {name!r}",
        )
        self._close_named(name)
        placement = Placement.from_cluster_config(cluster).replace(remote_train=remote, remote_eval=remote)
        group = build_policy_group(
            policy_cfg.type, policy_cfg, cluster, backend="nccl" if gpus else "gloo", placement=placement
        )
        self._pieces[name] = group
        return group

    def data_buffer(self, buffer_cfg: BufferConfig, name: str = "data_buffer", remote: bool = True, **fns: Any) -> Any:
        """Build a `DataBuffer` (call its ``init(env_metas, env_ids, ...)`` next).

        ``remote``: its storage shards are Ray actors (default) or objects in this process;
        ``fns``: the pre/post-process functions of ``build_data_buffer``.
        """
        self._check_open()
        from rlightning.buffer.builder import build_data_buffer

        _check_remote(remote)
        self._close_named(name)
        buffer = build_data_buffer(buffer_cfg.type, buffer_cfg, remote=remote, **fns)
        self._pieces[name] = buffer
        return buffer

    def engine(self, cfg: MainConfig, env_group: Any, policy_group: Any, buffer: Any, name: str = "engine") -> Run:
        """Wire pieces built on their own into an engine, wrapped in a `Run`."""
        self._check_open()
        from rlightning.utils.builders import RunParts, build_engine

        self._close_named(name)
        for key in [k for k, v in self._pieces.items() if v in (env_group, policy_group, buffer)]:
            self._pieces.pop(key)  # the run owns them now
        check_config(cfg)
        engine = build_engine(cfg, env_group, policy_group, buffer)
        run = Run(name, cfg, RunParts(env_group, policy_group, buffer, engine))
        self._runs[name] = run
        return run

    # ------------------------------------------------------------------ experiments (rlightning.notebook.sweep)
    def sweep(self, cfg: MainConfig, space: Dict[str, Any], **options: Any) -> Any:
        """Run ``cfg`` over ``space`` (dotted config path -> Tune domain or list) as Ray Tune trials on this
        Lab's cluster, in the background; returns an `Experiment`. Options: `rlightning.notebook.sweep.start_sweep`.
        """
        from rlightning.notebook.sweep import start_sweep

        self._check_open()
        if isinstance(cfg, MainConfig):
            check_config(cfg)  # the env id too, as build does (the sweep checks the type and the space)
        return start_sweep(cfg, space, **options)

    def seeds(self, cfg: MainConfig, seeds: Any = 5, **options: Any) -> Any:
        """`sweep` of ``cfg`` unchanged over ``seeds`` (a count or a list); see `rlightning.notebook.stats`."""
        return self.sweep(cfg, options.pop("space", {}), seeds=seeds, allow_empty=True, **options)

    # ------------------------------------------------------------------ jobs (rlightning.notebook.jobs)
    def submit(self, cfg: MainConfig, name: str = "train", dashboard: Optional[str] = None, **kwargs: Any) -> Any:
        """Run a long training as a Ray Job on this Lab's cluster; returns its `TrainingJob` at once.

        The job runs the command line's ``train`` with ``cfg`` on the cluster (its driver joins it), so it
        goes on when this kernel ends; ``job.status()``, ``.logs()``, ``.metrics_df()``, ``.wait()`` and
        ``.stop()`` follow and control it from here. Needs the cluster's dashboard (Ray's Jobs API).

        Args:
            cfg: The config to train (checked here first, as `build` does).
            name: Part of the job id.
            dashboard: The dashboard's address (default: the one the cluster published).
            **kwargs: `rlightning.notebook.jobs.submit_training` arguments (``python``, ``runtime_env``, ...).

        Raises:
            JobsUnavailableError: no Jobs API here: Ray's dashboard packages missing, or no dashboard running.
            ConfigError: a config problem.
        """
        from rlightning.notebook.jobs import jobs_client, submit_training

        self._check_open()
        if not isinstance(cfg, MainConfig):
            raise TypeError(
                f"Lab.submit expects a MainConfig (e.g. load_preset('cartpole_ppo')), got {type(cfg).__name__}"
            )
        check_config(cfg)
        client = jobs_client(dashboard)
        return submit_training(client, cfg, name=name, **kwargs)

    def job(self, job_id: str, dashboard: Optional[str] = None) -> Any:
        """The `TrainingJob` of a job submitted earlier (from this kernel or another), by its id."""
        from rlightning.notebook.jobs import TrainingJob, jobs_client

        self._check_open()
        return TrainingJob(jobs_client(dashboard), job_id)

    # ------------------------------------------------------------------ teardown
    def shutdown(self) -> None:
        """Stop every run and piece this Lab built and give back its Ray lease (idempotent)."""
        if not self._open:
            return
        self._open = False
        for name in list(self._runs):
            self._runs.pop(name).close()
        for name in list(self._pieces):
            piece = self._pieces.pop(name)
            if hasattr(piece, "close"):
                try:
                    piece.close()
                except Exception as err:  # noqa: BLE001
                    logger.warning("closing %s failed: %s", name, err)
        release_ray()

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        if not self._open:
            return "Lab(shut down)"
        info = self.cluster_info()
        return (
            f"Lab({info['address']}: {info['nodes']} node(s) {', '.join(info['node_ips'])}, "
            f"{info['cpus']:g} CPUs ({info['cpus_free']:g} free), {info['gpus']:g} GPUs, runs={info['runs']})"
        )

    def _repr_html_(self) -> str:
        if not self._open:
            return "<b>Lab</b> (shut down)"
        info = self.cluster_info()
        rows = [
            ("address", info["address"]),
            ("nodes", f"{info['nodes']} ({', '.join(info['node_ips'])})"),
            ("CPUs", f"{info['cpus']:g} ({info['cpus_free']:g} free)"),
            ("GPUs", f"{info['gpus']:g} ({info['gpus_free']:g} free)"),
            ("runs started here", ", ".join(info["runs"]) or "none"),
            ("pieces started here", ", ".join(info["pieces"]) or "none"),
        ]
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>{html.escape(str(v))}"
            "</td></tr>"
            for k, v in rows
        )
        return f"<div class='rlightning-lab'><b>rlightning Lab</b><table>{body}</table></div>"

    # ------------------------------------------------------------------ cluster launch (rlightning.notebook.launch)
    @classmethod
    def launch(cls, cluster_yaml: Any, **kwargs: Any) -> Lab:
        """Start (or reuse) the cluster the YAML `ray up` takes describes, connect, and return its Lab.

        The returned Lab also has ``teardown()`` (`ray down`). See `rlightning.notebook.launch.launch_lab`.
        """
        from rlightning.notebook.launch import launch_lab

        return launch_lab(cls, cluster_yaml, **kwargs)


@atexit.register
def _shutdown_all() -> None:
    for lab in list(_LIVE):
        try:
            lab.shutdown()
        except Exception:  # noqa: BLE001 - interpreter is exiting
            pass
