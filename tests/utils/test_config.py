import pytest
import yaml

from rlightning.utils.config import (
    ClusterConfig,
    ConfigError,
    MainConfig,
    apply_overrides,
    config_from_dict,
    list_presets,
    load_config,
    load_preset,
    to_yaml,
)


def test_defaults_are_valid_and_documented():
    cfg = MainConfig()
    assert cfg.engine == "syncrl"
    for model in (cfg, cfg.env, cfg.policy, cfg.policy.optim, cfg.buffer, cfg.train, cfg.cluster, cfg.log):
        for name, field in type(model).model_fields.items():
            assert field.description, f"{type(model).__name__}.{name} has no docstring"


def test_seed_builder_fields_exist():
    c = ClusterConfig()
    for name in ("train_worker_num", "eval_worker_num", "train_each_gpu_num", "eval_each_gpu_num", "is_colocated"):
        assert hasattr(c, name)
    cfg = MainConfig()
    assert cfg.policy.type and cfg.policy.rollout_mode == "sync" and cfg.policy.max_concurrency == 16
    assert cfg.env.num_workers == 1


def test_unknown_key_names_closest():
    with pytest.raises(ConfigError, match=r"unknown MainConfig key 'clustr'\. Did you mean 'cluster'\?"):
        config_from_dict({"clustr": {}})
    with pytest.raises(
        ConfigError, match=r"cluster: unknown ClusterConfig key 'eval_workers_num'\. Did you mean 'eval_worker_num'"
    ):
        config_from_dict({"cluster": {"eval_workers_num": 2}})


def test_invalid_value_names_field_and_range():
    with pytest.raises(
        ConfigError, match=r"cluster\.eval_worker_num: Input should be greater than or equal to 0 \(got -1\)"
    ):
        config_from_dict({"cluster": {"eval_worker_num": -1}})
    with pytest.raises(ConfigError, match=r"buffer\.mode: Input should be 'circular' or 'standard' \(got 'ring'\)"):
        config_from_dict({"buffer": {"mode": "ring"}})


def test_assignment_is_validated():
    cfg = MainConfig()
    cfg.cluster.eval_worker_num = 2
    assert cfg.cluster.eval_worker_num == 2
    with pytest.raises(ValueError, match="eval_worker_num"):
        cfg.cluster.eval_worker_num = -3
    assert cfg.cluster.eval_worker_num == 2
    with pytest.raises(
        AttributeError, match=r"unknown ClusterConfig key 'eval_workers'\. Did you mean 'eval_worker_num'\?"
    ):
        cfg.cluster.eval_workers = 2


def test_overrides():
    cfg = apply_overrides(
        MainConfig(), ["policy.optim.lr=1e-3", "policy.hidden_sizes=[32, 16]", "train.target_return=null"]
    )
    assert cfg.policy.optim.lr == 1e-3 and cfg.policy.hidden_sizes == [32, 16] and cfg.train.target_return is None


@pytest.mark.parametrize(
    "override,match",
    [
        ("train.iterations", "must look like key.path=value"),
        ("train.iteratons=3", r"unknown TrainConfig key 'iteratons'\. Did you mean 'iterations'"),
        ("seed.x=1", "seed is not a section"),
        ("train..x=1", "empty key part"),
        ("train.iterations=zero", r"train\.iterations: Input should be a valid integer"),
    ],
)
def test_bad_overrides(override, match):
    with pytest.raises(ConfigError, match=match):
        apply_overrides(MainConfig(), [override])


def test_yaml_round_trip(tmp_path):
    cfg = apply_overrides(MainConfig(), ["env.num_envs=4", "policy.type=sac"])
    path = tmp_path / "c.yaml"
    path.write_text(to_yaml(cfg))
    assert load_config(path) == cfg


def test_load_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(bad)
    top = tmp_path / "list.yaml"
    top.write_text(yaml.safe_dump([1, 2]))
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        load_config(top)


def test_presets_load():
    names = list_presets()
    assert "cartpole_ppo" in names
    for name in names:
        assert isinstance(load_preset(name), MainConfig)
    with pytest.raises(KeyError, match=r"unknown preset 'cartpole_pp'\. Did you mean 'cartpole_ppo'\?"):
        load_preset("cartpole_pp")
