from rlightning.engine import EvalEngine
from tests.support.configs import small_ppo


def test_eval_engine_plays_deterministic_episodes(tmp_path, build):
    cfg = small_ppo(tmp_path, False, "engine=eval", "train.eval_episodes=3", "env.max_episode_steps=50")
    e = build(cfg).engine
    assert isinstance(e, EvalEngine)
    m = e.step()
    assert m["eval_episodes"] == 3 and 1 <= m["eval_length_mean"] <= 50
    assert m["episode_return_mean"] == m["eval_return_mean"]
    assert e.buffer.stats()["size"] == 0  # nothing stored
    assert e.episodes == 3


def test_periodic_evaluation_in_training(tmp_path, build):
    cfg = small_ppo(tmp_path, False, "train.eval_interval=1", "train.eval_episodes=2", "env.max_episode_steps=30")
    e = build(cfg).engine
    m = e.step()
    assert m["eval_episodes"] == 2 and "eval_return_mean" in m
    assert e.timing.records[0]["evaluate"] > 0
