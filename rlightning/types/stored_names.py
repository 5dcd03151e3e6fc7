"""The names record leaves are stored under: one flat column per leaf.

A storage keeps a record's leaves as flat columns: ``obs``, ``action`` and the policy's
extras keep their (dotted) names, the ``next`` step's reward and flags drop the prefix
(``reward``, ``terminated``, ``truncated``, ``done``: what the step that acted earned),
and every other ``next`` leaf is ``next_<name>`` (``next_obs``, ``next_obs.<key>`` of a
dict observation, ``next_agents.<id>.reward`` of a multi-agent record). ``valid``,
``episode_id`` and ``next.value`` are bookkeeping, not stored columns.
"""

from __future__ import annotations

from typing import Optional, Tuple

from rlightning.types.record import EPISODE_ID, NEXT, NEXT_VALUE, VALID

__all__ = ["stored_name"]

_NEXT_FLAT = {"reward": "reward", "terminated": "terminated", "truncated": "truncated", "done": "done"}
_SKIP = {(VALID,), (EPISODE_ID,), NEXT_VALUE}


def stored_name(key: Tuple[str, ...]) -> Optional[str]:
    """The stored name of a record leaf key (None: not stored)."""
    if key in _SKIP:
        return None
    if key[0] == NEXT and len(key) > 1:
        if len(key) == 2 and key[1] in _NEXT_FLAT:
            return _NEXT_FLAT[key[1]]
        return "next_" + ".".join(key[1:])
    return ".".join(key)
