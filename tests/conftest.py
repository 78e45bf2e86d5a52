"""Shared fixtures: one lean local Ray per test session (Ray 2.60 has no local mode)."""

from __future__ import annotations

import os

import pytest

from hiertune.platform.ray_runtime import RayConfig, apply_env_defaults, init_ray

apply_env_defaults()
os.environ.setdefault("TVM_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with 2 CPUs and one declared `edgetpu` (or the cluster at RAY_ADDRESS)."""
    import ray

    init_ray(RayConfig(num_cpus=2, resources={"edgetpu": 1}))
    yield ray
    ray.shutdown()
