"""The episode player: the current policy played in an env of its own, shown as an inline MP4 video."""

import base64
import re

import pytest

pytest.importorskip("imageio_ffmpeg")
pytest.importorskip("pygame")  # CartPole's renderer


def test_record_plays_episodes_with_return_length_and_video(tmp_path):
    from rlightning.notebook.run import Run
    from rlightning.utils.builders import build_run
    from tests.support.configs import small_ppo

    parts = build_run(small_ppo(tmp_path, False))
    run = Run("rec", parts.engine.config, parts, freeze=True)
    try:
        run.step()
        env_steps = run.engine.env_steps
        player = run.record(episodes=2, max_steps=30)
        eps = player.state["episodes"]
        assert len(eps) == 2 and all(1 <= e["length"] <= 30 for e in eps)
        assert all(e["frames"] == e["length"] + 1 for e in eps), "one frame per step plus the reset frame"
        assert all(e["return"] == float(e["length"]) for e in eps), "CartPole pays 1 per step"
        assert run.engine.env_steps == env_steps, "recording does not step the training envs"
        html = player._repr_html_()
        videos = re.findall(r"src='data:video/mp4;base64,([^']+)'", html)
        assert len(videos) == 2 and html.count("class='rl-episode-video'") == 2
        assert base64.b64decode(videos[0])[4:8] == b"ftyp", "an MP4 file"
        assert f"return {eps[0]['return']:.3g}, length {eps[0]['length']}" in html
        with pytest.raises(ValueError, match="episodes must be an int >= 1, got 0"):
            run.record(episodes=0)
    finally:
        run.close()
