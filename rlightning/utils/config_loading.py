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
    ConfigError,
    MainConfig,
    UnknownNameError,
    _raise_config_error,
    _unknown_key_message,
)
from rlightning.utils.registry import closest


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


def config_from_dict(data: Dict[str, Any], source: str = "from dict") -> MainConfig:
    """Validate a plain dict into a `MainConfig`.

    Raises:
        ConfigError: not a dict, unknown keys or invalid values, each named with its dotted path.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"invalid config {source}: expected a mapping at the top level, got {type(data).__name__}")
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
    seen = set()
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
        seen.add(dotted)
        node: Any = data
        model: Any = MainConfig
        for i, part in enumerate(path):
            fields = getattr(model, "model_fields", None)
            if fields is None or not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {'.'.join(path[:i])} is not a section, it has no key {part!r}")
            if part not in fields:
                raise ConfigError(f"override {item!r}: {_unknown_key_message(model, part)}")
            if i == len(path) - 1:
                node[part] = value
            else:
                node = node[part]
                model = fields[part].annotation
    return config_from_dict(data, source="after overrides")


def to_yaml(cfg: BaseModel) -> str:
    """Dump a config to YAML text that `load_config` reads back."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
