"""Typed engine configs as files: nested dataclasses to and from JSON/TOML, and each field's doc.

An engine has one config dataclass whose sections are dataclasses too (`HarlConfig.episode`,
`HarlConfig.ppo`, ...). The CLI shows a few fields as flags and takes the rest from `--config FILE`;
`--save-config` writes the resolved config back, so a run can be repeated exactly. A field's doc
is the string literal under it (Stable-Baselines3 style) or, failing that, its trailing comment:
the CLI's help text is read from there, so every default and its meaning live in one place.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import textwrap
import tomllib
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from hiertune.errors import HiertuneError

C = TypeVar("C")


@cache
def field_docs(cls: type) -> dict[str, str]:
    """{field name: one-line doc} of a dataclass, from its source."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    source = textwrap.dedent("".join(lines))
    body = ast.parse(source).body[0].body
    docs: dict[str, str] = {}
    for i, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        after = body[i + 1] if i + 1 < len(body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            docs[name] = " ".join(after.value.value.split())
            continue
        line = source.splitlines()[node.end_lineno - 1]
        if "#" in line:
            docs[name] = line.split("#", 1)[1].strip()
    return docs


def to_dict(config: Any) -> dict[str, Any]:
    """The config as plain JSON values (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def from_dict(cls: type[C], data: dict[str, Any], where: str = "config") -> C:
    """A `cls` from (possibly partial) nested data; unknown keys are an error naming the key."""
    if not isinstance(data, dict):
        raise HiertuneError(f"{where}: expected a table of settings, got {type(data).__name__}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise HiertuneError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(fields)}")
    values: dict[str, Any] = {}
    for name, value in data.items():
        kind = hints[name]
        if dataclasses.is_dataclass(kind):
            values[name] = from_dict(kind, value, f"{where}.{name}")
        elif isinstance(value, list):
            values[name] = tuple(value)
        else:
            values[name] = value
    return cls(**values)


def load_config(cls: type[C], path: str | Path) -> C:
    """A config from a JSON or TOML file (by suffix); a missing or malformed file names the fix."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise HiertuneError(f"--config {path}: cannot read it ({err.strerror})") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as err:
        kind = "TOML" if path.suffix == ".toml" else "JSON (use a .toml suffix for TOML)"
        raise HiertuneError(f"--config {path} is not valid {kind}: {err}") from None
    return from_dict(cls, data, f"--config {path}")


def save_config(config: Any, path: str | Path) -> Path:
    """Write the resolved config as JSON (every field, sections nested)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_dict(config), indent=2) + "\n")
    return path


def replace_path(config: C, dotted: str, value: Any) -> C:
    """A copy of `config` with `section.field` (or a top-level `field`) set to `value`."""
    head, _, rest = dotted.partition(".")
    if rest:
        return dataclasses.replace(config, **{head: replace_path(getattr(config, head), rest, value)})
    return dataclasses.replace(config, **{head: value})


def with_overrides(config: C, overrides: dict[str, Any]) -> C:
    """`replace_path` for each `section.field: value` of `overrides`, in order."""
    for dotted, value in overrides.items():
        config = replace_path(config, dotted, value)
    return config
