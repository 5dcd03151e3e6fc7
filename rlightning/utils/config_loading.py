"""Reading and writing configs: YAML files and text, packaged presets, dotted overrides.

Part of `rlightning.utils.config` (which re-exports every public name here).
YAML goes through a safe loader that rejects duplicate keys and alias bombs;
every failure is a `ConfigError` naming what was wrong.
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any, Dict, List, Sequence, Union

import yaml
from pydantic import BaseModel, ValidationError

from rlightning.utils.config import (
    DEFAULT_POLICY_TYPE,
    ConfigError,
    MainConfig,
    PolicyConfig,
    UnknownNameError,
    _raise_config_error,
    _unknown_key_message,
    policy_config_class,
)
from rlightning.utils.logger import get_logger
from rlightning.utils.registry import closest

logger = get_logger(__name__)


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping (the second would silently win)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable key: construct_mapping reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (the second one would silently win)", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


#: Most values a YAML document may expand to once its aliases are followed (a "billion laughs" guard).
MAX_YAML_VALUES = 1_000_000


def _expanded_size(value: Any, sizes: Dict[int, int], active: set) -> int:
    """Values in ``value`` counting every alias expansion; shared subtrees are measured once (memo by id)."""
    if not isinstance(value, (dict, list)):
        return 1
    key = id(value)
    if key in sizes:
        return sizes[key]
    if key in active:
        raise ConfigError("it refers to itself through an alias (a cycle)")
    active.add(key)
    items = list(value.keys()) + list(value.values()) if isinstance(value, dict) else value
    total = 1
    for item in items:
        total += _expanded_size(item, sizes, active)
        if total > MAX_YAML_VALUES:
            break
    active.discard(key)
    sizes[key] = total
    return total


def _parse_yaml(text: str, what: str) -> Any:
    """YAML text to Python objects; every way it can fail becomes a `ConfigError`."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
        size = _expanded_size(data, {}, set())
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} is not valid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply to read") from None
    except ConfigError as err:
        raise ConfigError(f"{what}: {err}") from None
    if size > MAX_YAML_VALUES:
        raise ConfigError(f"{what} expands to more than {MAX_YAML_VALUES} values through its aliases")
    return data


#: The policy settings of the one flat ``PolicyConfig`` of rlightning before per-algorithm configs.
LEGACY_POLICY_FIELDS = frozenset(
    "gae_lambda clip_coef clip_vloss ent_coef vf_coef update_epochs num_minibatches norm_adv target_kl "
    "tau alpha autotune_alpha target_entropy q_lr policy_frequency epsilon_start epsilon_end "
    "epsilon_decay_steps".split()
)


def _drop_legacy_policy_fields(data: Dict[str, Any], source: str) -> Dict[str, Any]:
    """A config written before per-algorithm configs lists every algorithm's settings in ``policy``:
    drop the ones its type's config does not have (logged), so that it loads."""
    policy = data.get("policy")
    if not isinstance(policy, dict):
        return data
    try:
        target = policy_config_class(policy.get("type", DEFAULT_POLICY_TYPE))
    except ConfigError:
        return data  # validation names the unknown type
    dropped = sorted(k for k in policy if k in LEGACY_POLICY_FIELDS and k not in target.model_fields)
    if not dropped:
        return data
    logger.warning(
        "config %s was written by an older rlightning (one flat policy config); ignoring %s, which %s "
        "(policy.type %r) does not have",
        source,
        ", ".join(dropped),
        target.__name__,
        policy.get("type", DEFAULT_POLICY_TYPE),
    )
    data = dict(data)
    data["policy"] = {k: v for k, v in policy.items() if k not in dropped}
    return data


def config_from_dict(data: Dict[str, Any], source: str = "from dict", legacy: bool = False) -> MainConfig:
    """Validate a plain dict into a `MainConfig`.

    Args:
        data: The config as plain data (a parsed YAML file).
        source: Where it came from, for error messages.
        legacy: Also accept a config written by an older rlightning, whose ``policy`` section lists the
            settings of every algorithm: those of other algorithms are dropped with a warning
            (checkpoints are read this way).

    Raises:
        ConfigError: not a dict, unknown keys or invalid values, each named with its dotted path.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"invalid config {source}: expected a mapping at the top level, got {type(data).__name__}")
    if legacy:
        data = _drop_legacy_policy_fields(data, source)
    try:
        return MainConfig.model_validate(data)
    except ValidationError as err:
        _raise_config_error(err, source)
    except RecursionError:
        raise ConfigError(f"invalid config {source}: nested too deeply") from None


def load_config(path: Union[str, Path]) -> MainConfig:
    """Load a `MainConfig` from a YAML file.

    Raises:
        ConfigError: the file is missing or unreadable, is not YAML (or has a key twice), or does not validate.
    """
    if not isinstance(path, (str, Path)):
        raise ConfigError(f"a config path must be a str or a Path, got {type(path).__name__}")
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"config file {str(p)!r} is a directory; give the path of a YAML file")
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text: {err}") from None
    except OSError as err:
        raise ConfigError(f"config file {str(p)!r} cannot be read: {err}") from None
    data = _parse_yaml(text, f"config file {str(p)!r}")
    return config_from_dict({} if data is None else data, source=f"in {p.name}")


def list_presets() -> List[str]:
    """Names of the packaged presets."""
    folder = resources.files("rlightning") / "presets"
    return sorted(f.name[: -len(".yaml")] for f in folder.iterdir() if f.name.endswith(".yaml"))


def load_preset(name: str) -> MainConfig:
    """Load a packaged preset by name (see `list_presets`).

    Raises:
        UnknownNameError: unknown preset (a `ConfigError` and a ``KeyError``); the message lists the presets.
    """
    names = list_presets()
    if not isinstance(name, str) or name not in names:
        near = closest(name, names, n=1) if isinstance(name, str) else []
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise UnknownNameError(f"unknown preset {name!r}.{hint} Presets: {', '.join(names)}")
    text = (resources.files("rlightning") / "presets" / f"{name}.yaml").read_text()
    data = _parse_yaml(text, f"preset {name!r}")
    return config_from_dict({} if data is None else data, source=f"in preset {name!r}")


def apply_overrides(cfg: MainConfig, overrides: Sequence[str]) -> MainConfig:
    """Return a copy of ``cfg`` with dotted ``key=value`` overrides applied.

    Values are parsed as YAML (``1e-3``, ``true``, ``[64, 64]``, ``null``).

    Raises:
        ConfigError: a malformed override, an unknown key or an invalid value.
    """
    if not isinstance(cfg, MainConfig):
        raise ConfigError(f"apply_overrides needs a MainConfig, got {type(cfg).__name__}")
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, Sequence):
        raise ConfigError(
            f"overrides must be a list of key.path=value strings, got {type(overrides).__name__} {overrides!r:.60}"
        )
    data = cfg.model_dump()
    seen: Dict[str, str] = {}
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            raise ConfigError(f"override {item!r:.80} must look like key.path=value, e.g. train.iterations=50")
        key, raw = item.split("=", 1)
        path = [p.strip() for p in key.split(".")]
        if not all(path):
            raise ConfigError(f"override {item!r:.80} has an empty key part; use dotted names like policy.optim.lr")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        except RecursionError:
            raise ConfigError(f"override {item[:80]!r}: the value is nested too deeply") from None
        dotted = ".".join(path)
        if dotted in seen:  # later wins, but the value it hides must have been valid too
            config_from_dict(copy.deepcopy(data), source=f"overrides before {item[:80]!r}")
        node: Any = data
        model: Any = MainConfig
        for i, part in enumerate(path):
            fields = getattr(model, "model_fields", None)
            if fields is None or not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {'.'.join(path[:i])} is not a section, it has no key {part!r}")
            if part not in fields:
                raise ConfigError(f"override {item!r}: {_unknown_key_message(model, part)}")
            if i == len(path) - 1:
                if part == "type" and _is_policy_model(model):
                    _switch_policy_type(node, value, item, ".".join(path[:-1]), seen)
                node[part] = value
            else:
                node = node[part]
                model = _section_model(fields[part].annotation, node, item)
        seen[dotted] = item
    return config_from_dict(data, source="after overrides")


def _is_policy_model(model: Any) -> bool:
    return isinstance(model, type) and issubclass(model, PolicyConfig)


def _policy_class_for_override(type_name: Any, item: str) -> type:
    try:
        return policy_config_class(type_name)
    except UnknownNameError as err:
        raise UnknownNameError(f"override {item[:80]!r}: {err}") from None
    except ConfigError as err:
        raise ConfigError(f"override {item[:80]!r}: {err}") from None


def _section_model(annotation: Any, node: Any, item: str) -> Any:
    """The model of a section an override walks into: a policy section's is the config of its type."""
    if _is_policy_model(annotation) and isinstance(node, dict):
        return _policy_class_for_override(node.get("type", DEFAULT_POLICY_TYPE), item)
    return annotation


def _switch_policy_type(node: Dict[str, Any], new_type: Any, item: str, prefix: str, seen: Dict[str, str]) -> None:
    """``policy.type=...``: keep the settings the new type's config has, drop the others.

    Settings dropped that came from the config (a preset's PPO values when switching to SAC) are
    logged; one an earlier override set explicitly is an error, since that override would be lost.

    Raises:
        UnknownNameError: ``new_type`` is not a registered policy.
        ConfigError: an earlier override set a key the new type's config does not have.
    """
    target = _policy_class_for_override(new_type, item)
    dropped = sorted(k for k in node if k not in target.model_fields)
    for key in dropped:
        for dotted, earlier in seen.items():
            if dotted == f"{prefix}.{key}" or dotted.startswith(f"{prefix}.{key}."):
                raise ConfigError(
                    f"override {item[:80]!r}: {_unknown_key_message(target, key)} "
                    f"(set by the earlier override {earlier[:80]!r})"
                )
    if dropped:
        logger.info("%s: %s has no %s; dropped from the config", item[:80], target.__name__, ", ".join(dropped))
    for key in dropped:
        del node[key]


def to_yaml(cfg: BaseModel) -> str:
    """Dump a config to YAML text that `load_config` reads back."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
