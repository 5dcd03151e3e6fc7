"""Builders of the env side (seed 004): `define_env_instance_cfgs` and `build_env_group`.

``rlightning.utils.builders`` re-exports both.
"""

from __future__ import annotations

import copy
from typing import Callable, List, Optional, Union

from rlightning.env.env_group import EnvGroup
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.utils.config import EnvConfig
from rlightning.utils.placement import Placement, check_placement_args


def define_env_instance_cfgs(
    env_cfg: EnvConfig,
    num_workers: int = 1,
) -> List[EnvConfig]:
    """Factory function to define duplicated env instance configs.

    The number of replicas is determined by ``num_workers``; each replica is an independent copy.

    Args:
        env_cfg: Base environment configuration.
        num_workers: Number of environment instances to create.

    Returns:
        List of environment configurations, one per worker.

    Raises:
        TypeError: ``env_cfg`` is not an `EnvConfig`.
        ValueError: ``num_workers`` is not an int >= 1.
    """
    if not isinstance(env_cfg, EnvConfig):
        raise TypeError(f"env_cfg must be an EnvConfig, got {type(env_cfg).__name__}")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be an int >= 1 (env workers to build), got {num_workers!r}")
    return [copy.deepcopy(env_cfg) for _ in range(num_workers)]


def build_env_group(
    env_cfgs: Union[List[EnvConfig], EnvConfig],
    preprocess_fn: Optional[Union[Callable, List[Callable]]] = default_env_preprocess_fn,
    *,
    remote: Optional[bool] = None,
    placement: Optional[Placement] = None,
) -> EnvGroup:
    """Build an environment group from configuration.

    Each config contributes ``config.num_workers`` workers; the group is not initialised (call ``init()``).

    Args:
        env_cfgs: Env config(s) to build from.
        preprocess_fn: Preprocess function(s) turning a `PolicyResponse` into the env's action, either a
            single callable or one per env config.
        remote: Env workers as Ray actors (True) or in this process (False); None: as ``placement`` says.
        placement: The run's `Placement`; None with ``remote`` None: ``InternalFlag.REMOTE_ENV`` at ``init``.

    Returns:
        EnvGroup instance managing the configured environments.

    Raises:
        TypeError: a config is not an `EnvConfig`; ``remote`` or ``placement`` of the wrong type.
        ValueError: no configs, or a preprocess list whose length differs from the number of configs.
    """
    check_placement_args(remote, placement)
    if isinstance(env_cfgs, EnvConfig):
        env_cfgs = [env_cfgs]
    if not isinstance(env_cfgs, (list, tuple)) or len(env_cfgs) == 0:
        raise ValueError(f"env_cfgs must be an EnvConfig or a non-empty list of them, got {env_cfgs!r}")
    if not isinstance(preprocess_fn, list):
        preprocess_fn = [preprocess_fn] * len(env_cfgs)
    elif len(preprocess_fn) != len(env_cfgs):
        raise ValueError(
            f"preprocess_fn has {len(preprocess_fn)} functions for {len(env_cfgs)} env configs; give one "
            "function, or one per env config"
        )
    env_instance_cfgs: List[EnvConfig] = []
    preprocess_fn_list: List[Callable] = []
    for env_cfg, pre_fn in zip(env_cfgs, preprocess_fn):
        if not isinstance(env_cfg, EnvConfig):
            raise TypeError(f"env_cfgs must hold EnvConfig objects, got {type(env_cfg).__name__}")
        preprocess_fn_list.extend([pre_fn] * env_cfg.num_workers)
        env_instance_cfgs.extend(define_env_instance_cfgs(env_cfg=env_cfg, num_workers=env_cfg.num_workers))
    return EnvGroup(
        env_cfg_list=env_instance_cfgs, preprocess_fn=preprocess_fn_list, remote=remote, placement=placement
    )
