"""One measuring Ray instance per host: a runner claims the host's cores before it times anything.

Two `hiertune tune` runs started a second apart each start their own local Ray and time
candidates on the same cores, each skewing the other's latencies without a word. So every
`Measurer` takes a shared lock on its Ray instance's claim file in a per-host folder and refuses
to start while another instance (or a `--no-ray` process) holds one there; runners of one Ray
instance share a host freely, since Ray's CPU accounting keeps them on separate cores. The kernel
drops a claim when its process exits, killed or not. HIERTUNE_SHARED_CORES=1 lifts the check where
sharing is meant (the test suite runs several Ray instances side by side).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from pathlib import Path

from hiertune.errors import HiertuneError

CLAIMS_DIR = Path("/tmp/hiertune-cores")  # per host: /tmp is the host's own
SHARED_ENV = "HIERTUNE_SHARED_CORES"

_held: dict[str, int] = {}  # instance id -> fd of its claim held by this process


def current_instance() -> tuple[str, str | None]:
    """(instance id, Ray address to join) of the measurer in this process."""
    try:
        import ray
    except ImportError:
        ray = None
    if ray is not None and ray.is_initialized():
        context = ray.get_runtime_context()
        return context.get_session_name(), context.gcs_address
    return f"no-ray-{socket.gethostname()}-{os.getpid()}", None


def _holder(path: Path) -> dict | None:
    """The claim's holder if some process holds it, else None (a stale file is removed)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return json.loads(os.pread(fd, 4096, 0) or b"{}")
            except json.JSONDecodeError:
                return {}
        path.unlink(missing_ok=True)  # nobody holds it: a claim left by an exited run
        return None
    finally:
        os.close(fd)


def claim_cores(what: str = "measurement runner") -> None:
    """Claim this host's cores for this process's Ray instance, or refuse naming the holder."""
    if os.environ.get(SHARED_ENV) == "1":
        return
    instance, address = current_instance()
    if instance in _held:
        return
    CLAIMS_DIR.mkdir(mode=0o1777, exist_ok=True)
    mine = CLAIMS_DIR / f"{instance}.claim"
    fd = os.open(mine, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_SH)
    if not os.pread(fd, 1, 0):
        info = {"pid": os.getpid(), "host": socket.gethostname(), "ray": address}
        os.pwrite(fd, json.dumps(info).encode(), 0)
    for other in CLAIMS_DIR.glob("*.claim"):
        if other == mine:
            continue
        holder = _holder(other)
        if holder is not None:
            os.close(fd)
            _holder(mine)  # removes our claim file unless a sibling runner holds it
            join = (f"join its Ray with --ray-address {holder['ray']} so Ray shares the cores out, "
                    if holder.get("ray") else "")
            raise HiertuneError(
                f"{what}: the cores of host {holder.get('host', socket.gethostname())} are measured on by "
                f"another hiertune run (pid {holder.get('pid', '?')}); {join}wait for it to finish, "
                f"or set {SHARED_ENV}=1 to measure side by side with skewed timings"
            )
    _held[instance] = fd
