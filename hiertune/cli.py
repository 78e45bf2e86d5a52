"""The `hiertune` command: one subcommand per job, each in its own module under hiertune.commands.

Command modules keep heavy imports (TVM, Ray, torch) inside `run`, and only the command being run
registers its arguments (some read their defaults from config classes that import the engines), so
`hiertune --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from hiertune.errors import HiertuneError

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("hiertune.commands.demo", "a small ONNX convnet tuned by HARL and MetaSchedule, compiled, checked, benchmarked"),
    "baseline": ("hiertune.commands.baseline", "MetaSchedule evolutionary search on a workload"),
    "tune": ("hiertune.commands.tune", "HARL search on an operator or a whole model"),
    "prior": ("hiertune.commands.prior", "a cost-model prior from earlier runs' records, for tune --cost-prior"),
    "compile": ("hiertune.commands.compile", "build a whole model with its tuning records into one library"),
    "benchmark": ("hiertune.commands.benchmark", "end-to-end latency: TVM untuned/tuned, PyTorch, ONNX Runtime"),
    "apply": ("hiertune.commands.apply", "compile one task with its best record and check it (whole models: compile)"),
    "workloads": ("hiertune.commands.workloads", "list the operator suite and networks"),
    "partition": ("hiertune.commands.partition", "Inc-ILP pipeline partition of a DNN graph"),
    "pipeline": ("hiertune.commands.pipeline", "run a partitioned TFLite model as a pipeline of Ray actors"),
    "sweep": ("hiertune.commands.sweep", "Ray Tune sweep of HARL or Inc-ILP hyper-parameters"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; with `command`, that subcommand's arguments are registered (None: all)."""
    parser = argparse.ArgumentParser(prog="hiertune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if command is None or name == command:
            module = importlib.import_module(module_name)
            module.register(command_parser)
            command_parser.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else "")
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except HiertuneError as err:
        print(f"hiertune {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.filename is None:
            raise  # not about a file the user named: keep the traceback
        print(f"hiertune {args.command}: error: {err.filename}: {err.strerror}; check the path and its "
              "permissions", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hiertune {args.command}: interrupted; records written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
