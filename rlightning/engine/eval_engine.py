"""`eval`: rollouts only, deterministic actions, episode statistics."""

from __future__ import annotations

from typing import Any, Dict, Optional

from rlightning.engine.base_engine import BaseEngine
from rlightning.utils.registry import ENGINE


@ENGINE.register("eval")
class EvalEngine(BaseEngine):
    """Evaluation engine: each iteration plays ``train.eval_episodes`` deterministic episodes.

    Nothing is trained and nothing is stored in the buffer.
    """

    name = "eval"
    last_eval: Optional[Dict[str, Any]] = None
    """The statistics of the last evaluation round (None before the first)."""

    @property
    def inference_in_env_workers(self) -> bool:
        """Never: evaluation episodes are played by the policy group's deterministic rollout workers."""
        return False

    def evaluate(self, num_episodes: Optional[int] = None) -> Dict[str, Any]:
        """Play deterministic episodes in the engine's own env group."""
        with self._phase("evaluate"):
            result = self.evaluator.evaluate(
                num_episodes or self.config.train.eval_episodes, self.iteration, group=self.env_group
            )
        self.last_eval = result
        return result

    def iteration_phases(self) -> Dict[str, Any]:
        """One evaluation round."""
        result = self.evaluate()
        self.env_steps += int(result["length_mean"] * result["episodes"])
        self.episodes += int(result["episodes"])
        return {f"eval_{k}": v for k, v in result.items()}

    def _episode_metrics(self) -> Dict[str, Any]:
        last = self.last_eval or {}
        out: Dict[str, Any] = {"episodes": self.episodes}
        if "return_mean" in last:
            out["episode_return_mean"] = last["return_mean"]
            out["episode_length_mean"] = last["length_mean"]
        return out
