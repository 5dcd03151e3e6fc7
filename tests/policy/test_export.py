"""ONNX (run with onnxruntime) and TorchScript exports give `predict`'s deterministic actions; the CLI writes them."""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort
import pytest
import torch
from gymnasium import spaces

from rlightning.cli import main
from rlightning.policy.export import EXPORT_FORMATS, check_format
from rlightning.policy.standalone import load_policy
from rlightning.utils.config import apply_overrides, load_preset
from tests.policy.test_standalone import BOX, IMAGE, make_policy, sample_batch

ROWS = 16  # the export traces with 2 rows: another batch size checks the dynamic batch dimension

CASES = {
    "discrete_masked": ("ppo", BOX, spaces.Discrete(5, start=2), {}, True),
    "continuous": ("ppo", BOX, spaces.Box(-0.5, 0.5, (2,), np.float32), {"norm_obs": True}, False),
    "continuous_sac": ("sac", BOX, spaces.Box(-2.0, 2.0, (3,), np.float32), {}, False),
    "cnn_pixels": ("ppo", IMAGE, spaces.Discrete(4), {"hidden_sizes": [32]}, False),
    "dict_obs_dqn": (  # with the env's own mask as an observation key
        "dqn",
        spaces.Dict({"pos": BOX, "mode": spaces.Discrete(3), "action_mask": spaces.MultiBinary(3)}),
        spaces.Discrete(3),
        {},
        False,
    ),
    "recurrent_lstm": ("ppo", BOX, spaces.MultiDiscrete([2, 3]), {"recurrent": "lstm", "recurrent_size": 8}, False),
}


def run_export(path, fmt: str, feeds: dict) -> list:
    """The exported model's outputs for ``feeds`` (input name -> array)."""
    if fmt == "onnx":
        return ort.InferenceSession(str(path)).run(None, feeds)
    module = torch.jit.load(str(path))
    with torch.no_grad():
        out = module(*(torch.as_tensor(v) for v in feeds.values()))
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
@pytest.mark.parametrize("case", list(CASES))
def test_export_gives_predicts_actions(tmp_path, case, fmt):
    policy_type, obs_space, act_space, kwargs, masked = CASES[case]
    pi = make_policy(policy_type, obs_space, act_space, **kwargs)
    path = pi.export(tmp_path / f"policy.{fmt}", format=fmt, action_mask=masked)
    obs = sample_batch(obs_space, ROWS, seed=7)
    feeds = {"obs": obs} if not isinstance(obs, dict) else {f"obs.{k}": v for k, v in obs.items()}
    feeds = {k: np.asarray(v, dtype=(obs_space[k[4:]] if k != "obs" else obs_space).dtype) for k, v in feeds.items()}
    mask = state = None
    if masked:
        mask = np.random.default_rng(1).random((ROWS, act_space.n)) < 0.5
        mask[:, 4] = True
        feeds["action_mask"] = mask
    if pi.recurrent:
        _, state = pi.predict(obs)  # a state that is not zero
        feeds.update(state)
    action, next_state = pi.predict(obs, state=state, action_mask=mask)
    out = run_export(path, fmt, feeds)
    assert out[0].dtype == action.dtype and out[0].shape == action.shape
    if act_space.dtype.kind == "f":
        np.testing.assert_allclose(out[0], action, rtol=1e-5, atol=1e-6)
    else:
        assert np.array_equal(out[0], action)
        assert all(act_space.contains(a) for a in out[0])
    if masked:
        assert mask[np.arange(ROWS), out[0] - 2].all()
    if pi.recurrent:
        for got, key in zip(out[1:], ("recurrent_h", "recurrent_c")):
            np.testing.assert_allclose(got, next_state[key], rtol=1e-5, atol=1e-6)


def test_bad_export_format_is_refused(tmp_path):
    pi = make_policy("ppo", BOX, spaces.Discrete(2))
    with pytest.raises(ValueError, match=r"format='tflite' is not an export format; valid: 'onnx', 'torchscript'"):
        pi.export(tmp_path / "p.tflite", format="tflite")
    with pytest.raises(ValueError, match="action_mask masks discrete actions"):
        make_policy("ppo", BOX, spaces.Box(-1.0, 1.0, (2,), np.float32)).export(tmp_path / "p.onnx", action_mask=True)
    assert check_format("onnx") == "onnx"


def test_cli_exports_a_checkpoint_to_onnx(tmp_path, build, capsys, monkeypatch):
    cfg = apply_overrides(
        load_preset("cartpole_ppo_fast"), ["log.progress=false", f"log.run_dir={tmp_path}", "policy.hidden_sizes=[8]"]
    )
    checkpoint = build(cfg).engine.save()
    output = tmp_path / "out" / "cartpole.onnx"
    assert main(["export", str(checkpoint), "--format", "onnx", "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    assert f"to {output}" in printed and "inputs          obs" in printed
    obs = sample_batch(spaces.Box(-2.0, 2.0, (4,), np.float32), 32)
    (action,) = ort.InferenceSession(str(output)).run(None, {"obs": obs})
    assert np.array_equal(action, load_policy(checkpoint).predict(obs)[0])

    monkeypatch.chdir(tmp_path)  # the default output: <checkpoint folder name>.pt in the working directory
    assert main(["export", str(checkpoint), "--format", "torchscript"]) == 0
    assert (tmp_path / f"{checkpoint.name}.pt").is_file()

    assert main(["export", str(checkpoint), "--format", "onnxx"]) == 2
    assert "format='onnxx' is not an export format" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_onnx_export_without_the_export_extra_names_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"ONNX export needs the export extra: pip install 'rlightning\[export\]'"):
        make_policy("ppo", BOX, spaces.Discrete(2)).export(tmp_path / "p.onnx")
