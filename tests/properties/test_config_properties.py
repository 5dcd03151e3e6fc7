"""Bad configs (random dicts, YAML text, overrides, assignments) end in a `ConfigError` that names the field."""

from __future__ import annotations

import math
import typing
from typing import Any, Dict, List, Tuple

import pytest
import yaml
from annotated_types import Ge, Gt, Le
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from rlightning.utils.config import (
    ConfigError,
    MainConfig,
    PolicyConfig,
    UnknownKeyError,
    UnknownNameError,
    apply_overrides,
    config_from_dict,
    list_presets,
    load_config,
    load_preset,
    policy_config_classes,
    to_yaml,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _leaves(model: type, prefix: Tuple[str, ...] = ()) -> List[Tuple[Tuple[str, ...], Any]]:
    out = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.extend(_leaves(ann, prefix + (name,)))
        else:
            out.append((prefix + (name,), info))
    return out


def _policy_leaves() -> Tuple[List[Tuple[Tuple[str, ...], Any]], Dict[Tuple[str, ...], str]]:
    """Leaves of each built-in algorithm's own policy config, and the ``policy.type`` each needs."""
    leaves, types = [], {}
    for name, cls in policy_config_classes().items():
        if name not in ("ppo", "sac", "dqn"):
            continue  # policies other tests registered
        for path, info in _leaves(cls, ("policy",)):
            if path[1] not in PolicyConfig.model_fields and path not in types:
                leaves.append((path, info))
                types[path] = name
    return leaves, types


ALGORITHM_LEAVES, POLICY_TYPE = _policy_leaves()
LEAVES = _leaves(MainConfig) + ALGORITHM_LEAVES
SECTIONS = [name for name, info in MainConfig.model_fields.items() if isinstance(info.annotation, type)]
SECTIONS = [s for s in SECTIONS if issubclass(MainConfig.model_fields[s].annotation, BaseModel)]


def _kinds(info: Any) -> tuple:
    ann = info.annotation
    return typing.get_args(ann) if typing.get_origin(ann) is typing.Union else (ann,)


def _bounds(info: Any) -> Dict[str, float]:
    out = {}
    for m in info.metadata:
        for cls, key in ((Ge, "ge"), (Gt, "gt"), (Le, "le")):
            if isinstance(m, cls):
                out[key] = getattr(m, key)
    return out


def invalid_values(info: Any) -> List[Any]:
    """Values no field of this kind accepts: wrong types, out of range, NaN and inf, nested garbage."""
    kinds = _kinds(info)
    origin = typing.get_origin(info.annotation)
    bad: List[Any] = [object()]
    if origin is not dict:
        bad.append({"nested": {"garbage": [1, 2]}})
    if origin is not list and list not in [typing.get_origin(k) for k in kinds]:
        bad.append([1, 2])
    if int in kinds or float in kinds:
        bad += [True, "not a number", float("nan"), float("inf"), float("-inf"), 2**70]
        b = _bounds(info)
        if "ge" in b:
            bad.append(b["ge"] - 1)
        if "gt" in b:
            bad.append(b["gt"])
        if "le" in b:
            bad.append(b["le"] + 1)
    if int in kinds and float not in kinds:
        bad.append(1.5)
    if bool in kinds:
        bad += ["maybe", 2]
    if str in kinds:
        bad += [12, 3.5]
    if typing.get_origin(kinds[0]) is typing.Literal:
        bad += ["not-a-choice", 0]
    if origin is list:
        bad += [[0], [-3], ["x"], 5]
    if origin is dict:
        bad += [[1, 2], "text"]
    return bad


def _nest(path: Tuple[str, ...], value: Any) -> Dict[str, Any]:
    out: Any = value
    for part in reversed(path):
        out = {part: out}
    if path in POLICY_TYPE:  # a setting of one algorithm: the policy section names that algorithm
        out["policy"]["type"] = POLICY_TYPE[path]
    return out


def _config_for(path: Tuple[str, ...]) -> MainConfig:
    """A default config whose policy type has the field at ``path``."""
    return config_from_dict({"policy": {"type": POLICY_TYPE[path]}}) if path in POLICY_TYPE else MainConfig()


def _type_override(path: Tuple[str, ...]) -> List[str]:
    return [f"policy.type={POLICY_TYPE[path]}"] if path in POLICY_TYPE else []


def _get(cfg: Any, path: Tuple[str, ...]) -> Any:
    for part in path:
        cfg = getattr(cfg, part)
    return cfg


@st.composite
def leaf_and_invalid(draw):
    path, info = draw(st.sampled_from(LEAVES))
    return path, draw(st.sampled_from(invalid_values(info)))


@SETTINGS
@given(case=leaf_and_invalid())
def test_invalid_value_in_a_dict_names_the_field(case):
    path, value = case
    with pytest.raises(ConfigError) as err:
        config_from_dict(_nest(path, value))
    assert ".".join(path) in str(err.value)


@SETTINGS
@given(case=leaf_and_invalid())
def test_invalid_assignment_names_the_field_and_changes_nothing(case):
    path, value = case
    cfg = _config_for(path)
    before = cfg.model_dump()
    with pytest.raises(ConfigError) as err:
        setattr(_get(cfg, path[:-1]), path[-1], value)
    assert path[-1] in str(err.value)
    assert cfg.model_dump() == before


@SETTINGS
@given(case=leaf_and_invalid(), preset=st.sampled_from(list_presets()))
def test_invalid_override_names_the_field(case, preset):
    path, value = case
    assume(type(value) in (int, float, str, list, dict, bool))
    text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
    if isinstance(value, float) and not math.isfinite(value):
        text = {True: ".nan", False: ".inf" if value > 0 else "-.inf"}[math.isnan(value)]
    with pytest.raises(ConfigError) as err:
        apply_overrides(load_preset(preset), _type_override(path) + [f"{'.'.join(path)}={text}"])
    assert ".".join(path) in str(err.value)


@st.composite
def boundary_value(draw):
    """A value on the edge of what a numeric field accepts."""
    numeric = [(p, i) for p, i in LEAVES if (int in _kinds(i) or float in _kinds(i)) and _bounds(i)]
    path, info = draw(st.sampled_from(numeric))
    b = _bounds(info)
    value = b["ge"] if "ge" in b else (b["gt"] + 1 if "gt" in b else b["le"])
    if "le" in b and "ge" not in b and "gt" not in b:
        value = b["le"]
    return path, value


@SETTINGS
@given(case=boundary_value())
def test_values_on_the_boundary_are_accepted(case):
    path, value = case
    cfg = config_from_dict(_nest(path, value))
    assert _get(cfg, path) == value


KEY = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)


@SETTINGS
@given(section=st.sampled_from([()] + [(s,) for s in SECTIONS]), key=KEY)
def test_unknown_keys_are_named_with_the_valid_ones(section, key):
    model = type(_get(MainConfig(), section))  # the policy section's is the default type's config
    assume(key not in model.model_fields)
    with pytest.raises(ConfigError) as err:
        config_from_dict(_nest(section, {key: 1}))
    assert "unknown" in str(err.value) and "Valid keys" in str(err.value)
    with pytest.raises(UnknownKeyError):  # also an AttributeError
        setattr(
            _get(MainConfig(), section),
            key if key.isidentifier() and not key.startswith("_") else "x_" + str(len(key)),
            1,
        )


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=12,
)
SECTIONISH = st.dictionaries(
    st.sampled_from(SECTIONS + ["seed", "engine", "bogus"]),
    JSONISH | st.dictionaries(st.sampled_from([p[-1] for p, _ in LEAVES] + ["bogus"]), JSONISH, max_size=4),
    max_size=4,
)


@SETTINGS
@given(data=SECTIONISH | JSONISH)
def test_random_dicts_validate_or_raise_config_error(data):
    try:
        cfg = config_from_dict(data)
    except ConfigError as err:
        assert str(err).startswith("invalid config")
        return
    # Accepted: then it is a real config that survives a YAML round trip unchanged.
    assert isinstance(data, dict)
    assert config_from_dict(yaml.safe_load(to_yaml(cfg))) == cfg


@SETTINGS
@given(text=st.text(max_size=200) | SECTIONISH.map(lambda d: yaml.safe_dump(d, allow_unicode=True)))
def test_random_yaml_text_loads_or_raises_config_error(tmp_path, text):
    path = tmp_path / "cfg.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        cfg = load_config(path)
    except ConfigError:
        return
    assert isinstance(cfg, MainConfig)
    parsed = yaml.safe_load(text)
    assert parsed is None or isinstance(parsed, dict)  # 'false', '0', a list... are refused, not read as {}


@pytest.mark.parametrize(
    "text,message",
    [
        ("train: {iterations: 5}\ntrain: {batch_size: 8}\n", "duplicate key 'train'"),
        ("[" * 3000 + "]" * 3000, "nested too deeply"),
        ("a: &a [*a]\n", "refers to itself"),
        (
            "env:\n  env_kwargs:\n    a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)),
            "expands to more than",
        ),
        ("false\n", "expected a mapping"),
        ("seed: !!python/object/apply:os.system ['true']\n", "not valid YAML"),
    ],
)
def test_hostile_yaml_is_refused_quickly(tmp_path, text, message):
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_unreadable_config_files(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00seed: 1")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(tmp_path / "bin.yaml")
    with pytest.raises(ConfigError, match="must be a str or a Path"):
        load_config(None)


OVERRIDE = st.one_of(
    st.text(max_size=30),
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from([".".join(p) for p, _ in LEAVES] + ["a..b", ".x", "env."]), KEY),
)


@SETTINGS
@given(overrides=st.lists(OVERRIDE, max_size=4))
def test_random_overrides_apply_or_raise_config_error(overrides):
    base = MainConfig()
    try:
        cfg = apply_overrides(base, overrides)
    except ConfigError:
        assert base == MainConfig()  # the input config is never modified
        return
    assert config_from_dict(cfg.model_dump()) == cfg


@pytest.mark.parametrize("bad", ["train.iterations=3", None, 5, {"a": 1}])
def test_overrides_must_be_a_list_of_strings(bad):
    with pytest.raises(ConfigError, match="must be a list of key.path=value strings|must look like"):
        apply_overrides(MainConfig(), bad if bad != {"a": 1} else [bad])


@SETTINGS
@given(name=st.one_of(KEY, st.integers(), st.none()))
def test_unknown_preset_is_a_config_error_and_a_key_error(name):
    assume(name not in list_presets())
    with pytest.raises(UnknownNameError) as err:
        load_preset(name)
    assert isinstance(err.value, KeyError) and isinstance(err.value, ConfigError)
    assert str(err.value).startswith("unknown preset") and "Presets:" in str(err.value)


@SETTINGS
@given(leaf=st.sampled_from(ALGORITHM_LEAVES), other=st.sampled_from(["ppo", "sac", "dqn"]))
def test_an_algorithms_setting_is_refused_by_the_others(leaf, other):
    path, info = leaf
    model = policy_config_classes()[other]
    assume(path[1] not in model.model_fields)
    default = info.get_default(call_default_factory=True)
    with pytest.raises(ConfigError) as err:
        config_from_dict({"policy": {"type": other, path[1]: default}})
    text = str(err.value)
    assert f"unknown {model.__name__} key {path[1]!r}" in text
    owners = text.split("is a setting of policy.type ", 1)[1].split(", not of", 1)[0]  # 'a2c', 'ppo' own gae_lambda
    assert repr(POLICY_TYPE[path]) in owners.split(", ")
    with pytest.raises(UnknownKeyError):
        setattr(config_from_dict({"policy": {"type": other}}).policy, path[1], default)
