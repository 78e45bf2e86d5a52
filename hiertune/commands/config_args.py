"""Flags that read their defaults and help from an engine's config dataclass, plus `--config FILE`
and `--save-config FILE`, so each default is written once, where the field is defined.

Precedence: the dataclass default, then the `--config` file, then the flags given on the line.
"""

from __future__ import annotations

import argparse
from typing import Any

from hiertune.configs import field_docs, load_config, save_config, with_overrides


def field_default(config: Any, dotted: str) -> tuple[Any, str]:
    """(default, doc) of `section.field` in a config dataclass, read from a default instance: a
    section's defaults are the ones its parent's factory sets, not the section class's own."""
    config = config() if isinstance(config, type) else config
    head, _, rest = dotted.partition(".")
    value = getattr(config, head)
    if rest:
        return field_default(value, rest)
    return value, field_docs(type(config)).get(head, "")


class _Explicit(argparse.Action):
    """Stores the value and remembers that the flag was given (so it beats the config file)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace._explicit_flags = getattr(namespace, "_explicit_flags", set()) | {self.dest}


def add_config_args(parser: argparse.ArgumentParser, cls: type, flags: dict[str, str]) -> None:
    """`--flag` for each `flag: section.field` of `flags`, then `--config` and `--save-config`."""
    for flag, dotted in flags.items():
        default, doc = field_default(cls, dotted)
        parser.add_argument(f"--{flag}", dest=_dest(flag), type=type(default), default=default, action=_Explicit,
                            metavar=flag.upper().replace("-", "_"), help=f"{doc} (default: {default})")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help=f"{cls.__name__} as JSON or TOML (a .toml suffix): every setting, sections nested; "
                             "flags given here override it")
    parser.add_argument("--save-config", metavar="FILE", default=None,
                        help="write the resolved config as JSON (to repeat the run with --config)")
    parser.set_defaults(_config_flags=flags)


def config_from_args(args: argparse.Namespace, cls: type, overrides: dict[str, Any] | None = None) -> Any:
    """The config: defaults, then `--config`, then `overrides` (e.g. an ablation), then given flags."""
    config = load_config(cls, args.config) if args.config else cls()
    config = with_overrides(config, overrides or {})
    given = getattr(args, "_explicit_flags", set())
    config = with_overrides(config, {dotted: getattr(args, _dest(flag))
                                     for flag, dotted in args._config_flags.items() if _dest(flag) in given})
    if args.save_config:
        save_config(config, args.save_config)
    return config


def _dest(flag: str) -> str:
    return "cfg_" + flag.replace("-", "_")
