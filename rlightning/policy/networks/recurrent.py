"""Recurrent cores (LSTM, GRU) between an encoder and the heads, and the acting state they carry.

    core = build_recurrent_core("lstm", encoder.dim, hidden_size=128)  # an nn.Module with .dim
    state = core.initial_state(batch=8)               # {"recurrent_h": [8, 128], "recurrent_c": [8, 128]}
    y, state = core.step(x, state, is_init)           # acting: one step, [B, D] -> [B, 128]
    y = core.unroll(x_seq, state0, is_init_seq)       # training: [B, L, D] -> [B, L, 128]

The state is a dict of ``[B, hidden]`` float32 tensors named by `RecurrentCore.state_keys` (the policy's
extras in the record: the state *before* each step, so training re-runs a sequence from its first
step's stored state). ``is_init`` marks the steps whose observation starts an episode: the state is set to
zero there, in acting and in training alike.

`RecurrentStreams` keeps the acting state per env worker (its env id) and per acting mode: an eval worker
that serves several env workers, and the deterministic evaluation episodes beside the rollouts, each get
their own. An EnvRet asked about twice (the bootstrap value at the end of a rollout, then the first action
of the next one) acts both times from the same state.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

__all__ = [
    "RECURRENT_CORES",
    "ActorCriticCores",
    "RecurrentCore",
    "RecurrentStreams",
    "build_recurrent_core",
    "episode_starts",
]

#: The recurrent cores by config name (``policy.recurrent``).
RECURRENT_CORES = ("lstm", "gru")

State = Dict[str, torch.Tensor]


class RecurrentCore(nn.Module):
    """A one-layer LSTM or GRU over encoder features, with episode-start resets.

    Weights are orthogonal (gain 1), biases zero (as CleanRL's recurrent PPO initialises its LSTM).

    Args:
        kind: ``"lstm"`` or ``"gru"``.
        in_dim: Width of the encoder features.
        hidden_size: Width of the state and of the output.

    Raises:
        ValueError: an unknown ``kind`` (the valid ones named) or a size below 1.
    """

    def __init__(self, kind: str, in_dim: int, hidden_size: int) -> None:
        super().__init__()
        if kind not in RECURRENT_CORES:
            raise ValueError(f"unknown recurrent core {kind!r}; valid: {', '.join(map(repr, RECURRENT_CORES))}")
        for name, value in (("in_dim", in_dim), ("hidden_size", hidden_size)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"recurrent core {name} must be an int >= 1, got {value!r}")
        self.kind = kind
        self.in_dim = int(in_dim)
        self.dim = int(hidden_size)
        rnn_cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = rnn_cls(self.in_dim, self.dim, batch_first=True)
        for name, param in self.rnn.named_parameters():
            if "bias" in name:
                nn.init.zeros_(param)
            else:
                nn.init.orthogonal_(param, 1.0)

    @property
    def state_keys(self) -> Tuple[str, ...]:
        """Names of the state tensors (record keys): ``recurrent_h`` (and ``recurrent_c`` for an LSTM)."""
        return ("recurrent_h", "recurrent_c") if self.kind == "lstm" else ("recurrent_h",)

    def initial_state(self, batch: int, device: Any = None) -> State:
        """Zero state for ``batch`` rows."""
        device = device if device is not None else next(self.parameters()).device
        return {k: torch.zeros(batch, self.dim, device=device) for k in self.state_keys}

    def _pack(self, state: State) -> Any:
        h = state["recurrent_h"].unsqueeze(0).contiguous()
        if self.kind == "lstm":
            return h, state["recurrent_c"].unsqueeze(0).contiguous()
        return h

    def _unpack(self, hidden: Any) -> State:
        if self.kind == "lstm":
            return {"recurrent_h": hidden[0].squeeze(0), "recurrent_c": hidden[1].squeeze(0)}
        return {"recurrent_h": hidden.squeeze(0)}

    def check_state(self, state: State, batch: int) -> None:
        """Raise unless ``state`` holds every state key as a ``[batch, dim]`` tensor.

        Raises:
            KeyError: a state key is missing (the expected ones named).
            ValueError: a tensor of another shape.
        """
        missing = [k for k in self.state_keys if k not in state]
        if missing:
            raise KeyError(f"{self.kind} state is missing {missing}; it has {sorted(state)} (needs {self.state_keys})")
        for k in self.state_keys:
            if tuple(state[k].shape) != (batch, self.dim):
                raise ValueError(
                    f"{self.kind} state {k!r} has shape {tuple(state[k].shape)}, expected {(batch, self.dim)}"
                )

    @staticmethod
    def _reset(state: State, is_init: Optional[torch.Tensor]) -> State:
        if is_init is None:
            return state
        keep = (~is_init.bool()).to(next(iter(state.values())).dtype).unsqueeze(-1)
        return {k: v * keep for k, v in state.items()}

    def step(self, x: torch.Tensor, state: State, is_init: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, State]:
        """One step: features ``[B, in_dim]`` and the state before it -> output ``[B, dim]`` and the state after.

        Rows with ``is_init`` True start from a zero state.
        """
        self.check_state(state, x.shape[0])
        state = self._reset(state, is_init)
        out, hidden = self.rnn(x.unsqueeze(1), self._pack(state))
        return out.squeeze(1), self._unpack(hidden)

    def unroll(self, x: torch.Tensor, state: State, is_init: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Sequences ``[B, L, in_dim]`` from their first step's state ``[B, dim]`` -> outputs ``[B, L, dim]``.

        ``is_init`` ``[B, L]``: the state is set to zero before each marked step. When no step after the
        first is marked, the whole sequence runs in one call of the torch RNN; else step by step.
        """
        if x.dim() != 3:
            raise ValueError(f"unroll takes features [B, L, in_dim], got shape {tuple(x.shape)}")
        b, length = x.shape[0], x.shape[1]
        self.check_state(state, b)
        if is_init is not None and tuple(is_init.shape) != (b, length):
            raise ValueError(f"unroll: is_init has shape {tuple(is_init.shape)}, expected {(b, length)}")
        first = None if is_init is None else is_init[:, 0]
        state = self._reset(state, first)
        if is_init is None or length < 2 or not bool(is_init[:, 1:].any()):
            out, _ = self.rnn(x, self._pack(state))
            return out
        outs: List[torch.Tensor] = []
        hidden = self._pack(state)
        for t in range(length):
            if t:
                hidden = self._pack(self._reset(self._unpack(hidden), is_init[:, t]))
            out, hidden = self.rnn(x[:, t : t + 1], hidden)
            outs.append(out)
        return torch.cat(outs, dim=1)

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, in_dim={self.in_dim}, hidden_size={self.dim}"


class ActorCriticCores(nn.Module):
    """Two cores of one kind, one for the actor and one for the critic (sb3-contrib's RecurrentPPO default).

    The value loss then shapes only the critic's core: with a shared core its gradient, large next to the
    policy gradient when returns are large, would dominate the clipped update. The state keys are those of
    one core, each tensor ``[B, 2 * hidden]``: the actor's state, then the critic's. ``step`` and ``unroll``
    return ``(actor_out, critic_out)``.

    Args:
        kind: ``"lstm"`` or ``"gru"``.
        in_dim: Width of the encoder features.
        hidden_size: Width of each core's state and output.
    """

    def __init__(self, kind: str, in_dim: int, hidden_size: int) -> None:
        super().__init__()
        self.actor = RecurrentCore(kind, in_dim, hidden_size)
        self.critic = RecurrentCore(kind, in_dim, hidden_size)
        self.kind = kind
        self.dim = self.actor.dim
        self.state_dim = 2 * self.dim

    @property
    def state_keys(self) -> Tuple[str, ...]:
        """Names of the state tensors (as for one core)."""
        return self.actor.state_keys

    def initial_state(self, batch: int, device: Any = None) -> State:
        """Zero state for ``batch`` rows (``[batch, 2 * hidden]`` per key)."""
        device = device if device is not None else next(self.parameters()).device
        return {k: torch.zeros(batch, self.state_dim, device=device) for k in self.state_keys}

    def _split(self, state: State) -> Tuple[State, State]:
        missing = [k for k in self.state_keys if k not in state]
        if missing:
            raise KeyError(f"{self.kind} state is missing {missing}; it has {sorted(state)} (needs {self.state_keys})")
        d = self.dim
        return {k: v[:, :d] for k, v in state.items()}, {k: v[:, d:] for k, v in state.items()}

    def step(self, x: torch.Tensor, state: State, is_init: Optional[torch.Tensor] = None):
        """One step of both cores: ``((actor_out, critic_out), state_after)``."""
        pi_state, vf_state = self._split(state)
        y_pi, pi_new = self.actor.step(x, pi_state, is_init)
        y_vf, vf_new = self.critic.step(x, vf_state, is_init)
        return (y_pi, y_vf), {k: torch.cat([pi_new[k], vf_new[k]], -1) for k in self.state_keys}

    def unroll(self, x: torch.Tensor, state: State, is_init: Optional[torch.Tensor] = None):
        """Sequences through both cores: ``(actor_out, critic_out)``, each ``[B, L, hidden]``."""
        pi_state, vf_state = self._split(state)
        return self.actor.unroll(x, pi_state, is_init), self.critic.unroll(x, vf_state, is_init)


def build_recurrent_core(kind: str, in_dim: int, hidden_size: int = 128, shared: bool = True) -> nn.Module:
    """The `RecurrentCore` named ``kind`` (``lstm`` or ``gru``) over ``in_dim`` features.

    Args:
        kind: ``"lstm"`` or ``"gru"``.
        in_dim: Width of the encoder features.
        hidden_size: Width of the state.
        shared: One core (True) or `ActorCriticCores`, one core each for actor and critic.

    Raises:
        ValueError: an unknown ``kind`` (the valid names listed) or a bad size.
    """
    return RecurrentCore(kind, in_dim, hidden_size) if shared else ActorCriticCores(kind, in_dim, hidden_size)


def episode_starts(env_ret: Any, previous_done: Optional[np.ndarray]) -> np.ndarray:
    """Rows ``[N]`` of an `EnvRet` whose observation is the first of an episode.

    The env contract's ``info["episode_length"]`` is 0 exactly there (after a reset and on the NEXT_STEP
    autoreset step). Without it, a row starts an episode when it was done on the previous EnvRet
    (``previous_done``), and every row does when there is none.
    """
    n = np.shape(env_ret.last_terminated)[0] if np.ndim(env_ret.last_terminated) else 1
    info = env_ret.info if isinstance(env_ret.info, dict) else {}
    length = info.get("episode_length")
    if length is not None and np.shape(length) == (n,):
        return np.asarray(length).reshape(n) == 0
    if previous_done is None or previous_done.shape != (n,):
        return np.ones(n, dtype=bool)
    return previous_done.copy()


@dataclass
class _Stream:
    ts: Any  # the EnvRet this stream last acted on (its ts_env_sent_ns)
    init: np.ndarray  # its episode starts
    before: State  # the state it acted from (zero on the starts)
    after: State  # the state after that step
    done: np.ndarray  # its done flags


class RecurrentStreams:
    """The acting state of a recurrent policy, per env worker and acting mode.

    ``begin(env_rets)`` gives the state before the step for the concatenated rows of the EnvRets (zero on
    episode starts) and the ``is_init`` flags; ``commit(new_state)`` keeps the state after it. The calls of
    one thread pair up (a thread-local holds what ``begin`` computed).

    Args:
        core: The core whose state is kept.
    """

    def __init__(self, core: RecurrentCore) -> None:
        self.core = core
        self._streams: Dict[Tuple[Any, bool], _Stream] = {}
        self._local = threading.local()

    def clear(self) -> None:
        """Forget every stream (the next step of each starts from a zero state)."""
        self._streams.clear()

    def __len__(self) -> int:
        return len(self._streams)

    def begin(self, env_rets: Sequence[Any], deterministic: bool, device: Any) -> Tuple[State, torch.Tensor]:
        """The state before this step ``[B, dim]`` and ``is_init`` ``[B]`` for the rows of ``env_rets``."""
        keys = self.core.state_keys
        parts: Dict[str, List[torch.Tensor]] = {k: [] for k in keys}
        inits: List[np.ndarray] = []
        pending = []
        for env_ret in env_rets:
            sid = (env_ret.env_id, bool(deterministic))
            stream = self._streams.get(sid)
            done = np.asarray(np.logical_or(env_ret.last_terminated, env_ret.last_truncated), dtype=bool).reshape(-1)
            n = done.shape[0]
            ts = getattr(env_ret, "ts_env_sent_ns", None)
            if stream is None or stream.done.shape != (n,):
                init = np.ones(n, dtype=bool)
                before = self.core.initial_state(n, device)
            elif ts is not None and ts == stream.ts:  # the same EnvRet asked again: act from the same state
                init, before = stream.init, stream.before
            else:
                init = episode_starts(env_ret, stream.done)
                keep = torch.as_tensor(~init, device=device).to(torch.float32).unsqueeze(-1)
                before = {k: v.to(device) * keep for k, v in stream.after.items()}
            for k in keys:
                parts[k].append(before[k])
            inits.append(init)
            pending.append((sid, _Stream(ts, init, before, before, done), n))
        state = {k: v[0] if len(v) == 1 else torch.cat(v, 0) for k, v in parts.items()}
        is_init = torch.as_tensor(inits[0] if len(inits) == 1 else np.concatenate(inits), device=device)
        self._local.pending = pending
        self._local.current = (state, is_init)
        return state, is_init

    def current(self) -> Optional[Tuple[State, torch.Tensor]]:
        """What this thread's last ``begin`` returned, until its ``commit`` or ``abandon`` (else None)."""
        return getattr(self._local, "current", None)

    def commit(self, new_state: State) -> None:
        """Keep the state after the step begun by this thread's last ``begin``."""
        pending = getattr(self._local, "pending", None)
        self._local.pending = self._local.current = None
        if pending is None:
            return
        start = 0
        for sid, stream, n in pending:
            stream.after = {k: v[start : start + n].detach() for k, v in new_state.items()}
            start += n
            self._streams[sid] = stream

    def abandon(self) -> None:
        """Drop what this thread's ``begin`` computed (the step failed): the streams stay as they were."""
        self._local.pending = self._local.current = None
