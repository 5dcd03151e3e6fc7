import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from rlightning.engine.timing import Timing  # noqa: E402


def _filled() -> Timing:
    t = Timing()
    for i in range(3):
        t.begin_iteration(i)
        t.add("rollout", 0.5 + i)
        t.add("env_step", 0.3)
        t.add("inference", 0.1)
        t.add("train", 0.25)
        t.add_latency("env_to_policy", 0.002 * (i + 1))
        t.add_latency("policy_to_buffer", 0.001)
        t.end_iteration(env_steps=1000)
    return t


def test_records_and_summary():
    t = _filled()
    assert len(t) == 3
    rec = t.records[1]
    assert rec["iteration"] == 1 and rec["rollout"] == pytest.approx(1.5) and rec["env_steps"] == 1000
    s = t.summary()
    assert s["rollout"]["total"] == pytest.approx(0.5 + 1.5 + 2.5)
    assert s["train"]["mean"] == pytest.approx(0.25)
    assert s["rollout"]["share"] + s["train"]["share"] == pytest.approx(1.0)
    assert s["latency_env_to_policy"]["count"] == 3
    assert "update_dataset" not in s  # never recorded


def test_phase_context_manager_accumulates():
    t = Timing()
    t.begin_iteration(0)
    with t.phase("train"):
        pass
    with t.phase("train"):
        pass
    assert "train" in t.current
    rec = t.end_iteration()
    assert rec["train"] >= 0 and "t_end" in rec


def test_bad_latency_kind():
    with pytest.raises(KeyError, match="unknown latency kind 'gpu'; valid kinds: env_to_policy, policy_to_buffer"):
        Timing().add_latency("gpu", 1.0)


@pytest.mark.parametrize("method", ["plot", "plot_latency", "plot_throughput"])
def test_plots_render_to_png(tmp_path, method):
    fig = getattr(_filled(), method)()
    out = tmp_path / f"{method}.png"
    fig.savefig(out)
    assert out.stat().st_size > 2000
    assert fig.axes[0].get_title()


def test_plot_of_empty_timing():
    fig = Timing().plot()
    assert fig.axes
