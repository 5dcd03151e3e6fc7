"""It learns: recurrent PPO solves CartPole with the velocities masked, which feed-forward PPO cannot.

Positions alone do not tell where the pole is going; the LSTM infers the velocities from the history.
The budget is the `lstm_ppo` preset's rollouts (8 envs x 32 steps) for at most 100 iterations, 25,600 env
steps; sb3-contrib's RecurrentPPO reaches 500 on CartPoleNoVel-v1 in 100k steps (rl-baselines3-zoo).
"""

import pytest

from rlightning.utils.config import apply_overrides, load_preset

ITERATIONS = 100  # x 8 envs x 32 steps = 25,600 env steps at most
SOLVED = 150.0  # mean return of the last 20 training episodes


def _run(build, tmp_path, *overrides):
    cfg = apply_overrides(
        load_preset("lstm_ppo"),
        ["log.progress=false", f"log.run_dir={tmp_path}", f"train.iterations={ITERATIONS}", *overrides],
    )
    e = build(cfg).engine
    e.run()  # the preset stops at train.target_return=150
    return e


@pytest.mark.slow
def test_lstm_ppo_solves_masked_cartpole_and_feed_forward_ppo_does_not(build, tmp_path):
    lstm = _run(build, tmp_path / "lstm")
    assert lstm.last_metrics["episode_return_mean"] >= SOLVED, lstm.last_metrics
    budget = lstm.env_steps
    assert budget <= ITERATIONS * 8 * 32
    # The same PPO and budget without the recurrent core (transitions instead of sequences).
    ff = _run(
        build,
        tmp_path / "ff",
        "policy.recurrent=null",
        "buffer.unit=transition",
        "buffer.capacity=4096",
        "train.target_return=null",
        f"train.total_env_steps={budget}",
    )
    assert ff.env_steps <= budget + 8 * 32
    assert ff.last_metrics["episode_return_mean"] < SOLVED / 2, ff.last_metrics
