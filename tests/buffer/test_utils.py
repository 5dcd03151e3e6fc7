import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning.buffer.utils.utils import (
    default_env_ret_preprocess_fn,
    default_policy_resp_preprocess_fn,
    default_postprocess_fn,
    default_preprocess_fn,
    gae,
    make_gae_postprocess_fn,
)
from rlightning.types import EnvRet, PolicyResponse


def reference_gae(r, v, term, boot, gamma, lam):
    adv = np.zeros(len(r))
    last = 0.0
    for t in reversed(range(len(r))):
        nv = boot if t == len(r) - 1 else v[t + 1]
        nonterm = 1.0 - term[t]
        delta = r[t] + gamma * nv * nonterm - v[t]
        last = delta + gamma * lam * nonterm * last
        adv[t] = last
    return adv


def test_default_pipeline_builds_step_dict():
    ret = EnvRet("e", np.zeros((2, 3), np.float32), last_reward=1.0, last_terminated=np.array([True, False]))
    resp = PolicyResponse("e", action=torch.tensor([1, 0]), value=np.zeros(2, np.float32), note="x", weight_version=3)
    step = default_preprocess_fn(ret, resp)
    assert sorted(step) == ["action", "obs", "reward", "terminated", "truncated", "value"]
    assert step["reward"].tolist() == [1.0, 1.0] and step["reward"].dtype == np.float32
    assert step["terminated"].tolist() == [True, False] and isinstance(step["action"], np.ndarray)
    env_half = default_env_ret_preprocess_fn(ret, obs_preprocessor=lambda o: o + 1, reward_preprocessor=None)
    assert env_half["obs"].min() == 1
    with pytest.raises(ValueError, match=r"env 'e': last_reward has 3 entries, expected one per sub-environment \(2\)"):
        default_env_ret_preprocess_fn(EnvRet("e", np.zeros((2, 3)), last_reward=np.zeros(3)))
    with pytest.raises(KeyError, match=r"PolicyResponse for env 'e' has no 'action'"):
        default_policy_resp_preprocess_fn(PolicyResponse("e", value=1.0))
    with pytest.raises(ValueError, match=r"PolicyResponse keys \['reward'\] clash with the env keys"):
        default_preprocess_fn(ret, PolicyResponse("e", action=np.zeros(2), reward=np.zeros(2)))
    with pytest.raises(ValueError, match=r"PolicyResponse for env 'x' cannot be paired with the EnvRet of env 'e'"):
        default_preprocess_fn(ret, PolicyResponse("x", action=np.zeros(2)))


def test_gae_matches_reference():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=20), rng.normal(size=20)
    for term_last in (0.0, 1.0):
        term = np.zeros(20)
        term[-1] = term_last
        assert np.allclose(gae(r, v, term, 0.7, 0.99, 0.95), reference_gae(r, v, term, 0.7, 0.99, 0.95), atol=1e-5)


def test_gae_postprocess_single_and_batched_agree():
    fn = make_gae_postprocess_fn(0.9, 0.8)
    rng = np.random.default_rng(1)
    lengths = [3, 1, 5]
    eps = []
    for i, n in enumerate(lengths):
        term = torch.zeros(n, dtype=torch.bool)
        term[-1] = i == 1
        eps.append(
            TensorDict(
                {
                    "reward": torch.tensor(rng.normal(size=n), dtype=torch.float32),
                    "value": torch.tensor(rng.normal(size=n), dtype=torch.float32),
                    "terminated": term,
                },
                batch_size=[n],
            )
        )
    boot = torch.tensor([0.5, 9.0, -1.0])
    single = torch.cat([fn(e.clone(), bootstrap_value=boot[i]) for i, e in enumerate(eps)])
    batched = fn.batched(torch.cat(eps), torch.tensor(lengths), boot)
    assert torch.allclose(single["advantage"], batched["advantage"], atol=1e-5)
    assert torch.allclose(batched["return"], batched["advantage"] + batched["value"])
    # The terminated episode ignores its bootstrap value.
    assert torch.allclose(single["advantage"][3], single["reward"][3] - single["value"][3])
    with pytest.raises(KeyError, match=r"GAE needs a 'value' key"):
        fn(TensorDict({"reward": torch.zeros(2), "terminated": torch.zeros(2, dtype=torch.bool)}, [2]))
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\], got 1.5"):
        make_gae_postprocess_fn(1.5, 0.9)
    td = TensorDict({"x": torch.zeros(1)}, [1])
    assert default_postprocess_fn(td) is td
