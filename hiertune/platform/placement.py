"""Placing actors on the hardware they need: resource options per device, and placement that fails fast.

Ray queues an actor whose resources no node has forever, without a word; here a missing
resource is an error at once and an actor that cannot be placed in time is killed and reported.
"""

from __future__ import annotations

import re
from typing import Any

from hiertune.errors import HiertuneError, ResourceUnavailableError
from hiertune.platform.ray_runtime import require_resource

DEVICES = ("cpu", "gpu", "edgetpu")


def actor_options(device: str, num_cpus: float = 1.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Ray actor options that pin an actor to its device: cores for CPU, a GPU, or an Edge TPU host."""
    if device not in DEVICES:
        raise HiertuneError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    options: dict[str, Any] = {"num_cpus": num_cpus}
    if device == "gpu":
        options["num_gpus"] = 1
    elif device == "edgetpu":
        options["resources"] = {"edgetpu": 1}
    if env:
        options["runtime_env"] = {"env_vars": dict(env)}
    return options


def required_resource(device: str) -> str:
    return {"cpu": "CPU", "gpu": "GPU", "edgetpu": "edgetpu"}[device]


def start_actor(actor_class: Any, device: str, *args: Any, num_cpus: float = 1.0,
                env: dict[str, str] | None = None, timeout_s: float = 60.0, what: str = "actor",
                **kwargs: Any) -> Any:
    """Start a Ray actor on its device and wait until it is up; never waits forever.

    `actor_class` is a `ray.remote` class that has a `ready()` method.
    """
    import ray

    options = actor_options(device, num_cpus, env)
    require_resource(required_resource(device), num_cpus if device == "cpu" else 1.0, what=what)
    handle = actor_class.options(**options).remote(*args, **kwargs)
    try:
        ray.get(handle.ready.remote(), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.kill(handle)
        raise ResourceUnavailableError(
            f"{what} on {device} was not placed within {timeout_s:.0f}s: the cluster has the resource "
            "but other actors hold it; free them or add nodes"
        ) from None
    except ray.exceptions.RayActorError as err:
        raise HiertuneError(start_failure(str(err), f"{what} on {device} failed to start")) from None
    return handle


def start_failure(error: str, context: str) -> str:
    """One line for an actor that died starting: a HiertuneError raised in its constructor (it
    names the fix) as it was raised, anything else as Ray's first line."""
    raised = re.search(r"hiertune\.errors\.\w+: (.+)", error)
    return raised.group(1).strip() if raised else f"{context}: {error.splitlines()[0]}"
