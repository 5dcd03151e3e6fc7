"""Storage tensors on a CUDA device (skipped where there is none)."""

import pytest
import torch

from rlightning.buffer.utils import Storage
from rlightning.buffer.utils.utils import make_gae_postprocess_fn
from tests.support.buffer_fakes import FakeVecEnv, check_transitions, rollout

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.mark.parametrize("unit", ["transition", "episode"])
def test_cuda_storage_writes_and_samples_on_device(unit):
    env = FakeVecEnv(num_envs=4, lengths=[2, 3, 4, 5])
    st = Storage(200, "circular", unit, [env.meta], "cuda", postprocess_fn=make_gae_postprocess_fn(0.99, 0.95), seed=0)
    rollout(st, env, 30)
    batch = st.sample(8)
    assert all(v.is_cuda for v in batch.values())
    check_transitions(st.get_data().cpu(), env.lengths)
    prio = Storage(100, device="cuda", sampler="prioritized", seed=0)
    rollout(prio, FakeVecEnv(num_envs=2), 10)
    b = prio.sample(4)
    prio.update_priorities(b["_index"], torch.ones(4, device="cuda"))
    assert b["_weight"].is_cuda


def test_cuda_on_policy_sample_is_a_copy_on_device():
    env = FakeVecEnv(num_envs=4, lengths=[2, 3, 4, 5])
    st = Storage(200, env_meta_list=[env.meta], device="cuda", sampler="all", seed=0)
    rollout(st, env, 30)
    (batch,) = st.sample_parts(1, None, clear_after=True)
    ring = st.store.ring.data["obs"]
    assert batch["obs"].is_cuda and batch["obs"].untyped_storage().data_ptr() != ring.untyped_storage().data_ptr()
    assert st.size == 0 and len(batch) > 0
