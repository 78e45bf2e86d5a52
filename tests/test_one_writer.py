"""One writer per records file, one measuring Ray instance per host: the second run is refused
at once with one line naming the holder, in real separate processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import hold_in_subprocess


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hiertune.cli", *args], env=env, capture_output=True,
                          text=True, timeout=240)


@pytest.fixture
def unshared_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("HIERTUNE_SHARED_CORES", None)  # the suite shares cores on purpose; these runs must not
    env.pop("RAY_ADDRESS", None)
    return env


def test_a_second_writer_of_a_records_file_is_refused_naming_the_holder(tmp_path, unshared_env):
    records = tmp_path / "same.jsonl"
    setup = f"from hiertune.platform.records import RecordStore; store = RecordStore({str(records)!r})"
    first = hold_in_subprocess(setup, unshared_env)
    try:
        second = _cli(["tune", "--workload", "GMM-S", "--trials", "4", "--records", str(records), "--no-ray"],
                      unshared_env)
    finally:
        first.kill()
        first.wait()
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2, second.stderr[-2000:]
    assert len(lines) == 1 and f"pid {first.pid} on host {socket.gethostname()}" in lines[0], lines
    assert not records.exists() or '"kind":"measure"' not in records.read_text()
    from hiertune.platform.records import RecordStore

    RecordStore(records)  # the holder is gone: its lock went with it, the stale .lock file is harmless


@pytest.mark.parametrize("ray", [False, True], ids=["no-ray", "ray-actor"])
def test_a_run_that_would_measure_on_held_cores_is_refused_naming_the_holder(tmp_path, unshared_env, ray):
    first = hold_in_subprocess("from hiertune.platform.core_claims import claim_cores; claim_cores()", unshared_env)
    try:
        start = time.monotonic()
        second = _cli(["baseline", "--workload", "GMM-S", "--trials", "4", "--records",
                       str(tmp_path / "other.jsonl"), *([] if ray else ["--no-ray"])], unshared_env)
        elapsed = time.monotonic() - start
    finally:
        first.kill()
        first.wait()
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2, second.stderr[-3000:]
    assert f"pid {first.pid}" in lines[-1] and socket.gethostname() in lines[-1], lines[-3:]
    assert "another hiertune run" in lines[-1] and elapsed < 120
    assert not Path(tmp_path / "other.jsonl").exists() or '"kind":"measure"' not in (tmp_path / "other.jsonl").read_text()
