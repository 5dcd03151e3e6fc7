"""`Lab.launch`: start (or reuse) a Ray cluster with Ray's cluster launcher, connect to it, tear it down.

    lab = Lab.launch("cluster.yaml")   # the YAML `ray up` takes: aws, gcp, azure, kuberay or the on-prem `local`
    run = lab.build(cfg); run.run(10)
    lab.teardown()                     # `ray down`: only Labs that launched their cluster have it

The launcher's own progress (its ``[1/7] ...`` steps and command output) is printed in the cell.
Re-running the cell with the same YAML returns the same Lab while it is open; from a new process
the launcher finds the running head and reuses it without restarting Ray on it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shlex
import time
from pathlib import Path
from typing import Any, Dict, Optional, Union

from rlightning.utils.logger import get_cell_logger, get_logger

__all__ = ["LaunchedLab", "launch_lab", "load_cluster_config"]

logger = get_logger(__name__)
cell = get_cell_logger(__name__)  # what the user sees in the running cell

_LAUNCHED: Dict[str, Any] = {}


def load_cluster_config(cluster_yaml: Union[str, Path, Dict[str, Any]]) -> Dict[str, Any]:
    """The cluster config as a dict, from a YAML path or a dict (copied).

    Raises:
        FileNotFoundError: no file at the path.
        ValueError: the YAML is not a mapping, or it has no ``provider.type``.
        TypeError: neither a path nor a dict.
    """
    if isinstance(cluster_yaml, dict):
        config = copy.deepcopy(cluster_yaml)
    elif isinstance(cluster_yaml, (str, Path)):
        import yaml

        path = Path(cluster_yaml).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"Lab.launch: no cluster YAML at {str(path)!r}")
        config = yaml.safe_load(path.read_text())
    else:
        raise TypeError(
            "Lab.launch cluster_yaml must be a path to the YAML `ray up` takes or a dict, "
            f"got {type(cluster_yaml).__name__}"
        )
    if not isinstance(config, dict):
        raise ValueError(f"Lab.launch: the cluster YAML must be a mapping, got {type(config).__name__}")
    provider = config.get("provider")
    if not isinstance(provider, dict) or not provider.get("type"):
        raise ValueError(
            "Lab.launch: the cluster YAML needs provider.type (aws, gcp, azure, kuberay, local, ...), "
            f"got provider={provider!r}"
        )
    return config


def _key(config: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def head_port(config: Dict[str, Any]) -> int:
    """The GCS port the head starts on: ``--port`` in ``head_start_ray_commands`` (Ray's default 6379)."""
    for cmd in config.get("head_start_ray_commands") or []:
        if "ray start" in cmd and "--head" in cmd:
            m = re.search(r"--port[= ](\d+)", cmd)
            if m:
                return int(m.group(1))
    return 6379


def _fetch_token(config: Dict[str, Any]) -> Optional[str]:
    """The head's Ray auth token (``~/.ray/auth_token`` there), None when it has none."""
    from ray.autoscaler.sdk import run_on_cluster

    try:
        out = run_on_cluster(config, "cat ~/.ray/auth_token 2>/dev/null || true", with_output=True)
    except Exception as err:  # noqa: BLE001 - a head without token auth
        logger.debug("reading the head's auth token failed: %r", err)
        return None
    text = out.decode() if isinstance(out, bytes) else str(out or "")
    tokens = [line.strip() for line in text.splitlines() if line.strip()]
    return tokens[-1] if tokens else None


def _connect(lab_cls: type, address: str, token: Optional[str], timeout_s: float, **ray_init_kwargs: Any) -> Any:
    from rlightning.notebook.lab import ClusterConnectionError

    deadline = time.time() + timeout_s
    while True:
        try:
            return lab_cls.connect(address, token=token, timeout_s=10.0, **ray_init_kwargs)
        except ClusterConnectionError:
            if time.time() > deadline:
                raise
            time.sleep(2.0)


def launch_lab(
    lab_cls: type,
    cluster_yaml: Union[str, Path, Dict[str, Any]],
    *,
    token: Optional[str] = None,
    timeout_s: float = 600.0,
    address: Optional[str] = None,
    **ray_init_kwargs: Any,
) -> Any:
    """Start or reuse the cluster ``cluster_yaml`` describes, wait for its head, connect; returns a `LaunchedLab`.

    Args:
        lab_cls: `Lab` (the class whose ``connect`` is used).
        cluster_yaml: The YAML `ray up` takes (a path or a dict).
        token: The head's auth token (None: read from the head over the launcher's SSH when it has one).
        timeout_s: How long to wait for the head to answer after the launcher returns.
        address: Where to reach the head's GCS (None: the head's IP and ``--port`` of its start command).
        **ray_init_kwargs: Passed to ``ray.init``.
    """
    config = load_cluster_config(cluster_yaml)
    key = _key(config)
    existing = _LAUNCHED.get(key)
    if existing is not None and existing.is_open:
        return existing
    from ray.autoscaler import sdk

    name = config.get("cluster_name", "default")
    logger.info("launching Ray cluster %r (provider %s)", name, config["provider"]["type"])
    cell.info(
        "[rlightning] launching Ray cluster %r with Ray's cluster launcher (%s)", name, config["provider"]["type"]
    )
    # no_restart: a head already running this config keeps its Ray (re-running the cell reuses the cluster);
    # a new head is started whatever no_restart says.
    sdk.create_or_update_cluster(config, no_restart=True, no_config_cache=True)
    head_ip = sdk.get_head_node_ip(config)
    address = address or f"{head_ip}:{head_port(config)}"
    if token is None:
        token = _fetch_token(config)
    cell.info("[rlightning] head %s is up; connecting to %s", head_ip, address)
    lab = _connect(LaunchedLab, address, token, timeout_s, **ray_init_kwargs)
    if not isinstance(lab, LaunchedLab):
        raise RuntimeError(
            f"this process already has a Lab connected to {address!r} that did not launch it; shut it down first"
        )
    lab.cluster_config = config
    _LAUNCHED[key] = lab
    return lab


def _lab_base() -> type:
    from rlightning.notebook.lab import Lab

    return Lab


class LaunchedLab(_lab_base()):
    """A `Lab` connected to a cluster it launched: it can also `teardown` that cluster."""

    cluster_config: Optional[Dict[str, Any]] = None

    def teardown(self) -> None:
        """Stop this Lab's runs, disconnect, and destroy the cluster's nodes (`ray down`); idempotent."""
        from ray.autoscaler import sdk

        config = self.cluster_config
        self.shutdown()
        if config is None:
            return
        self.cluster_config = None
        _LAUNCHED.pop(_key(config), None)
        cell.info("[rlightning] tearing down Ray cluster %r", config.get("cluster_name", "default"))
        sdk.teardown_cluster(config)

    def __repr__(self) -> str:
        name = (self.cluster_config or {}).get("cluster_name", "?")
        return f"Launched{super().__repr__()} [cluster {shlex.quote(str(name))}]"
