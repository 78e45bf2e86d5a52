"""Entry point for `ray submit`: join the running cluster, then run a hiertune command on it.

    ray submit cluster.yaml hiertune/cluster_entry.py -- tune --workload GMM-L --trials 1000
    ray submit cluster.yaml hiertune/cluster_entry.py -- partition --model resnet152 --stages 6
    ray submit cluster.yaml hiertune/cluster_entry.py -- sweep incilp --model xception --param gamma=0,5,10

`ray submit` copies this file to the head and runs it with the head's python, so it must work as
a plain script as well as `python -m hiertune.cluster_entry`. Ray is joined first
(`address="auto"`, with the cluster's token: RAY_AUTH_MODE=token), so every command's own
`init_ray` finds it up and runs on the whole cluster.

`--ray-start-args` (used by cluster.yaml's start commands) prints the `ray start` flags that
declare what this host holds: Edge TPUs, NVIDIA GPUs, a Gurobi licence. `--edgetpu N`,
`--gpus N` and `--gurobi 0|1` after it override the probe (a host whose devices are not
visible to it yet, or a test cluster that declares them).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# Coral Edge TPU USB ids: before the runtime loads its firmware, and after.
_EDGETPU_USB = {("1a6e", "089a"), ("18d1", "9302")}


def edgetpu_count(dev: str = "/dev", usb: str = "/sys/bus/usb/devices") -> int:
    """Coral Edge TPUs on this host: PCIe/M.2 devices (apex_*) plus USB accelerators."""
    count = len(glob.glob(os.path.join(dev, "apex_*")))
    for device in glob.glob(os.path.join(usb, "*")):
        try:
            ids = (Path(device, "idVendor").read_text().strip(), Path(device, "idProduct").read_text().strip())
        except OSError:
            continue
        count += ids in _EDGETPU_USB
    return count


def gpu_count() -> int:
    """NVIDIA GPUs that nvidia-smi lists (0 without a driver)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def gurobi_licensed() -> bool:
    """A Gurobi licence file where gurobipy looks for one."""
    candidates = [os.environ.get("GRB_LICENSE_FILE", ""), str(Path.home() / "gurobi.lic"), "/opt/gurobi/gurobi.lic"]
    return any(c and Path(c).is_file() for c in candidates)


def ray_start_args(edgetpus: int | None = None, gpus: int | None = None, gurobi: bool | None = None) -> list[str]:
    """`ray start` flags for this host's resources (None: detect); no spaces inside a flag, so
    the output is safe unquoted in cluster.yaml's `$(...)`."""
    edgetpus = edgetpu_count() if edgetpus is None else edgetpus
    gpus = gpu_count() if gpus is None else gpus
    gurobi = gurobi_licensed() if gurobi is None else gurobi
    resources: dict[str, int] = {}
    if edgetpus > 0:
        resources["edgetpu"] = edgetpus
    if gurobi:
        resources["gurobi"] = 1
    args = [f"--resources={json.dumps(resources, separators=(',', ':'))}"] if resources else []
    if gpus > 0:
        args.append(f"--num-gpus={gpus}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:  # `ray submit ... -- tune ...` may pass the separator through
        args = args[1:]
    if args[:1] == ["--ray-start-args"]:
        probe = argparse.ArgumentParser(prog="cluster_entry --ray-start-args")
        probe.add_argument("--edgetpu", type=int, default=None, help="Edge TPUs (default: probed)")
        probe.add_argument("--gpus", type=int, default=None, help="NVIDIA GPUs (default: nvidia-smi -L)")
        probe.add_argument("--gurobi", type=int, choices=(0, 1), default=None, help="a Gurobi licence (default: probed)")
        found = probe.parse_args(args[1:])
        gurobi = None if found.gurobi is None else bool(found.gurobi)
        print(" ".join(ray_start_args(edgetpus=found.edgetpu, gpus=found.gpus, gurobi=gurobi)))
        return 0
    from hiertune.cli import main as cli_main

    if not args or args[0] in ("-h", "--help"):
        return cli_main(["--help"])
    from hiertune.platform.ray_runtime import RayConfig, init_ray

    address = os.environ.get("RAY_ADDRESS", "auto")
    resources = init_ray(RayConfig(address=address, log_to_driver=True))
    summary = ", ".join(f"{k} {v:g}" for k, v in sorted(resources.items())
                        if k in ("CPU", "GPU", "edgetpu", "gurobi"))
    print(f"hiertune on the Ray cluster at {address}: {summary}", file=sys.stderr)
    return cli_main(args)


if __name__ == "__main__":
    # Run as a file (`ray submit` puts it in the head's home, beside ~/hiertune): the script's own
    # folder must not shadow the installed package or its modules.
    sys.path.pop(0)
    sys.exit(main())
