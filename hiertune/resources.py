"""Where the files shipped inside the package live (pointer-net checkpoint, cost-model priors,
the model zoo's graphs): one place, so a wheel, an editable install and a cluster node agree."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def data_path(*parts: str) -> Path:
    """A path under the package's `data/` folder (it may not exist: callers say what is missing)."""
    return Path(str(resources.files("hiertune").joinpath("data", *parts)))
