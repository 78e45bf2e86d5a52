"""Shared fixtures: one lean local Ray per test session (Ray 2.60 has no local mode), and the
bench scripts as modules."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hiertune.platform.ray_runtime import RayConfig, apply_env_defaults, init_ray

apply_env_defaults()
os.environ.setdefault("TVM_NUM_THREADS", "1")
# The suite runs several Ray instances side by side (the session's, a test cluster's, CLI
# subprocesses'); tests/test_one_writer.py checks the refusal with this unset.
os.environ.setdefault("HIERTUNE_SHARED_CORES", "1")

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"


def _import_bench(name: str) -> ModuleType:
    if str(BENCH_DIR) not in sys.path:  # as when run as a script: its siblings (summary_stats) import
        sys.path.insert(0, str(BENCH_DIR))
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_bench():
    """`load_bench("incilp_vs_exact")`: a bench script imported as a module (bench/ is not a
    package), so tests can check the functions its published numbers come from."""
    return _import_bench


HOLD = """
import sys, time
{setup}
print("holding", flush=True)
time.sleep({seconds})
"""


def hold_in_subprocess(setup: str, env: dict[str, str] | None = None, seconds: int = 120) -> subprocess.Popen:
    """A separate process that runs `setup` (taking a lock, say) and keeps it until killed or `seconds` pass."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD.format(setup=setup, seconds=seconds)], env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "holding"
    return proc


def harl_config(**settings):
    """A HarlConfig from flat names (`tracks=4`, `epsilon=0.0`), each looked up in the config's
    sections, so tests read as short as the knobs they set (`from conftest import harl_config`)."""
    import dataclasses

    from hiertune.configs import with_overrides
    from hiertune.platform.harl_search import HarlConfig

    config = HarlConfig()
    paths = {f.name: f.name for f in dataclasses.fields(config) if not dataclasses.is_dataclass(getattr(config, f.name))}
    for section in dataclasses.fields(config):
        value = getattr(config, section.name)
        if dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):  # a name in two places means the first (seed: the run's)
                paths.setdefault(f.name, f"{section.name}.{f.name}")
    unknown = set(settings) - set(paths)
    assert not unknown, f"no HarlConfig setting {unknown}"
    return with_overrides(config, {paths[name]: value for name, value in settings.items()})


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with 2 CPUs and one declared `edgetpu` (or the cluster at RAY_ADDRESS)."""
    import ray

    init_ray(RayConfig(num_cpus=2, resources={"edgetpu": 1}))
    yield ray
    ray.shutdown()


CONVS_MODEL = """
import torch
from torch import nn


def convs():
    torch.manual_seed(3)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8), nn.ReLU(),  # depthwise
                        nn.Conv2d(8, 4, 1), nn.Flatten(), nn.Linear(4 * 4 * 4, 2))
    return net.eval(), (torch.randn(1, 3, 8, 8),)
"""


@pytest.fixture(scope="session")
def convs_model(tmp_path_factory):
    """`--model` spec of a torch file with a plain 3x3 conv (+ batch norm), a strided depthwise
    conv and a 1x1 conv: what a CPU layout change must keep correct and tell apart."""
    path = tmp_path_factory.mktemp("convs") / "convs.py"
    path.write_text(CONVS_MODEL)
    return f"{path}:convs"



def record_roundtrip(space, state, target):
    """A schedule state through a record and MetaSchedule's database, as `hiertune compile` reads
    it: the record maps back to the same state, and the database, queried with the task's own
    program, replays the same scheduled program. Returns the state read back from the record."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    record = space.tuning_record(state, [1e-4])
    back = space.state_from_record(record.as_json())
    assert back is not None and back.key == state.key and back.parallel_extent == state.parallel_extent
    db = ms.database.MemoryDatabase()
    db.commit_workload(space.mod)
    db.commit_tuning_record(record)
    sch = db.query_schedule(space.mod, target=target, workload_name="main")
    assert sch is not None
    tvm.ir.assert_structural_equal(sch.mod, state.mod)
    return back
