"""Start a lean local Ray, or connect to an existing cluster (RAY_ADDRESS or an explicit address).

Ray 2.60 has no local mode; a lean single-node Ray starts in 6-7 s on two cores when the
dashboard, worker prestart and a large object store are left out.

Token authentication is on everywhere (RAY_AUTH_MODE=token): even a local node started with
node address 127.0.0.1 listens on every interface, so without a token anyone who can reach this
machine could run code in it. Ray reads the token from RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or
~/.ray/auth_token; a first local start writes the last (owner-only) when none of them exists. On a
cluster `ray up` hands the launching machine's ~/.ray/auth_token to every host (cluster.yaml's
file_mounts).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hiertune.errors import HiertuneError, ResourceUnavailableError

# Quiet, offline-friendly Ray defaults; set before ray is imported anywhere in this process.
_RAY_ENV_DEFAULTS = {
    "RAY_AUTH_MODE": "token",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
}


@dataclass
class RayConfig:
    """How to reach Ray. `address=None` means: RAY_ADDRESS if set, else start a local node."""

    address: str | None = None
    num_cpus: int | None = None
    num_gpus: int | None = None
    object_store_mb: int = 100
    resources: dict[str, float] = field(default_factory=dict)
    log_to_driver: bool = False


def apply_env_defaults() -> None:
    for key, value in _RAY_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)


def init_ray(config: RayConfig | None = None) -> dict[str, Any]:
    """Connect to or start Ray once per process; returns the cluster's resources."""
    apply_env_defaults()
    import ray

    config = config or RayConfig()
    if ray.is_initialized():
        return ray.cluster_resources()
    _reload_ray_flags()
    address = config.address or os.environ.get("RAY_ADDRESS")
    try:
        if address:
            ray.init(address=address, log_to_driver=config.log_to_driver)
        else:
            ensure_local_token()
            ray.init(
                address="local",  # a new local node, never a `ray start` cluster found by chance
                num_cpus=config.num_cpus,
                num_gpus=config.num_gpus,
                include_dashboard=False,
                log_to_driver=config.log_to_driver,
                _node_ip_address="127.0.0.1",
                object_store_memory=config.object_store_mb * 1024**2,
                resources=dict(config.resources),
                _system_config={"enable_worker_prestart": False},
            )
    except ray.exceptions.AuthenticationError:  # token mode, but no token here
        raise HiertuneError(
            f"joining the Ray cluster at {address!r} needs its token: copy the head's ~/.ray/auth_token "
            "to ~/.ray/auth_token here or set RAY_AUTH_TOKEN"
        ) from None
    except ConnectionError as err:
        raise HiertuneError(
            f"cannot reach the Ray cluster at {address!r} ({err}); start it with `ray start --head`, "
            "check that this client holds the cluster's token (a wrong one is refused like this), "
            "or unset RAY_ADDRESS to run locally"
        ) from None
    _keep_token_private()
    return ray.cluster_resources()


def _reload_ray_flags() -> None:
    """Make Ray's process-wide flags see RAY_AUTH_MODE as set now.

    Ray reads its flags once, when it is first imported: a library that imported Ray before
    `apply_env_defaults` (transformers and onnxscript may) leaves this process in 'disabled'
    mode while the nodes it starts read 'token', and every call is then refused. Ray's own
    `ray.init` re-reads them the same way when it turns token mode on.
    """
    from ray._raylet import Config

    Config.initialize("")


def ensure_local_token() -> None:
    """The default token file in token mode, where no token is set up yet: call it before
    starting a new local node (never before joining a cluster, whose token it would not be).

    Ray generates one itself only inside `ray.init` and only when it saw token mode at import
    time; a node started otherwise (a test cluster, a process that imported Ray before
    `apply_env_defaults`) would start a GCS that finds no token and dies.
    """
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    token = Path.home() / ".ray" / "auth_token"
    if token.is_file():
        return
    token.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))


def _keep_token_private() -> None:
    """Ray writes ~/.ray/auth_token with the umask's mode (often world-readable): owner only."""
    token = Path.home() / ".ray" / "auth_token"
    if token.is_file() and token.stat().st_mode & 0o077:
        token.chmod(0o600)


def require_resource(name: str, amount: float = 1.0, *, what: str = "this actor") -> None:
    """Fail at once, naming the fix, when no node of the cluster declares a resource.

    An actor asking for a resource nobody has would otherwise wait forever without a word.
    """
    import ray

    total = ray.cluster_resources().get(name, 0.0)
    if total < amount:
        hint = {
            "GPU": "run on a node with a GPU (ray start --num-gpus=1) or use --target llvm",
            "edgetpu": "declare it on the Edge TPU host: ray start ... --resources='{\"edgetpu\": 1}'",
        }.get(name, f"declare it with ray start --resources='{{\"{name}\": 1}}'")
        raise ResourceUnavailableError(
            f"{what} needs {amount:g} {name!r} but the cluster has {total:g}; {hint}"
        )
