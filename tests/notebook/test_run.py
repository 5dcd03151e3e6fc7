import time

import pytest

from rlightning.notebook import Lab
from tests.support.configs import small_ppo


@pytest.fixture
def lab(ray_runtime):
    lab = Lab.local()
    yield lab
    lab.shutdown()


@pytest.mark.ray
def test_build_step_run_and_rebuild_replaces(tmp_path, lab):
    run = lab.build(small_ppo(tmp_path))
    assert run.step()["iteration"] == 1
    assert len(run.run(2, progress=False)) == 2
    assert len(run.metrics) == 3 and len(run.timing.records) == 3
    ckpt = run.save(str(tmp_path / "ckpt"))
    again = lab.build(small_ppo(tmp_path))  # the same cell run again
    assert run._closed and not again._closed
    assert lab.cluster_info()["runs"] == ["default"]
    assert "iteration=0" in repr(again)
    assert again.load(str(ckpt)) is again and again.engine.iteration == 3 and len(again.metrics) == 3


@pytest.mark.ray
def test_background_run_start_stop(tmp_path, lab):
    run = lab.build(small_ppo(tmp_path, False, "train.iterations=200"))
    run.start()
    assert run.is_running
    with pytest.raises(RuntimeError, match="is running in the background; call run.stop\\(\\) first"):
        run.step()
    deadline = time.time() + 60
    while run.engine.iteration < 2 and time.time() < deadline:
        time.sleep(0.05)
    history = run.stop()
    assert not run.is_running
    assert 2 <= len(history) < 200
    assert run.engine.phase == "idle"
    assert run.step()["iteration"] == len(history) + 1


@pytest.mark.ray
def test_shutdown_stops_what_the_lab_built(tmp_path, lab):
    run = lab.build(small_ppo(tmp_path), name="a")
    lab.shutdown()
    assert run._closed
    with pytest.raises(RuntimeError, match="run 'a' is closed"):
        run.step()
