"""``Lab.build(cfg, resume=run_dir)`` continues a run from its newest complete checkpoint (issue 33)."""

import pytest

from tests.support.configs import small_ppo


@pytest.mark.ray
def test_lab_build_resumes_from_the_newest_checkpoint_and_writes_on_there(tmp_path, ray_runtime):
    from rlightning.notebook import Lab

    lab = Lab.local()
    try:
        cfg = small_ppo(tmp_path, False, "train.checkpoint_interval=1", "log.name=first")
        first = lab.build(cfg)
        first.run(2, progress=False)
        run_dir = first.engine.run_dir
        other = small_ppo(tmp_path / "elsewhere", False, "train.checkpoint_interval=1", "log.name=other")
        resumed = lab.build(other, resume=run_dir)
        assert resumed.engine.iteration == 2 and len(resumed.metrics) == 2
        assert resumed.engine.run_dir == run_dir
        resumed.step()
        assert (run_dir / "checkpoints" / "iter_000003").is_dir()
        with pytest.raises(FileNotFoundError, match="holds no complete checkpoint"):
            lab.build(other, name="empty", resume=tmp_path / "nothing")
        assert "empty" not in lab.cluster_info()["runs"]
    finally:
        lab.shutdown()
