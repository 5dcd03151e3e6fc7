"""Export a `StandalonePolicy`'s deterministic acting as ONNX or TorchScript.

Usage::

    pi.export("policy.onnx")                         # torch.onnx.export (the torch.export-based exporter)
    pi.export("policy.pt", format="torchscript")     # torch.jit.trace, loaded with torch.jit.load

What is written is `ActingNet`: the inputs are named ``obs`` (``obs.<key>`` per key of a Dict space) in the
observation space's dtype (``uint8`` frames stay ``uint8``), ``action_mask`` (with ``action_mask=True``,
bool, True = allowed) and a recurrent policy's state (``recurrent_h``, ``recurrent_c``: float32
``[B, width]``, zeros at an episode's start); the outputs ``action`` in the action space's format and the
state after the step (``recurrent_h_next``, ...). Every input and output has a dynamic batch dimension.
ONNX needs the ``export`` extra (``pip install 'rlightning[export]'``: onnx, onnxscript; onnxruntime to run it).
"""

from __future__ import annotations

import io
import logging
import warnings
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, List, Tuple, Union

import numpy as np
import torch
from gymnasium import spaces

from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

__all__ = ["EXPORT_FORMATS", "EXPORT_SUFFIXES", "example_inputs", "export_policy"]

#: The formats `export_policy` writes.
EXPORT_FORMATS = ("onnx", "torchscript")
#: The file suffix of each format (what ``rlightning export`` names its output by default).
EXPORT_SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt"}

#: Rows of the example batch an export traces with (any batch size runs afterwards).
EXAMPLE_ROWS = 2


def check_format(format: str) -> str:
    """``format`` if it is one of `EXPORT_FORMATS`, else a ValueError naming the valid ones."""
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format={format!r} is not an export format; valid: {', '.join(map(repr, EXPORT_FORMATS))}")
    return format


def example_inputs(policy: Any, net: Any, rows: int = EXAMPLE_ROWS) -> Tuple[torch.Tensor, ...]:
    """A batch of ``rows`` sampled observations (plus an all-True mask and a zero state) as `ActingNet` inputs."""
    space = policy.observation_space
    subs = [space] if net.obs_keys is None else [space.spaces[k] for k in net.obs_keys]
    out: List[torch.Tensor] = []
    for sub in subs:
        sample = np.stack([np.asarray(sub.sample(), dtype=sub.dtype) for _ in range(rows)])
        out.append(torch.as_tensor(sample))
    if net.masked:
        act = policy.action_space
        n = int(act.n) if isinstance(act, spaces.Discrete) else int(np.sum(act.nvec))
        out.append(torch.ones(rows, n, dtype=torch.bool))
    if net.state_keys:
        out.extend(torch.as_tensor(v) for v in policy.initial_state(rows).values())
    return tuple(out)


def export_policy(policy: Any, path: Union[str, Path], format: str = "onnx", action_mask: bool = False) -> Path:
    """Write ``policy``'s deterministic acting to ``path``; returns the path.

    Args:
        policy: A `rlightning.policy.standalone.StandalonePolicy`.
        path: The file to write (parent folders are created).
        format: ``"onnx"`` or ``"torchscript"``.
        action_mask: Give the exported model an ``action_mask`` input (Discrete / MultiDiscrete actions).

    Raises:
        ValueError: an unknown format, or a mask for actions that cannot be masked.
        ImportError: ONNX without the ``export`` extra installed.
    """
    from rlightning.policy.acting_net import ActingNet

    check_format(format)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    net = ActingNet(policy.policy, masked=action_mask).eval()
    example = example_inputs(policy, net)
    if format == "torchscript":
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.jit's deprecation notice; the traced module runs as written
            traced = torch.jit.trace(net, example, check_trace=False)
        traced.save(str(target))
    else:
        _export_onnx(net, example, target)
    logger.info("exported %s policy (%s) to %s", type(policy.policy).__name__, format, target)
    return target


def _export_onnx(net: Any, example: Tuple[torch.Tensor, ...], target: Path) -> None:
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError:
        raise ImportError("ONNX export needs the export extra: pip install 'rlightning[export]'") from None
    batch = torch.export.Dim("batch")
    dynamic = tuple({0: batch} for _ in example)
    torch_onnx_log = logging.getLogger("torch.onnx")
    level = torch_onnx_log.level
    torch_onnx_log.setLevel(logging.ERROR)  # its notes that torchvision's ops are skipped (none are used here)
    try:
        with torch.no_grad(), warnings.catch_warnings(), redirect_stdout(io.StringIO()) as printed:
            warnings.simplefilter("ignore")  # the exporter's deprecation notes about its own internals
            program = torch.onnx.export(
                net,
                example,
                input_names=net.input_names,
                output_names=net.output_names,
                dynamic_shapes=(dynamic,),
                dynamo=True,
                verbose=False,
                external_data=False,
            )
    finally:
        torch_onnx_log.setLevel(level)
    logger.debug("torch.onnx.export: %s", printed.getvalue().strip())
    program.save(str(target))
