"""`EpisodePlayer`: recorded episodes as inline HTML5 videos (MP4 by imageio-ffmpeg), with return and length."""

from __future__ import annotations

import base64
import os
import tempfile
from typing import Any, List

from rlightning.widgets._base import esc

INSTALL_HINT = "the episode player needs imageio and imageio-ffmpeg: pip install 'rlightning[notebook]'"


def encode_mp4(frames: Any, fps: int) -> bytes:
    """H.264 MP4 bytes of ``uint8 [T, H, W, 3]`` frames (sizes padded to even numbers for the codec)."""
    try:
        import imageio.v2 as imageio
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    import numpy as np

    frames = np.asarray(frames, dtype=np.uint8)
    h, w = frames.shape[1] + frames.shape[1] % 2, frames.shape[2] + frames.shape[2] % 2
    if (h, w) != frames.shape[1:3]:
        frames = np.pad(frames, ((0, 0), (0, h - frames.shape[1]), (0, w - frames.shape[2]), (0, 0)))
    fd, path = tempfile.mkstemp(suffix=".mp4")
    os.close(fd)
    try:
        try:
            writer = imageio.get_writer(path, fps=fps, codec="libx264", pixelformat="yuv420p", macro_block_size=1)
        except (ImportError, ValueError) as err:
            raise ImportError(f"{INSTALL_HINT} ({err})") from None
        with writer:
            for frame in frames:
                writer.append_data(frame)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


class EpisodePlayer:
    """Videos of a `Recording` (``run.record(...)``), shown inline; ``state`` lists each episode.

    Args:
        recording: What ``record_episodes`` returned.
    """

    def __init__(self, recording: Any) -> None:
        self.recording = recording
        self.videos: List[bytes] = [encode_mp4(ep.frames, recording.fps) for ep in recording.episodes]
        self.state = {
            "env": recording.env_name,
            "iteration": recording.iteration,
            "episodes": [
                {"return": ep.ret, "length": ep.length, "frames": int(len(ep.frames)), "video_bytes": len(v)}
                for ep, v in zip(recording.episodes, self.videos)
            ],
        }

    def _repr_html_(self) -> str:
        from rlightning.widgets.panel import num

        items = []
        for i, (ep, video) in enumerate(zip(self.state["episodes"], self.videos)):
            data = base64.b64encode(video).decode()
            items.append(
                "<figure style='display:inline-block;margin:4px'>"
                f"<video class='rl-episode-video' controls autoplay muted loop playsinline "
                f"src='data:video/mp4;base64,{data}'></video>"
                f"<figcaption>episode {i + 1}: return {num(ep['return'])}, length {ep['length']}</figcaption></figure>"
            )
        return (
            f"<div class='rlightning-player'><b>{esc(self.state['env'])}</b> at iteration {self.state['iteration']}"
            f"<div>{''.join(items)}</div></div>"
        )

    def __repr__(self) -> str:
        eps = ", ".join(f"return {e['return']:.1f} / length {e['length']}" for e in self.state["episodes"])
        return f"EpisodePlayer({self.state['env']}: {eps})"
