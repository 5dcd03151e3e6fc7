import torch

from rlightning.buffer import ReplayBuffer, RolloutBuffer
from rlightning.utils.config import BufferConfig
from rlightning.utils.registry import BUFFERS


def test_registered_names():
    assert BUFFERS.get("replay") is ReplayBuffer and BUFFERS.get("rollout") is RolloutBuffer
    assert RolloutBuffer.clear_after_sample and not ReplayBuffer.clear_after_sample


def test_replay_keeps_data_after_sampling():
    buf = ReplayBuffer(config=BufferConfig(capacity=50, seed=0))
    buf.init([])
    buf.add_episode({"obs": torch.zeros(6, 1, 2), "action": torch.zeros(5, 1), "reward": torch.ones(5, 1)})
    assert buf.sample(4)[0].batch_size[0] == 4
    assert buf.get_size() == 5
