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


# --------------------------------------------------------------------------- per-algorithm policy configs


def test_policy_type_selects_the_algorithms_config_class():
    from rlightning.policy.algorithms import DQNConfig, PPOConfig, SACConfig
    from rlightning.utils.config import PolicyConfig

    for name, cls in (("ppo", PPOConfig), ("sac", SACConfig), ("dqn", DQNConfig)):
        cfg = config_from_dict({"policy": {"type": name}})
        assert type(cfg.policy) is cls and isinstance(cfg.policy, PolicyConfig)
        assert type(PolicyConfig(type=name)) is cls
    assert type(MainConfig().policy) is PPOConfig and type(PolicyConfig()) is PPOConfig
    # A PPO config lists no SAC or DQN settings, and the other way round.
    assert not {"tau", "alpha", "q_lr", "epsilon_start"} & set(PPOConfig.model_fields)
    assert not {"clip_coef", "gae_lambda", "epsilon_start"} & set(SACConfig.model_fields)
    assert not {"clip_coef", "alpha", "policy_frequency"} & set(DQNConfig.model_fields)
    shared = {"hidden_sizes", "activation", "optim", "gamma", "weight_sync", "deterministic_eval", "checkpoint"}
    assert shared <= set(PolicyConfig.model_fields) and shared <= set(SACConfig.model_fields)
    sac = PolicyConfig(type="sac", tau=0.01, hidden_sizes=[8])
    assert (sac.tau, sac.hidden_sizes, sac.q_lr) == (0.01, [8], None)
    assert set(to_yaml(MainConfig(policy=sac)).split("policy:")[1].split("buffer:")[0].split()) >= {"tau:", "alpha:"}


@pytest.mark.parametrize(
    "policy,match",
    [
        ({"clip_coeff": 0.1}, r"policy: unknown PPOConfig key 'clip_coeff'\. Did you mean 'clip_coef'\?.*Valid keys: "),
        ({"type": "sac", "taus": 0.1}, r"policy: unknown SACConfig key 'taus'\. Did you mean 'tau'\?.*Valid keys: "),
        (
            {"type": "dqn", "epsilon_star": 1.0},
            r"unknown DQNConfig key 'epsilon_star'\. Did you mean 'epsilon_start'\?.*Valid keys: .*epsilon_end",
        ),
        (
            {"type": "sac", "clip_coef": 0.1},
            r"unknown SACConfig key 'clip_coef'\. \('clip_coef' is a setting of policy.type 'appo', 'ppo'",
        ),
        (
            {"type": "ppo2"},
            r"policy\.type: unknown policy 'ppo2'\. Did you mean 'ppo', 'appo'\?.*Registered policy names",
        ),
        ({"type": "sac", "tau": 0}, r"policy\.tau: Input should be greater than 0 \(got 0\)"),
    ],
)
def test_policy_keys_are_checked_against_the_algorithms_config(policy, match):
    with pytest.raises(ConfigError, match=match):
        config_from_dict({"policy": policy})


def test_policy_attribute_edits_stay_validated():
    from rlightning.utils.config import PolicyConfig, UnknownKeyError

    cfg = load_preset("cartpole_ppo")
    cfg.policy.clip_coef = 0.1
    assert cfg.policy.clip_coef == 0.1 and isinstance(cfg.policy, PolicyConfig)
    with pytest.raises(UnknownKeyError, match=r"unknown PPOConfig key 'tau'\. .*policy.type .*'dqn', .*'sac'"):
        cfg.policy.tau = 0.1
    with pytest.raises(ConfigError, match=r"policy type 'sac' takes SACConfig, not PPOConfig"):
        cfg.policy.type = "sac"
    assert cfg.policy.type == "ppo"
    cfg.policy = {"type": "sac", "tau": 0.02}
    assert type(cfg.policy).__name__ == "SACConfig" and cfg.policy.tau == 0.02
    with pytest.raises(KeyError, match=r"unknown policy 'sacc'\. Did you mean 'sac'"):
        PolicyConfig(type="sacc")


def test_overrides_switch_the_policy_type():
    cfg = apply_overrides(load_preset("cartpole_ppo"), ["policy.type=sac", "policy.tau=0.01"])
    assert type(cfg.policy).__name__ == "SACConfig" and cfg.policy.tau == 0.01
    assert cfg.policy.optim.lr == 1e-3 and cfg.policy.hidden_sizes == [64, 64]  # shared settings are kept
    back = apply_overrides(load_preset("pendulum_sac"), ["policy.type=ppo", "policy.clip_coef=0.1"])
    assert type(back.policy).__name__ == "PPOConfig" and back.policy.clip_coef == 0.1
    assert back.policy.gae_lambda == 0.95  # PPO's default: the SAC preset had none
    # A key the new type lacks is an error whichever order it comes in.
    with pytest.raises(ConfigError, match=r"unknown SACConfig key 'clip_coef'.*earlier override 'policy.clip_coef="):
        apply_overrides(load_preset("cartpole_ppo"), ["policy.clip_coef=0.1", "policy.type=sac"])
    with pytest.raises(ConfigError, match=r"override 'policy.clip_coef=0.1': unknown SACConfig key 'clip_coef'"):
        apply_overrides(load_preset("cartpole_ppo"), ["policy.type=sac", "policy.clip_coef=0.1"])
    with pytest.raises(KeyError, match=r"override 'policy.type=ppo2': .*unknown policy 'ppo2'. Did you mean 'ppo'"):
        apply_overrides(load_preset("cartpole_ppo"), ["policy.type=ppo2"])


def test_overridden_policy_type_is_still_validated():
    # Later wins, but the hidden value must have been valid: tau=0 is checked against SACConfig.
    with pytest.raises(ConfigError, match=r"overrides before 'policy.type=ppo'.*policy\.tau: Input should be greater"):
        apply_overrides(load_preset("cartpole_ppo"), ["policy.type=sac", "policy.tau=0", "policy.type=ppo"])
    cfg = apply_overrides(load_preset("cartpole_ppo"), ["policy.type=sac", "policy.type=ppo"])
    assert type(cfg.policy).__name__ == "PPOConfig"


def test_user_registered_policy_brings_its_config():
    from pydantic import Field

    from rlightning.policy import BasePolicy
    from rlightning.utils.config import PolicyConfig, policy_config_class
    from rlightning.utils.registry import POLICIES

    class CellConfig(PolicyConfig):
        """A config defined where the policy is."""

        horizon: int = Field(5, ge=1)
        """Steps to look ahead."""

    class CellPolicy(BasePolicy):
        config_cls = CellConfig

    class NoConfigPolicy(BasePolicy):
        pass

    POLICIES.register("test_cell_attr", override=True)(CellPolicy)
    POLICIES.register("test_cell_arg", override=True, config=CellConfig)(NoConfigPolicy)
    POLICIES.register("test_cell_none", override=True)(NoConfigPolicy)
    assert policy_config_class("test_cell_attr") is CellConfig and policy_config_class("test_cell_arg") is CellConfig
    assert policy_config_class("test_cell_none") is PolicyConfig
    cfg = config_from_dict({"policy": {"type": "test_cell_attr", "horizon": 9, "gamma": 0.5}})
    assert type(cfg.policy) is CellConfig and cfg.policy.horizon == 9
    assert apply_overrides(cfg, ["policy.horizon=3"]).policy.horizon == 3
    with pytest.raises(ConfigError, match=r"unknown CellConfig key 'horizn'\. Did you mean 'horizon'\?"):
        apply_overrides(cfg, ["policy.horizn=3"])
    base = config_from_dict({"policy": {"type": "test_cell_none"}})
    assert type(base.policy) is PolicyConfig
    with pytest.raises(ConfigError, match=r"unknown PolicyConfig key 'horizon'"):
        config_from_dict({"policy": {"type": "test_cell_none", "horizon": 3}})
    assert CellPolicy(cfg.policy).config.horizon == 9
    with pytest.raises(TypeError, match=r"CellPolicy\(config=...\) needs a CellConfig \(its config_cls\), got PPO"):
        CellPolicy(PolicyConfig())
    with pytest.raises(TypeError, match="config must be a class"):
        POLICIES.register("test_cell_bad", config="CellConfig")(CellPolicy)


LEGACY = __import__("pathlib").Path(__file__).parent / "legacy"


@pytest.mark.parametrize("preset", ["cartpole_ppo", "pendulum_sac"])
def test_a_flat_policy_config_of_an_older_version_loads(preset, caplog):
    data = yaml.safe_load((LEGACY / f"{preset}.yaml").read_text())
    assert {"clip_coef", "tau", "epsilon_start"} <= set(data["policy"])  # the old flat shape
    with pytest.raises(ConfigError, match="unknown .*Config key"):
        config_from_dict(data)  # a config file the user writes is still checked strictly
    caplog.set_level("WARNING", logger="rlightning")
    cfg = config_from_dict(data, source="in old.yaml", legacy=True)
    assert cfg == load_preset(preset)
    assert "written by an older rlightning" in caplog.text and "epsilon_start" in caplog.text


def test_an_old_checkpoint_folder_loads(tmp_path):
    from rlightning.engine.checkpoint import load_engine_files, save_engine_files

    state = {"iteration": 3, "env_steps": 10, "episodes": 1, "engine": "syncrl"}
    save_engine_files(tmp_path, state, load_preset("pendulum_sac"))
    (tmp_path / "config.yaml").write_text((LEGACY / "pendulum_sac.yaml").read_text())
    (tmp_path / "policy.pt").write_bytes(b"")
    _, cfg = load_engine_files(tmp_path)
    assert type(cfg.policy).__name__ == "SACConfig" and cfg.policy.tau == 0.005
