"""Scale-out: cluster.yaml passes Ray's own validation; on a real multi-node local Ray cluster,
runners land where their resource is, a lost node's candidates are measured elsewhere, and a
4-trial sweep completes.

The multi-node checks run in one subprocess (`tests/cluster_scenarios.py`): a
`ray.cluster_utils.Cluster` needs its own `ray.init`, which cannot share this process with the
session's local Ray, so this file stays green in any test order.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hiertune.errors import HiertuneError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cluster_run() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "cluster_scenarios.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_runners_land_on_the_node_with_their_resource(cluster_run):
    nodes = cluster_run["nodes"]
    assert cluster_run["placement"]["gpu_runner_nodes"] == [nodes["c"]]  # the node declaring a GPU
    assert cluster_run["placement"]["edgetpu_node"] == nodes["b"]  # the node declaring edgetpu
    # one CPU runner per node with CPUs; never on the CPU-less head
    assert cluster_run["cpu_pool"]["cpu_runner_nodes"] == sorted([nodes["a"], nodes["b"], nodes["c"]])


def test_a_removed_nodes_pending_candidates_are_measured_elsewhere(cluster_run):
    loss = cluster_run["cpu_pool"]["node_loss"]
    assert loss["removed_node"] in (cluster_run["nodes"]["a"], cluster_run["nodes"]["b"], cluster_run["nodes"]["c"])
    assert loss["in_flight_on_removed"] >= 1
    assert loss["count"] == 6 and all(loss["ok"]), loss["errors"]  # every candidate, with a result
    assert loss["results_per_node"] == 6  # exactly once: no candidate measured into two results
    assert loss["requeued"] >= 1 and loss["lost_runners"] == 1
    assert 1 <= loss["remeasured_elsewhere"] <= loss["requeued"]  # measured on a node still there
    # nothing started on the removed node after it was taken away. A runner executes one call at
    # a time, so of its calls in flight at most the one already running can still return a result
    # measured there (it may finish while the node is being removed); the queued one never does.
    assert 0 <= loss["measured_on_removed"] - loss["measured_there_before"] <= 1
    assert loss["measured_on_removed"] - loss["measured_there_before"] < loss["in_flight_on_removed"]
    assert loss["runners_after"] == 2


def test_a_killed_runner_is_replaced_and_its_candidates_measured(cluster_run):
    kill = cluster_run["cpu_pool"]["runner_kill"]
    assert kill["count"] == 4 and all(kill["ok"]), kill["errors"]
    assert kill["killed_in_flight"] == 2  # one call running, one not started: it must come back
    assert kill["requeued"] >= 1 and kill["replaced"] == 1
    assert kill["runners_after"] == 2 and kill["killed_node"] in kill["replacement_on"]


def test_a_four_trial_incilp_sweep_completes_on_the_cluster(cluster_run):
    sweep = cluster_run["sweep"]
    assert sweep["code"] == 0 and sweep["trials"] == 4 and sweep["statuses"] == ["ok"] * 4
    assert sweep["reached"]["inf"] is True  # gamma = inf is the exact ILP: it must score as optimal
    assert sweep["best_reached"] is True  # a sub-optimal gamma never wins, however fast
    assert sweep["png"] and sweep["seconds"] < 60


# ---------------------------------------------------------------- cluster.yaml (offline)
def _prepared(path: Path) -> dict:
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load(path.read_text())
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_cluster_yaml_passes_rays_validation():
    prepared = _prepared(ROOT / "cluster.yaml")
    assert prepared["provider"]["type"] == "local"
    raw = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    assert "available_node_types" not in raw  # the local provider fills them in from the IPs
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):  # each host declares its own
        assert "cluster_entry --ray-start-args" in raw[key][-1]
        assert "RAY_AUTH_MODE=token" in raw[key][-1]  # no node admits a client without the token
    assert raw["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"  # the launcher's token, to every host
    setup = raw["setup_commands"]
    assert any("torch==2.13.0" in c for c in setup)
    torch_at = next(i for i, c in enumerate(setup) if "torch==2.13.0" in c)
    project_at = next(i for i, c in enumerate(setup) if "pip install -e" in c)
    assert torch_at < project_at  # torch first: a looser torch pulls a multi-GB CUDA build
    assert any(remote.endswith("hiertune") for remote in raw["file_mounts"])


def test_cloud_example_is_valid_yaml_naming_a_cloud_provider():
    raw = yaml.safe_load((ROOT / "cluster.cloud-example.yaml").read_text())
    assert raw["provider"]["type"] in ("aws", "gcp", "azure")
    types = raw["available_node_types"]
    assert any(t.get("resources", {}).get("GPU") for t in types.values())


def test_ray_start_args_declare_what_a_host_holds_in_flags_ray_start_accepts(tmp_path):
    from ray.scripts.scripts import start

    from hiertune.cluster_entry import edgetpu_count, ray_start_args

    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "apex_0").write_text("")  # a PCIe Coral
    for name, ids in {"1-1": ("18d1", "9302"), "1-2": ("1a6e", "089a"), "1-3": ("046d", "c52b")}.items():
        (tmp_path / "usb" / name).mkdir(parents=True)
        (tmp_path / "usb" / name / "idVendor").write_text(ids[0] + "\n")
        (tmp_path / "usb" / name / "idProduct").write_text(ids[1] + "\n")
    assert edgetpu_count(str(tmp_path / "dev"), str(tmp_path / "usb")) == 3  # the mouse is not a TPU
    assert ray_start_args(edgetpus=0, gpus=0, gurobi=False) == []  # a plain CPU host
    flags = ray_start_args(edgetpus=2, gpus=1, gurobi=True)
    assert flags == ['--resources={"edgetpu":2,"gurobi":1}', "--num-gpus=1"]
    context = start.make_context("start", ["--address=10.0.0.10:6379", *flags])  # Ray's own parser
    assert json.loads(context.params["resources"]) == {"edgetpu": 2, "gurobi": 1}
    assert context.params["num_gpus"] == 1


def test_ray_start_args_flags_override_the_hardware_probe():
    def start_args(*flags: str) -> str:
        proc = subprocess.run([sys.executable, str(ROOT / "hiertune" / "cluster_entry.py"), "--ray-start-args", *flags],
                              capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert start_args("--edgetpu", "2", "--gpus", "0", "--gurobi", "0") == '--resources={"edgetpu":2}'
    assert start_args("--edgetpu", "0", "--gpus", "1", "--gurobi", "1") == '--resources={"gurobi":1} --num-gpus=1'


def test_cluster_entry_dispatches_to_the_cli_without_a_cluster():
    proc = subprocess.run([sys.executable, str(ROOT / "hiertune" / "cluster_entry.py"), "--help"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and "sweep" in proc.stdout


# ---------------------------------------------------------------- sweep arguments (no Ray)
def test_sweep_params_parse_and_bad_ones_name_the_fix():
    from hiertune.platform.sweeps import SweepConfig, parse_param

    spec = parse_param("harl", "c=0.1,0.25")
    assert spec.values == [0.1, 0.25]
    assert parse_param("harl", "tau=64:256").kind is int
    assert parse_param("incilp", "gamma=0,5,inf").values[-1] == float("inf")
    with pytest.raises(HiertuneError, match="incilp parameter"):
        parse_param("harl", "gamma=1,2")
    with pytest.raises(HiertuneError, match="not a harl parameter"):
        parse_param("harl", "speed=1")
    with pytest.raises(HiertuneError, match="not a number"):
        parse_param("harl", "c=abc")
    with pytest.raises(HiertuneError, match="whole number"):
        parse_param("harl", "tau=1.5")
    with pytest.raises(HiertuneError, match="rho"):
        parse_param("harl", "rho=1.5")
    with pytest.raises(HiertuneError, match="grid search needs values"):
        SweepConfig("harl", [parse_param("harl", "c=0.1:0.5")], search="grid").validate()
    with pytest.raises(HiertuneError, match="--model"):
        SweepConfig("incilp", [parse_param("incilp", "gamma=1")]).validate()


# ---------------------------------------------------------------- pool errors (session Ray, no actors)
def test_pool_that_cannot_be_placed_errors_at_once_naming_the_fix(ray_session):
    import time

    from hiertune.errors import ResourceUnavailableError
    from hiertune.platform.runner_pool import create_pool
    from hiertune.platform.runners import RunnerConfig

    start = time.monotonic()
    with pytest.raises(ResourceUnavailableError, match="lower --runners"):
        create_pool(RunnerConfig(num_cpus=1), num_runners=64)
    with pytest.raises(ResourceUnavailableError, match="GPU"):
        create_pool(RunnerConfig(target="cuda", device="gpu"))
    with pytest.raises(HiertuneError, match="--runners must be >= 1"):
        create_pool(RunnerConfig(), num_runners=0)
    assert time.monotonic() - start < 10


def test_a_client_without_the_token_is_refused_with_one_line_naming_the_fix(ray_session, tmp_path):
    """The session's own Ray runs with token auth like every hiertune Ray; a client whose home
    holds no token (and no RAY_AUTH_TOKEN) cannot join it."""
    address = ray_session.get_runtime_context().gcs_address
    code = ("from hiertune.platform.ray_runtime import RayConfig, init_ray\n"
            f"init_ray(RayConfig(address={address!r}))\nprint('JOINED')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_TOKEN")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT), RAY_AUTH_MODE="token")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "JOINED" not in proc.stdout and proc.returncode != 0
    assert "HiertuneError: joining the Ray cluster" in proc.stderr and "auth_token" in proc.stderr


def test_a_fresh_home_starts_a_local_token_ray_even_when_ray_was_imported_first(tmp_path):
    """A new machine has no ~/.ray/auth_token, and a library may import Ray before hiertune sets
    token mode: the local start still works and leaves an owner-only token behind."""
    code = ("import ray\n"  # imported before RAY_AUTH_MODE is set, as transformers or onnxscript may
            "from hiertune.platform.ray_runtime import RayConfig, init_ray\n"
            "init_ray(RayConfig(num_cpus=1))\n"
            "print('CPUS', ray.get(ray.remote(lambda: ray.cluster_resources()['CPU']).remote()))\n"
            "ray.shutdown()")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "CPUS 1.0" in proc.stdout, proc.stderr[-3000:]
    token = tmp_path / ".ray" / "auth_token"
    assert token.is_file() and token.stat().st_mode & 0o777 == 0o600
