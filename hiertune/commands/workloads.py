"""`hiertune workloads`: the operator names `--workload` accepts and the built-in `--model` networks."""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--flops", action="store_true", help="also compute each operator's FLOPs")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hiertune.workloads import BUILTIN_NETWORKS, list_workloads
    from hiertune.workloads.operators import operator_task
    from hiertune.workloads.tvm_support import prepare_tvm

    prepare_tvm()
    table = Table(title="workloads")
    table.add_column("name")
    table.add_column("kind")
    table.add_column("MFLOP", justify="right")
    for name in list_workloads():
        network = name in BUILTIN_NETWORKS
        mflop = "" if network or not args.flops else f"{operator_task(name).flops / 1e6:.1f}"
        table.add_row(name, "network" if network else "operator", mflop)
    Console().print(table)
    return 0
