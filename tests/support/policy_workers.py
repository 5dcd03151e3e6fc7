"""Small policies the policy tests launch locally and as Ray actors (importable by Ray workers)."""

from __future__ import annotations

import asyncio
import threading
from typing import Dict

import numpy as np
import torch
from torch import nn

from rlightning.policy.base_policy import BasePolicy
from rlightning.types import EnvMeta, EnvRet, PolicyResponse
from rlightning.utils.registry import POLICIES


@POLICIES.register("test_echo", override=True)
class EchoPolicy(BasePolicy):
    """Answers every row with its worker index; one tiny linear layer so it has weights.

    ``close_gate()`` makes the next forward passes wait until ``open_gate()``
    (needs an actor with max_concurrency > 1), so a test can hold a worker busy.
    """

    def construct_network(self, env_meta: EnvMeta) -> None:
        self.env_meta = env_meta
        self.net = self.register_module("net", nn.Linear(int(np.prod(env_meta.observation_space.shape)), 1))
        self.forward_calls = 0
        self._gate = threading.Event()
        self._gate.set()

    def compute_actions(self, obs: np.ndarray, deterministic: bool = False) -> Dict[str, np.ndarray]:
        self._gate.wait(timeout=60)
        self.forward_calls += 1
        n = obs.shape[0]
        with torch.no_grad():
            value = self.net(torch.as_tensor(obs).reshape(n, -1).float()).squeeze(-1).numpy()
        return {
            "action": np.full(n, self.worker_index, dtype=np.int64),
            "value": value.astype(np.float32),
            "deterministic": np.full(n, deterministic),
        }

    def close_gate(self) -> None:
        self._gate.clear()

    def open_gate(self) -> None:
        self._gate.set()

    def get_forward_calls(self) -> int:
        return self.forward_calls

    def train(self) -> Dict[str, float]:
        with torch.no_grad():
            for p in self.net.parameters():
                p.add_(1.0)
        self.update_count += 1
        self.train_calls += 1
        return {"loss": float(self.worker_index)}


@POLICIES.register("test_async_echo", override=True)
class AsyncEchoPolicy(BasePolicy):
    """Implements ``async def rollout_step`` instead of ``compute_actions``."""

    def construct_network(self, env_meta: EnvMeta) -> None:
        self.env_meta = env_meta
        self.register_module("net", nn.Linear(1, 1))

    async def rollout_step(self, env_ret: EnvRet) -> PolicyResponse:
        await asyncio.sleep(0)
        n = np.asarray(env_ret.observation).shape[0]
        resp = PolicyResponse(
            env_id=env_ret.env_id,
            action=np.zeros(n, dtype=np.int64),
            weight_version=self.weight_version,
            ts_env_sent_ns=env_ret.ts_env_sent_ns,
        )
        return resp.mark_policy_sent()

    def train(self) -> Dict[str, float]:
        return {}


@POLICIES.register("test_plain_step", override=True)
class PlainStepPolicy(BasePolicy):
    """A ``train()`` written the way a newcomer writes it (notebook 04's shape): ``loss.backward()`` and
    ``optimizer.step()`` by hand, never `apply_gradients` nor `allreduce_gradients`."""

    def construct_network(self, env_meta: EnvMeta) -> None:
        self.env_meta = env_meta
        self.net = self.register_module("net", nn.Linear(int(np.prod(env_meta.observation_space.shape)), 2))

    def compute_actions(self, obs: np.ndarray, deterministic: bool = False) -> Dict[str, np.ndarray]:
        with torch.no_grad():
            logits = self.net(torch.as_tensor(obs).float())
        return {"action": logits.argmax(-1).numpy().astype(np.int64)}

    def update_dataset(self, data) -> None:
        self.dataset = data

    def train(self) -> Dict[str, float]:
        opt = self.optimizers["main"]
        obs, target = self.dataset["obs"].float(), self.dataset["return"].float()
        loss = ((self.net(obs)[:, 0] - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        self.update_count += 1
        self.train_calls += 1
        return {"loss": float(loss)}
