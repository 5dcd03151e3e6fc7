"""The Ray runtime lease: start Ray only when none is running, shut down only what was started.

Every user (a Lab, the CLI, a test) calls ``acquire_ray`` and later
``release_ray``. The first acquire in a process without Ray starts it and
remembers that it did; the last release shuts it down only in that case.
Calling acquire twice from a re-run notebook cell never calls ``ray.init`` twice.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import threading
from typing import Any, Dict, Optional, Sequence

from rlightning.utils.logger import get_logger
from rlightning.utils.ray.launcher import import_ray

logger = get_logger(__name__)

_lock = threading.Lock()
_state: Dict[str, Any] = {"users": 0, "started": False}


def ray_started_here() -> bool:
    """True when the running Ray runtime was started by this process through the lease."""
    return bool(_state["started"])


def lease_users() -> int:
    """How many acquires are not yet released."""
    return int(_state["users"])


def acquire_ray(address: Optional[str] = None, **init_kwargs: Any) -> bool:
    """Make sure Ray is initialised in this process and take a lease on it.

    Args:
        address: None starts a new local runtime (ignoring any stale cluster
            record on the machine); ``"auto"``, ``"host:port"`` or
            ``"ray://host:port"`` join an existing cluster.
        **init_kwargs: Passed to ``ray.init`` when a runtime is started
            (``num_cpus``, ``num_gpus``, ...). A started runtime listens on
            127.0.0.1 only (every Ray service and worker, and the dashboard when
            asked for) unless ``node_ip_address`` / ``dashboard_host`` name
            another address (one other machines can reach, to let them join).

    Returns:
        True if this call started or joined Ray, False if Ray was already initialised.
    """
    ray = import_ray()
    with _lock:
        _state["users"] += 1
        if ray.is_initialized():
            return False
        warm = warm_imports()
        try:
            _init(ray, address, dict(init_kwargs))
        except BaseException:
            _state["users"] -= 1
            raise
        finally:
            if warm is not None:  # nothing is imported in the background once Ray is up
                finish_warm_imports()
        logger.info("Ray %s (%s)", "started" if _state["started"] else "joined", address or "local")
        return True


#: Imported in a background thread while ``ray.init`` waits for Ray's processes: the learner side
#: (torch, tensordict, the policies and buffers) that the first ``build`` needs anyway.
WARM_MODULES = ("rlightning.utils.builders",)
#: Standard-library modules that register ``before``/``after`` fork-hook pairs at import (see `warm_imports`).
FORK_HOOK_MODULES = ("concurrent.futures.thread", "logging")
_warm: Dict[str, Any] = {"thread": None}


def warm_imports(modules: Sequence[str] = WARM_MODULES) -> Optional[threading.Thread]:
    """Start importing ``modules`` in a daemon thread (once per process); returns the thread.

    Starting Ray is mostly waiting for its processes to come up, and the driver's first build
    would import torch and tensordict afterwards, one after the other. Importing them meanwhile
    takes them off that path; `acquire_ray` waits for the thread once Ray is up (so nothing is
    imported in the background while user code runs). ``RLIGHTNING_WARM_IMPORTS=0`` turns it off.
    """
    if os.environ.get("RLIGHTNING_WARM_IMPORTS", "1") == "0" or _warm["thread"] is not None:
        return _warm["thread"]
    pending = [m for m in modules if m not in sys.modules]
    if not pending:
        return None
    # A module that registers a pair of fork hooks (``before`` / ``after_in_parent``) while another
    # thread is between them sees only its ``after`` run: ``concurrent.futures.thread`` (imported by
    # torch and tensordict) then releases its unheld lock and the interpreter prints "Exception ignored
    # in: <built-in method release of _thread.lock ...> RuntimeError: release unlocked lock". ``ray.init``
    # forks while this thread imports, so such modules are imported here, in the calling thread, first.
    for name in FORK_HOOK_MODULES:
        importlib.import_module(name)

    def run() -> None:
        for name in pending:
            try:
                importlib.import_module(name)
            except BaseException as err:  # noqa: BLE001 - reported by finish_warm_imports
                _warm["error"] = (name, err)
                return

    thread = _warm["thread"] = threading.Thread(target=run, name="rlightning-warm-imports", daemon=True)
    thread.start()
    return thread


def finish_warm_imports(timeout: float = 300.0) -> None:
    """Wait for `warm_imports` to end; a failed import is logged with its cause, once.

    The module that failed is imported again where it is needed and raises there; the warning
    keeps the first cause in view (a second import of a half-run module can fail differently).
    """
    thread = _warm["thread"]
    if thread is not None:
        thread.join(timeout)
    failed = _warm.pop("error", None)
    if failed is not None:
        name, err = failed
        logger.warning("importing %s in the background failed: %s: %s", name, type(err).__name__, err)


def dashboard_missing() -> Optional[str]:
    """Why Ray's dashboard cannot start here (its packages are missing), or None when it can.

    rlightning depends on Ray core only; ``pip install "rlightning[dashboard]"`` (``ray[default]``)
    adds the dashboard, the state API and the metrics agents.
    """
    from ray._private.utils import get_dashboard_dependency_error

    err = get_dashboard_dependency_error()
    return None if err is None else str(err)


def _check_dashboard(kwargs: Dict[str, Any]) -> None:
    if not kwargs.get("include_dashboard"):
        return
    missing = dashboard_missing()
    if missing is not None:
        raise ImportError(
            f"include_dashboard=True (cluster.include_dashboard) needs Ray's dashboard packages, "
            f'which are not installed ({missing}); install them with `pip install "rlightning[dashboard]"` '
            "(Ray's `ray[default]`) or leave the dashboard off"
        )


def _check_client(address: str) -> None:
    if not address.startswith("ray://"):
        return
    try:
        import grpc  # noqa: F401 - Ray Client's transport
    except ImportError:
        raise ImportError(
            f"connecting to {address!r} uses Ray Client, which needs grpcio; install it with "
            '`pip install "rlightning[client]"` (Ray\'s `ray[client]`), or join with the GCS address '
            "('host:port', no ray://) from a machine of the cluster"
        ) from None


def _init(ray, address: Optional[str], kwargs: Dict[str, Any]) -> None:
    # On a busy machine the raylet can give up waiting for its agents (Ray's default: 30 s).
    os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
    kwargs.setdefault("ignore_reinit_error", True)
    kwargs.setdefault("log_to_driver", True)
    if address is None:
        kwargs.setdefault("include_dashboard", False)
        kwargs.setdefault("dashboard_host", "127.0.0.1")
        _check_dashboard(kwargs)
        node_ip = kwargs.pop("node_ip_address", None) or "127.0.0.1"
        kwargs["_node_ip_address"] = node_ip
        for attempt in range(3):
            try:
                with _loopback_allowed(node_ip), _worker_thread_env(), ray_messages_to_logger():
                    ray.init(address="local", **kwargs)
                break
            except Exception as err:  # noqa: BLE001 - retried only for Ray's startup timeout
                # On a loaded machine the raylet can miss Ray's fixed 30 s startup window; try again.
                if "timed out during startup" not in str(err) or attempt == 2:
                    raise
                logger.warning("Ray startup timed out (machine busy?); retrying (%d/2)", attempt + 1)
                ray.shutdown()
        _state["started"] = True
    else:
        for key in ("num_cpus", "num_gpus", "include_dashboard", "dashboard_host", "resources"):
            kwargs.pop(key, None)
        _check_client(address)
        ray.init(address=address, **kwargs)
        _state["started"] = False
        _state["worker_env"] = {}


class _ToLogger(logging.Handler):
    """Hands Ray's records to the rlightning logger; WARNING and below become INFO (shown at ``log.level``)."""

    def emit(self, record: logging.LogRecord) -> None:
        level = logging.INFO if record.levelno <= logging.WARNING else record.levelno
        try:
            logger.log(level, "ray: %s", record.getMessage())
        except Exception:  # noqa: BLE001 - logging never breaks a start
            pass


@contextlib.contextmanager
def ray_messages_to_logger():
    """While a local runtime starts, Ray's own start-up lines (the token-authentication notice,
    "Started a local Ray instance") go to the rlightning logger instead of the notebook cell."""
    ray_logger = logging.getLogger("ray")
    saved, propagate = list(ray_logger.handlers), ray_logger.propagate
    ray_logger.handlers = [_ToLogger()]
    ray_logger.propagate = False
    try:
        yield
    finally:
        ray_logger.handlers = saved
        ray_logger.propagate = propagate


WORKER_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def worker_env() -> Dict[str, str]:
    """The thread settings every worker of the runtime started here inherits (empty when none was started here)."""
    return dict(_state.get("worker_env") or {})


@contextlib.contextmanager
def _worker_thread_env():
    """Start Ray's processes with one thread per worker in their environment (the driver's is left as it was).

    Workers inherit the raylet's environment, so an actor asking for these values needs no
    ``runtime_env`` of its own and can take one of the workers Ray prestarts.
    """
    before = {k: os.environ.get(k) for k in WORKER_THREAD_VARS}
    env = {k: before[k] or "1" for k in WORKER_THREAD_VARS}
    os.environ.update(env)
    try:
        yield
        _state["worker_env"] = env
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _loopback_allowed(node_ip: str):
    """Let Ray use a loopback node address while it starts.

    On Linux Ray swaps 127.0.0.1 for the machine's interface address (so other
    machines could join), and its servers then listen on every interface. Ray
    keeps loopback only where it thinks clusters are unsupported; that switch is
    flipped for the duration of ``ray.init`` and restored (a later ``Lab.connect``
    to a remote cluster must see the real interface address again).
    """
    from ray._private import ray_constants

    if node_ip not in ("127.0.0.1", "localhost", "::1"):
        yield
        return
    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


def release_ray(force: bool = False) -> bool:
    """Give back one lease; shut Ray down when the last one goes and this process started it.

    Args:
        force: Drop every lease at once.

    Returns:
        True if Ray was shut down (or disconnected from a cluster it did not start).
    """
    ray = import_ray()
    with _lock:
        if _state["users"] == 0:
            return False
        _state["users"] = 0 if force else _state["users"] - 1
        if _state["users"] > 0 or not ray.is_initialized():
            return False
        # Disconnecting a driver from a cluster we joined leaves the cluster running;
        # shutting down one we started stops it. Both are ray.shutdown() in the driver.
        ray.shutdown()
        _state["started"] = False
        _state["worker_env"] = {}
        return True
