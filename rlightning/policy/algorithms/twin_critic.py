"""What TD3 and SAC share: twin Q critics with Polyak-averaged targets, and their replay batches.

    build_twin_critics(policy, encoder_dim, act_dim)     # qf (both critics, batched) and its frozen copy qf_target
    ds = replay_dataset(policy, data, "td3")             # obs, action, reward, next_obs, terminated
    next_q = min_target_q(policy.modules, next_x, next_action)
    loss, q1 = twin_critic_loss(policy.modules, x, action, target)
    polyak_update(pairs, tau)                            # pairs = polyak_pairs(policy.modules, ("qf",))

The two critics are one `TwinQNetwork`: their weights stacked ``[2, in, out]`` and evaluated together, one
batched matrix product per layer (forward and backward), so an update runs half the kernels of two separate
MLPs. Checkpoints written when they were two modules (``qf1``, ``qf2`` and their targets) are converted on
load (`upgrade_twin_critic_checkpoint`).

Pure torch over a policy's registered modules; never imports Ray.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.nn import functional as F

from rlightning.policy.algorithms.networks import mlp
from rlightning.policy.networks import nest_dotted_keys

__all__ = [
    "REPLAY_KEYS",
    "TwinQNetwork",
    "build_twin_critics",
    "critic_parameters",
    "min_target_q",
    "polyak_pairs",
    "polyak_update",
    "replay_dataset",
    "twin_critic_loss",
    "upgrade_twin_critic_checkpoint",
]

#: Keys a replay batch of TD3 or SAC needs.
REPLAY_KEYS = ("obs", "action", "reward", "next_obs", "terminated")

#: Activation functions of `TwinQNetwork` by name (the names of ``networks.ACTIVATIONS``). Tanh and ReLU act in
#: place on each layer's fresh ``baddbmm`` output (their backward reads their result, and ``baddbmm``'s does not
#: read its output): no second buffer per layer, which for CQL's 7,680 sampled actions per batch is 4 MB each.
_ACT_FNS = {"tanh": torch.tanh_, "relu": torch.relu_, "elu": F.elu, "gelu": F.gelu}


class TwinQNetwork(nn.Module):
    """Two Q(s, a) MLPs over ``[x, action]``, evaluated together: ``forward`` returns ``[2, B]``.

    Layer ``i`` holds ``weight{i}`` ``[2, in, out]`` (critic ``c``'s ``nn.Linear`` weight transposed at
    ``[c]``) and ``bias{i}`` ``[2, 1, out]``. Each critic is initialised as an `mlp` of its own (orthogonal,
    hidden gain sqrt(2), output gain 1, zero biases), so the pair is distributed as two separate critics.
    Every layer is one ``baddbmm``. (For the width-1 output layer a multiply and a row sum is as fast forward at
    a batch of 256 and 64 units, but its backward is not: forward and backward at 7,680 rows, CQL's sampled
    actions, took 1.76 ms against 1.22 ms, and at 256 units 11.6 ms against 5.8 ms, one CPU thread.)

    Args:
        in_dim: Width of the encoded observation.
        act_dim: Action dimensions.
        hidden: Hidden layer widths.
        activation: A key of ``networks.ACTIVATIONS``.
    """

    def __init__(self, in_dim: int, act_dim: int, hidden: Sequence[int], activation: str) -> None:
        super().__init__()
        if activation not in _ACT_FNS:
            raise ValueError(f"TwinQNetwork: unknown activation {activation!r}; choose from {sorted(_ACT_FNS)}")
        self.activation = activation
        self._act = _ACT_FNS[activation]
        nets = [mlp(in_dim + act_dim, hidden, 1, activation, out_gain=1.0) for _ in range(2)]
        linears = [[m for m in net if isinstance(m, nn.Linear)] for net in nets]
        self.num_layers = len(linears[0])
        for i in range(self.num_layers):
            pair = [linears[0][i], linears[1][i]]
            weight = torch.stack([lin.weight.detach().t() for lin in pair])  # [2, in, out]
            bias = torch.stack([lin.bias.detach() for lin in pair]).unsqueeze(1)  # [2, 1, out]
            self.register_parameter(f"weight{i}", nn.Parameter(weight.contiguous()))
            self.register_parameter(f"bias{i}", nn.Parameter(bias.contiguous()))

    def layers(self, detach: bool = False, critics: Optional[slice] = None) -> List[Tuple[torch.Tensor, torch.Tensor]]:
        """``(weight, bias)`` per layer; ``detach``: cut from autograd; ``critics``: a slice of the two."""
        params = self._parameters
        out = []
        for i in range(self.num_layers):
            w, b = params[f"weight{i}"], params[f"bias{i}"]
            if detach:
                w, b = w.detach(), b.detach()
            if critics is not None:
                w, b = w[critics], b[critics]
            out.append((w, b))
        return out

    def forward(
        self, x: torch.Tensor, action: torch.Tensor, detach_params: bool = False, critics: Optional[slice] = None
    ) -> torch.Tensor:
        """Q-values ``[C, B]`` of ``x`` ``[B, in_dim]`` and ``action`` ``[B, act_dim]`` (C: 2, or the slice's).

        Args:
            detach_params: Gradients reach the inputs only, not the weights (the actor's loss: the critics'
                weight gradients it would compute are never used).
            critics: Evaluate only these critics (``slice(0, 1)``: the first).
        """
        layers = self.layers(detach_params, critics)
        h = torch.cat([x, action], dim=-1)
        c = layers[0][0].shape[0]
        h = h.unsqueeze(0).expand(c, *h.shape)
        for w, b in layers[:-1]:
            h = self._act(torch.baddbmm(b, h, w))
        w, b = layers[-1]
        return torch.baddbmm(b, h, w).squeeze(-1)  # [C, B]

    def critic_state_dict(self, index: int) -> Dict[str, torch.Tensor]:
        """Critic ``index``'s weights in the layout of a separate `mlp` Q network (``net.<k>.weight|bias``)."""
        out = {}
        for i, (w, b) in enumerate(self.layers(detach=True)):
            out[f"net.{2 * i}.weight"] = w[index].t().clone()
            out[f"net.{2 * i}.bias"] = b[index, 0].clone()
        return out


def build_twin_critics(policy: Any, in_dim: int, act_dim: int) -> None:
    """Register ``qf`` (both critics, a `TwinQNetwork`) and its frozen target copy ``qf_target`` on ``policy``."""
    cfg = policy.config
    q = policy.register_module("qf", TwinQNetwork(in_dim, act_dim, cfg.hidden_sizes, cfg.activation))
    target = policy.register_module("qf_target", TwinQNetwork(in_dim, act_dim, cfg.hidden_sizes, cfg.activation))
    target.load_state_dict(q.state_dict())
    target.requires_grad_(False)


def critic_parameters(modules: Mapping[str, nn.Module], encoder: Optional[nn.Module] = None) -> List[nn.Parameter]:
    """The parameters of both critics and the encoder's trainable ones (one optimizer steps them together).

    A CNN encoder learns from the critic loss only; the actor reads its features detached (as SAC-AE and
    DrQ do). A vector encoder has no trainable parameters.
    """
    params = list(modules["qf"].parameters())
    if encoder is not None:
        params += [p for p in encoder.parameters() if p.requires_grad]
    return params


def replay_dataset(policy: Any, data: Any, name: str) -> Dict[str, torch.Tensor]:
    """A sampled replay batch as flat tensors on the policy's device (``action`` ``[n, act_dim]``, floats).

    Args:
        policy: The policy (its ``env_meta``, ``device`` and ``act_dim``).
        data: A TensorDict ``[n]`` (or ``[..., n]``, flattened) with `REPLAY_KEYS`.
        name: The algorithm's name, for error messages.

    Raises:
        TypeError: ``data`` is not a TensorDict.
        RuntimeError: the policy has no network yet.
        KeyError: required keys are missing (listed with the keys present).
        ValueError: an empty batch.
    """
    from tensordict import TensorDictBase  # here, not at import: env workers acting with a copy never need it

    if not isinstance(data, TensorDictBase):
        raise TypeError(f"{name}.update_dataset needs a TensorDict, got {type(data).__name__}")
    if policy.env_meta is None:
        raise RuntimeError(f"{name}.update_dataset called before construct_network(env_meta)")
    data = nest_dotted_keys(data)  # dict observations are sampled as "obs.<key>" columns
    missing = [k for k in REPLAY_KEYS if k not in data.keys()]
    if missing:
        raise KeyError(f"{name}.update_dataset: missing keys {missing}; got {sorted(data.keys())}")
    flat = data.reshape(-1) if len(data.batch_size) > 1 else data
    n = int(flat.batch_size.numel())
    if n == 0:
        raise ValueError(f"{name}.update_dataset got an empty batch")
    ds = {k: flat.get(k).to(policy.device) for k in REPLAY_KEYS}
    ds["action"] = ds["action"].reshape(n, policy.act_dim).float()
    ds["reward"] = ds["reward"].reshape(n).float()
    ds["terminated"] = ds["terminated"].reshape(n).float()
    return ds


def min_target_q(modules: Mapping[str, nn.Module], next_x: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
    """``min(Q1'(s', a'), Q2'(s', a'))`` of the target critics (the clipped double-Q estimate)."""
    return modules["qf_target"](next_x, next_action).amin(0)


def twin_critic_loss(
    modules: Mapping[str, nn.Module], x: torch.Tensor, action: torch.Tensor, target: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``MSE(Q1(s, a), y) + MSE(Q2(s, a), y)`` and ``Q1(s, a)``."""
    q = modules["qf"](x, action)  # [2, B]
    return 2.0 * F.mse_loss(q, target.expand_as(q)), q[0]


PolyakPairs = Tuple[List[torch.Tensor], List[torch.Tensor]]


def polyak_pairs(modules: Mapping[str, nn.Module], names: Sequence[str]) -> PolyakPairs:
    """(target tensors, online tensors) of each ``name`` and its ``name_target``, for `polyak_update`."""
    targets, online = [], []
    for name in names:
        pairs = list(zip(modules[f"{name}_target"].parameters(), modules[name].parameters()))
        targets += [t for t, _ in pairs]
        online += [p for _, p in pairs]
    return targets, online


@torch.no_grad()
def polyak_update(pairs: PolyakPairs, tau: float) -> None:
    """``target <- (1 - tau) target + tau online`` over every pair of `polyak_pairs` in one foreach call."""
    targets, online = pairs
    if targets:
        torch._foreach_lerp_(targets, online, tau)


# ------------------------------------------------------------------ checkpoints of the two-module layout

_OLD_CRITICS = ("qf1", "qf2")


def _stack_old(t1: torch.Tensor, t2: torch.Tensor, key: str) -> torch.Tensor:
    """Two per-critic ``nn.Linear`` tensors (``[out, in]`` weights, ``[out]`` biases) -> the stacked layout."""
    if key.endswith("weight"):
        return torch.stack([t1.t(), t2.t()]).contiguous()
    return torch.stack([t1, t2]).unsqueeze(1).contiguous()


def _old_layer_keys(saved: Mapping[str, torch.Tensor]) -> List[str]:
    """``net.<k>.weight``, ``net.<k>.bias`` of an old Q network, in layer order."""
    idx = sorted({int(k.split(".")[1]) for k in saved if k.startswith("net.")})
    return [f"net.{k}.{what}" for k in idx for what in ("weight", "bias")]


def upgrade_twin_critic_checkpoint(state: Dict[str, Any], policy_name: str) -> Dict[str, Any]:
    """A checkpoint with two critic modules (``qf1``, ``qf2``, ``qf1_target``, ``qf2_target``, written before
    the critics were batched) in the `TwinQNetwork` layout: ``qf`` and ``qf_target``, and the ``critic``
    optimizer's state (per-parameter moments) stacked the same way. Any other checkpoint is returned as it is.

    Raises:
        ValueError: the old critic modules are there but do not fit together (their keys or shapes differ).
    """
    modules = state.get("modules") if isinstance(state, dict) else None
    if not isinstance(modules, dict) or "qf1" not in modules or "qf" in modules:
        return state
    needed = ["qf1", "qf2", "qf1_target", "qf2_target"]
    if any(name not in modules for name in needed):
        raise ValueError(
            f"{policy_name} checkpoint from an older rlightning (separate critics 'qf1', 'qf2') lacks "
            f"{[n for n in needed if n not in modules]}: it cannot be converted to the batched critics"
        )
    new_modules = {k: v for k, v in modules.items() if k not in needed}
    for new, (a, b) in (("qf", ("qf1", "qf2")), ("qf_target", ("qf1_target", "qf2_target"))):
        keys = _old_layer_keys(modules[a])
        if set(keys) != set(modules[a]) or set(modules[a]) != set(modules[b]):
            raise ValueError(
                f"{policy_name} checkpoint from an older rlightning: critics {a!r} and {b!r} do not have the same "
                f"layers ({sorted(modules[a])} against {sorted(modules[b])}); it cannot be converted"
            )
        converted = {}
        for j, key in enumerate(keys):
            layer, what = j // 2, ("weight" if key.endswith("weight") else "bias")
            converted[f"{what}{layer}"] = _stack_old(modules[a][key], modules[b][key], key)
        new_modules[new] = converted
    out = dict(state, modules=new_modules)
    optimizers = state.get("optimizers")
    if isinstance(optimizers, dict) and "critic" in optimizers:
        keys = _old_layer_keys(modules["qf1"])
        out["optimizers"] = dict(optimizers, critic=_upgrade_critic_optimizer(optimizers["critic"], keys))
    return out


def _upgrade_critic_optimizer(opt_state: Dict[str, Any], keys: List[str]) -> Dict[str, Any]:
    """An optimizer over [qf1 params, qf2 params, encoder params] -> one over [qf params, encoder params]."""
    n = len(keys)
    old_state = opt_state.get("state", {})
    groups = opt_state.get("param_groups", [])
    if len(groups) != 1:
        raise ValueError(f"critic optimizer state with {len(groups)} parameter groups; expected 1")
    old_ids = list(groups[0]["params"])
    if len(old_ids) < 2 * n:
        raise ValueError(f"critic optimizer state over {len(old_ids)} parameters; the two critics alone have {2 * n}")
    new_state: Dict[int, Any] = {}
    for j in range(n):
        s1, s2 = old_state.get(old_ids[j]), old_state.get(old_ids[n + j])
        if s1 is None or s2 is None:
            continue  # not stepped yet
        entry = {}
        for name, v1 in s1.items():
            v2 = s2[name]
            if isinstance(v1, torch.Tensor) and v1.dim() > 0:
                entry[name] = _stack_old(v1, v2, keys[j])
            else:
                entry[name] = v1  # the step count: the same for both critics
        new_state[j] = entry
    for j, pid in enumerate(old_ids[2 * n :]):
        if pid in old_state:
            new_state[n + j] = old_state[pid]
    group = dict(groups[0], params=list(range(n + len(old_ids) - 2 * n)))
    return {"state": new_state, "param_groups": [group]}
