"""What a per-step call sends a Ray env worker: only what its env reads of the `PolicyResponse`.

A policy's response carries the action and its extras (``log_prob``, ``value``,
timestamps, the weight version): the driver keeps them for the buffer, but a
gymnasium worker with the default ``preprocess_fn`` reads only ``action``. Each
extra array is one more object for Ray to pickle in the driver and unpickle in
the actor, every step, on the per-step layout's critical path. `step_payloads`
sends such workers a response holding the action alone; a custom ``preprocess_fn``
or env backend (which may read anything) gets the whole response.
"""

from __future__ import annotations

from typing import Any, List, Sequence

from rlightning.env.gym_env import GymnasiumEnv
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.types import PolicyResponse

__all__ = ["reads_action_only", "step_payloads"]


def reads_action_only(slot: Any) -> bool:
    """True when the worker of ``slot`` (a `WorkerSlot`) reads nothing of a response but its ``action``."""
    return slot.env_cls is GymnasiumEnv and slot.preprocess_fn is default_env_preprocess_fn


def step_payloads(slots: Sequence[Any], resps: Sequence[Any]) -> List[Any]:
    """The responses to send ``slots`` (Ray workers): the action alone where that is all the worker reads."""
    out = list(resps)
    for i, (slot, resp) in enumerate(zip(slots, resps)):
        if type(resp) is PolicyResponse and reads_action_only(slot):
            fields = vars(resp)
            if "action" in fields and len(fields) > 2:
                out[i] = PolicyResponse(resp.env_id, action=fields["action"])
    return out
