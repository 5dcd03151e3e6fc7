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


@pytest.mark.ray
def test_run_set_reaches_a_ray_train_worker_and_the_metrics(tmp_path, lab):
    cfg = small_ppo(tmp_path, False, "cluster.remote_train=true", "cluster.train_each_cpu_num=0.25")
    cfg.policy.optim.anneal_lr = False
    run = lab.build(cfg)
    assert run.policy_group.train_workers[0].is_remote
    assert run.step()["lr"] == pytest.approx(cfg.policy.optim.lr)
    assert run.set(lr=2e-4, clip_coef=0.15) == {"lr": 2e-4, "clip_coef": 0.15}
    metrics = run.step()
    assert metrics["lr"] == pytest.approx(2e-4), "the Ray train worker trained with the new learning rate"
    assert metrics["set_lr"] == 2e-4 and metrics["set_clip_coef"] == 0.15
    assert run.config.policy.optim.lr == 2e-4
    with pytest.raises(KeyError, match="'update_epoch' cannot be changed on a built run; settable: .*ent_coef"):
        run.set(update_epoch=2)


@pytest.mark.ray
def test_build_that_cannot_get_its_cpus_fails_at_once(tmp_path, lab):
    import ray

    free = float(ray.available_resources().get("CPU", 0))
    per_worker = int(free / 2 * 100) / 100
    hungry = [f"env.num_cpus={per_worker}", "cluster.remote_env=true"]
    first = lab.build(small_ppo(tmp_path, False, *hungry), name="first")
    assert first.engine.iteration == 0
    with pytest.raises(
        ValueError,
        match=r"run 'second' needs [\d.]+ CPUs for its Ray actors \(2 env workers x "
        r"[\d.]+\) but only [\d.]+ of the cluster's [\d.]+ are free \(runs of this Lab: 'first' holds",
    ):
        lab.build(small_ppo(tmp_path, False, *hungry), name="second")
    assert sorted(lab.runs) == ["first"], "nothing of the failed build was kept"
    lab._require_free(small_ppo(tmp_path, False, *hungry), "first")  # replacing 'first' gets its CPUs back


@pytest.mark.ray
def test_bad_env_id_is_caught_before_any_worker_starts(tmp_path, lab, monkeypatch):
    import rlightning.utils.builders as builders

    def no_build(*args, **kwargs):
        raise AssertionError("build_run was reached")

    monkeypatch.setattr(builders, "build_run", no_build)
    from rlightning.utils.config import UnknownNameError

    with pytest.raises(UnknownNameError, match=r"env.name: unknown env id 'CartPol-v1'.*'CartPole-v1'") as info:
        lab.build(small_ppo(tmp_path, False, "env.name=CartPol-v1"))
    assert info.value.__cause__ is None and info.value.__suppress_context__
