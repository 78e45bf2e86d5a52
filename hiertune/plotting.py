"""Headless matplotlib for the commands' PNGs: one place that picks the backend and saves."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (the machines have no screen)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Lay out, write (creating the folder) and close a figure; returns where it went."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def plot_path(text: str) -> Path:
    """argparse type for a `--plot` file: its suffix must be a format matplotlib writes, checked
    when the arguments are parsed rather than after the solve or the tuning run it would follow."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    formats = FigureCanvasAgg.get_supported_filetypes()
    suffix = Path(text).suffix.lstrip(".").lower()
    if suffix not in formats:
        raise argparse.ArgumentTypeError(
            f"{text!r} has {'suffix .' + suffix if suffix else 'no suffix'}; a plot is written as one of "
            f"{', '.join(sorted(formats))} (e.g. plan.png)"
        )
    return Path(text)
