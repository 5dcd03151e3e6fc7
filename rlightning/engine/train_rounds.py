"""The off-policy train phase of an iteration: ``train.updates_per_iteration`` gradient steps.

One step is a sample of one batch per train worker (`BaseEngine.update_dataset`) and one ``train`` call
(`BaseEngine.train`): three calls through the buffer and the policy group around a few milliseconds of
learning (a CartPole DQN step). Where the draws are independent (the uniform sampler) and the policy
learns from whatever rows it holds (`BasePolicy.minibatch_train`: DQN, SAC, TD3), the iteration's ``k``
batches are drawn in one sample (``k x batch_size`` rows per train worker, each batch as one sample would
draw it, `DataBuffer.sample` ``num_batches``) and trained in one call (`BasePolicy.train_minibatches`): the
same batches in distribution, the same updates in the same order. Prioritized replay keeps one sample per
step (each draw must see the priorities the step before wrote back). ``train.batched_updates=false``
turns it off; `BaseEngine.minibatch_chunk` caps the updates of one call (asyncrl's policy-lag bound).
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

__all__ = ["TrainRounds"]


class TrainRounds:
    """The train phase of one engine: ``run()`` makes the iteration's updates through the engine's public
    phases (`BaseEngine.update_dataset`, `BaseEngine.train`), asking `BaseEngine.minibatch_chunk` how many
    may go in one call. It keeps whether several batches per call are possible (see `minibatch_calls_possible`).
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._possible: Optional[Tuple[Tuple[Any, ...], bool]] = None  # (what the answer depends on, the answer)

    def minibatch_calls_possible(self) -> bool:
        """True when the engine may sample several batches at once and train them in one call.

        The answer is kept for as long as what it depends on stays the same (the buffer and its ``sample``,
        the policy group, the sampler, ``train.batched_updates``, the policy type): reading the buffer's
        signature and the policy class every iteration costs as much as a small env step.
        """
        engine = self.engine
        cfg = engine.config
        if engine.on_policy or not cfg.train.batched_updates or cfg.buffer.sampler != "uniform":
            return False
        buffer = engine.buffer
        sample = getattr(buffer, "__dict__", {}).get("sample")  # a per-instance override (a wrapper) counts too
        key = (id(buffer), type(buffer), id(sample), id(engine.policy_group), cfg.policy.type, type(cfg.policy))
        if self._possible is not None and self._possible[0] == key:
            return self._possible[1]
        possible = _minibatch_calls_possible(engine)
        self._possible = (key, possible)
        return possible

    def run(self) -> Dict[str, Any]:
        """``updates_per_iteration`` x (update_dataset, train) for off-policy learners, once for on-policy.

        Returns:
            Each numeric train metric's mean over the updates.
        """
        engine = self.engine
        rounds = 1 if engine.on_policy else engine.config.train.updates_per_iteration
        if hasattr(engine.policy_group, "set_env_steps"):  # exploration, target-update and beta schedules
            engine.policy_group.set_env_steps(engine.env_steps)
        batched = rounds > 1 and self.minibatch_calls_possible()
        collected: Dict[str, List[Tuple[float, int]]] = {}
        done = 0
        while done < rounds:
            k = max(1, min(rounds - done, int(engine.minibatch_chunk(rounds - done)))) if batched else 1
            if k == 1:
                engine.update_dataset()
                metrics = engine.train()
            else:
                engine.update_dataset(num_batches=k)
                metrics = engine.train(minibatches=k)
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    collected.setdefault(key, []).append((float(value), k))
            done += k
            if engine.collector.stop_requested:
                break
        return {
            key: float(np.average([v for v, _ in pairs], weights=[w for _, w in pairs]))
            for key, pairs in collected.items()
        }


def _minibatch_calls_possible(engine: Any) -> bool:
    if not hasattr(engine.policy_group, "train_minibatches"):
        return False
    try:
        if "num_batches" not in inspect.signature(engine.buffer.sample).parameters:
            return False
    except (TypeError, ValueError):  # no signature to read: a buffer of another kind
        return False
    from rlightning.policy.multi_agent import policy_class_for

    return bool(getattr(policy_class_for(engine.config), "minibatch_train", False))
