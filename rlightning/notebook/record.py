"""``run.record(episodes=N)``: play the current policy in an env of its own and keep the frames.

The env is the run's gymnasium env made with ``render_mode="rgb_array"`` (same id, kwargs and
episode limit as training), the policy an eval-role copy in this process with the train
workers' current weights, acting deterministically. Training envs are not touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List

import numpy as np

from rlightning.types import EnvMeta, EnvRet


@dataclass
class Episode:
    """One recorded episode: its frames (``uint8 [T, H, W, 3]``), return and length."""

    frames: np.ndarray
    ret: float
    length: int


@dataclass
class Recording:
    """Episodes played by ``run.record``, with the frame rate to show them at."""

    episodes: List[Episode] = field(default_factory=list)
    fps: int = 30
    env_name: str = ""
    iteration: int = 0


def _make_env(cfg: Any) -> Any:
    import os

    import gymnasium as gym

    # Off-screen rendering: pygame (classic control, Box2D) needs no display; without this SDL prints
    # "XDG_RUNTIME_DIR is invalid" into the cell on headless machines.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

    if cfg.env.backend != "gymnasium":
        raise ValueError(
            f"run.record plays gymnasium envs; env.backend is {cfg.env.backend!r} (its BaseEnv has no render path)"
        )
    from rlightning.env.gym_env import resolve_env_spec

    spec = resolve_env_spec(cfg.env.name)
    kwargs = dict(cfg.env.env_kwargs)
    kwargs["render_mode"] = "rgb_array"
    if cfg.env.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.env.max_episode_steps
    try:
        return gym.make(spec, **kwargs)
    except TypeError as err:
        raise ValueError(f"env {cfg.env.name!r} cannot render frames (render_mode='rgb_array'): {err}") from None


def _policy_copy(run: Any, env: Any) -> Any:
    from rlightning.policy.base_policy import PolicyRole
    from rlightning.policy.builder import resolve_policy_class

    cfg = run.config
    policy = resolve_policy_class(cfg.policy.type)(cfg.policy.model_copy(deep=True), role_type=PolicyRole.EVAL)
    meta = EnvMeta(env_id="record", action_space=env.action_space, observation_space=env.observation_space, num_envs=1)
    policy.setup(meta, cfg.seed)
    policy.load_state_dict(run.policy_group.get_weights(), run.policy_group.weight_version)
    policy.set_deterministic(True)
    return policy


def record_episodes(run: Any, episodes: int = 1, max_steps: int = 2_000, fps: int = 30) -> Recording:
    """Play ``episodes`` episodes and keep their frames (at most ``max_steps`` steps each).

    Raises:
        ValueError: ``episodes`` or ``max_steps`` below 1, or an env that cannot render.
    """
    for name, value in (("episodes", episodes), ("max_steps", max_steps), ("fps", fps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"run.record: {name} must be an int >= 1, got {value!r}")
    from rlightning.env.utils.utils import default_env_preprocess_fn

    env = _make_env(run.config)
    try:
        policy = _policy_copy(run, env)
        out = Recording(fps=fps, env_name=run.config.env.name, iteration=run.engine.iteration)
        for i in range(episodes):
            obs, _ = env.reset(seed=run.config.seed + 31_337 + i)
            frames = [np.asarray(env.render(), dtype=np.uint8)]
            total, steps = 0.0, 0
            for _ in range(max_steps):
                ret = EnvRet(
                    "record", np.asarray(obs)[None], np.zeros(1, np.float32), np.zeros(1, bool), np.zeros(1, bool), {}
                )
                action = default_env_preprocess_fn(policy.rollout_batch([ret])[0])[0]
                obs, reward, terminated, truncated, _ = env.step(action)
                frames.append(np.asarray(env.render(), dtype=np.uint8))
                total += float(reward)
                steps += 1
                if terminated or truncated:
                    break
            out.episodes.append(Episode(np.stack(frames), total, steps))
        return out
    finally:
        env.close()
