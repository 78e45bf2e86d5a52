"""Find the Edge TPU runtime before asking LiteRT for its delegate.

`load_delegate('libedgetpu.so.1')` raises a bare OSError when the runtime is missing; probing
with ctypes first lets the pipeline say exactly what is absent and how to get it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

from hiertune.errors import ResourceUnavailableError

EDGETPU_LIB = "libedgetpu.so.1"


def edgetpu_runtime_present() -> bool:
    """True when the dynamic loader can open libedgetpu on this host."""
    candidates = [EDGETPU_LIB]
    found = ctypes.util.find_library("edgetpu")
    if found:
        candidates.append(found)
    for name in candidates:
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def require_edgetpu_runtime() -> None:
    if not edgetpu_runtime_present():
        raise ResourceUnavailableError(
            f"--device edgetpu needs the Edge TPU runtime ({EDGETPU_LIB}), which this host cannot load; "
            "install libedgetpu1-std from Google's Coral apt repository, or run with --device cpu"
        )


def edgetpu_delegate() -> Any:
    """The LiteRT delegate for the Edge TPU (call only after the probe succeeded)."""
    require_edgetpu_runtime()
    from ai_edge_litert.interpreter import load_delegate

    return load_delegate(EDGETPU_LIB)
