"""The BufferView explorer: paged rows, thumbnails for images, statistics, a histogram; buttons page."""

import pytest
import torch
from tensordict import TensorDict

from rlightning.buffer.utils.buffer_view import BufferView
from rlightning.widgets.explorer import BufferExplorer


def _view(n=25):
    td = TensorDict(
        {
            "obs": torch.arange(n * 4, dtype=torch.float32).reshape(n, 4),
            "pixels": torch.full((n, 8, 8, 3), 7, dtype=torch.uint8),
            "next": TensorDict({"reward": torch.ones(n), "done": torch.zeros(n, dtype=torch.bool)}, [n]),
        },
        [n],
    )
    return BufferView(td)


def test_pages_stats_and_histogram_of_a_buffer_view():
    ex = BufferExplorer(_view(), page_size=10)
    assert ex.state["pages"] == 3 and ex.state["rows_total"] == 25
    assert set(ex.state["keys"]) == {"obs", "pixels", "next.reward", "next.done"}
    assert ex.state["page_rows"][0][0] == "0" and len(ex.state["page_rows"]) == 10
    assert ex.state["stats"]["next.reward"] == {"mean": 1.0, "std": 0.0, "min": 1.0, "max": 1.0}
    assert ex.state["stats"]["obs"]["max"] == 99.0 and "next.done" not in ex.state["stats"]
    assert "data:image/png;base64" in ex.table.value, "image observations show as thumbnails"
    ex.next_button.click()
    ex.next_button.click()
    ex.next_button.click()
    assert ex.state["page"] == 2 and len(ex.state["page_rows"]) == 5 and ex.state["page_rows"][0][0] == "20"
    ex.prev_button.click()
    assert ex.state["page"] == 1
    ex.key_menu.value = "next.reward"
    assert ex.state["selected"] == "next.reward" and ex.hist.value[:4] == b"\x89PNG"
    with pytest.raises(KeyError, match="no key 'reward' in the data; keys: obs"):
        ex.select("reward")


def test_explorer_takes_a_data_buffer_and_rejects_other_things(tmp_path, build):
    from tests.support.configs import small_ppo

    engine = build(small_ppo(tmp_path, False, "buffer.type=replay", "buffer.sampler=uniform")).engine
    engine.rollout()
    ex = BufferExplorer(engine.buffer)
    assert ex.state["rows_total"] == engine.buffer.stats()["size"] > 0 and "obs" in ex.state["keys"]
    with pytest.raises(TypeError, match="BufferExplorer takes a BufferView, a DataBuffer or a TensorDict, got int"):
        BufferExplorer(3)
