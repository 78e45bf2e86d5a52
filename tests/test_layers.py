"""The package's layers only point down, the bottom layers stay free of Ray and torch, and the
CLI's defaults are the config classes' defaults."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hiertune"
# Top to bottom; a module may import its own layer and any layer below it. The utilities
# (errors, configs, plotting, resources) sit under everything.
LAYERS = [
    {"cli", "cluster_entry", "commands"},
    {"platform"},
    {"policies"},
    {"envs"},
    {"solvers", "workloads"},
    {"errors", "configs", "plotting", "resources"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def unit_of(path: Path) -> str:
    """The layer unit of a module file: its sub-package, or the top-level module's name."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else Path(parts[0]).stem


def hiertune_imports(path: Path) -> list[tuple[int, str]]:
    """(line, unit) of every hiertune import in a file, in-function imports included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "hiertune" and len(parts) > 1 and parts[1] in RANK:
                found.add((node.lineno, parts[1]))
    return sorted(found)


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if unit_of(p) != "__init__" and "data" not in p.parts)


def test_every_unit_has_a_layer() -> None:
    assert {unit_of(p) for p in modules()} <= set(RANK), "a new package needs its place in LAYERS"


def test_imports_only_point_down() -> None:
    upward = []
    for path in modules():
        here = unit_of(path)
        for line, there in hiertune_imports(path):
            if RANK[there] < RANK[here]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({here}) imports {there}")
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_no_cycle_between_units() -> None:
    edges = {unit_of(p): set() for p in modules()}
    for path in modules():
        edges[unit_of(path)] |= {there for _, there in hiertune_imports(path) if there != unit_of(path)}
    visiting, done = set(), set()

    def visit(unit: str, trail: list[str]) -> None:
        assert unit not in visiting, "import cycle: " + " -> ".join(trail + [unit])
        if unit in done:
            return
        visiting.add(unit)
        for nxt in sorted(edges.get(unit, ())):
            visit(nxt, trail + [unit])
        visiting.discard(unit)
        done.add(unit)

    for unit in sorted(edges):
        visit(unit, [])


@pytest.mark.parametrize("package", ["hiertune.solvers", "hiertune.workloads"])
def test_bottom_layers_import_neither_ray_nor_torch(package: str) -> None:
    code = f"import sys, {package}; print(sorted(m for m in ('ray', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_tune_flags_take_their_defaults_from_harl_config(tmp_path) -> None:
    from hiertune.cli import build_parser
    from hiertune.commands.config_args import config_from_args, field_default
    from hiertune.commands.tune import TUNE_FLAGS
    from hiertune.configs import load_config, to_dict
    from hiertune.platform.harl_search import HarlConfig

    parser = build_parser("tune")
    args = parser.parse_args(["tune", "--workload", "GMM-S"])
    for flag, dotted in TUNE_FLAGS.items():
        assert getattr(args, "cfg_" + flag.replace("-", "_")) == field_default(HarlConfig, dotted)[0], flag
    assert to_dict(config_from_args(args, HarlConfig)) == to_dict(HarlConfig())
    # --save-config then --config reproduces every field; a flag given on the line beats the file
    saved = tmp_path / "harl.json"
    args = parser.parse_args(["tune", "--workload", "GMM-S", "--tracks", "5", "--ablation", "paper",
                              "--save-config", str(saved)])
    first = config_from_args(args, HarlConfig, {"episode.start_pool": 1})
    assert first.episode.tracks == 5 and first.episode.start_pool == 1
    again = config_from_args(parser.parse_args(["tune", "--workload", "GMM-S", "--config", str(saved)]), HarlConfig)
    assert to_dict(again) == to_dict(first) == to_dict(load_config(HarlConfig, saved))
    toml = tmp_path / "harl.toml"
    toml.write_text("trials = 9\n[episode]\ntracks = 3\nmin_tracks = 1\n")
    from_toml = config_from_args(parser.parse_args(["tune", "--workload", "GMM-S", "--config", str(toml),
                                                    "--trials", "64"]), HarlConfig)
    assert (from_toml.trials, from_toml.episode.tracks) == (64, 3)  # the explicit flag wins


def test_tune_shows_few_options_of_its_own() -> None:
    from hiertune.cli import build_parser

    sub = next(a for a in build_parser("tune")._actions if a.dest == "command")
    own = [a for a in sub.choices["tune"]._actions if a.option_strings and a.dest != "help"]
    shared = {"target", "records", "runner_cores", "cache_flush", "runners", "ray_address", "no_ray", "workload",
              "network", "model", "input_shape", "input_dtype", "seq_len"}
    assert len([a for a in own if a.dest not in shared]) <= 15


def test_bad_config_file_names_the_setting(tmp_path) -> None:
    from hiertune.configs import load_config
    from hiertune.errors import HiertuneError
    from hiertune.platform.harl_search import HarlConfig

    bad = tmp_path / "bad.json"
    bad.write_text('{"episode": {"trackz": 3}}')
    with pytest.raises(HiertuneError, match="episode.*trackz"):
        load_config(HarlConfig, bad)
    bad.write_text("{not json")
    with pytest.raises(HiertuneError, match="not valid JSON"):
        load_config(HarlConfig, bad)


def test_partition_flags_take_their_defaults_from_incilp_config() -> None:
    from hiertune.cli import build_parser
    from hiertune.solvers.incilp import IncIlpConfig

    args = build_parser("partition").parse_args(["partition", "--model", "vgg16"])
    config = IncIlpConfig()
    assert (args.gamma, args.initial, args.window, args.rounds, args.widen, not args.no_refine_cuts) == (
        config.gamma, config.initial, config.window, config.rounds, config.widen, config.refine_cuts)
    assert (args.solver, args.time_limit, args.threads, args.cache_mb * 1024**2) == (
        config.ilp.solver, config.ilp.time_limit_s, config.ilp.threads, config.ilp.cache_bytes)
