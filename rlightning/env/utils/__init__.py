"""Helpers of the env workers: action preprocessing and checks, env ids, episode bookkeeping."""

from rlightning.env.utils.utils import default_env_preprocess_fn, make_env_id

__all__ = ["default_env_preprocess_fn", "make_env_id"]
