"""Summary statistics the benchmark scripts share (not a script: they import it from bench/)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive, finite values; None, zeros and infinities (a case that did
    not run, or failed) are left out rather than turning the whole mean into 0 or inf. None when
    nothing is left."""
    kept = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in kept) / len(kept)) if kept else None
