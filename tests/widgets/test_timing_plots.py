"""Timing plots: the throughput line breaks across idle time; legends sit beside the bars."""

from rlightning.engine.timing import Timing
from rlightning.engine.timing_plots import plot_phases, throughput_points


def _timing(records):
    timing = Timing()
    timing.records.extend(records)
    return timing


def test_throughput_line_is_broken_where_the_run_was_idle():
    timing = _timing(
        [
            {"iteration": 0.0, "rollout": 0.5, "train": 0.5, "env_steps": 100.0, "t_end": 1.0},
            {"iteration": 1.0, "rollout": 0.5, "train": 0.5, "env_steps": 100.0, "t_end": 2.0},
            # 60 s later (run.step(), then run.run() much later): no line across the gap
            {"iteration": 2.0, "rollout": 0.5, "train": 0.5, "env_steps": 200.0, "t_end": 63.0},
        ]
    )
    xs, ys = throughput_points(timing)
    assert xs == [1.0, 2.0, None, 63.0]
    assert ys == [100.0, 100.0, None, 200.0]


def test_phase_legend_is_outside_the_axes():
    timing = _timing([{"iteration": 0.0, "rollout": 0.5, "train": 0.5, "env_steps": 10.0, "t_end": 1.0}])
    fig = plot_phases(timing)
    legend = fig.axes[0].get_legend()
    assert legend is not None and legend._loc == 2 and legend.get_bbox_to_anchor() is not None
    anchor = legend.get_bbox_to_anchor().transformed(fig.axes[0].transAxes.inverted())
    assert anchor.x0 > 1.0, "the legend starts right of the axes"
