"""Reference baselines (AGL1K appendix B.7), as prediction frames.

``uniform_sphere``  points uniform on the sphere: latitude ``asin(u)`` with
                    ``u ~ U(-1, 1)``, longitude ``U(-180, 180)`` (seeded).
``uniform_degrees`` latitude ``U(-90, 90)``, longitude ``U(-180, 180)``, the
                    paper's variant (over-samples the poles).
``density_cell``    always the centre of the 10° x 10° cell (edges at
                    multiples of 10°) holding most ground-truth clips;
                    ties go to the first cell in (lat, lon) order.
``median``          the coordinate-wise median latitude and median
                    longitude of the ground truth.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

BASELINES = ("uniform_sphere", "uniform_degrees", "density_cell", "median")


def baseline_predictions(
    truth: pd.DataFrame, name: str, *, seed: int = 0, cell_deg: float = 10.0
) -> pd.DataFrame:
    """A prediction frame answering every truth clip by baseline ``name``."""
    n = len(truth)
    rng = np.random.default_rng(seed)
    if name == "uniform_sphere":
        lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
        lon = rng.uniform(-180, 180, n)
    elif name == "uniform_degrees":
        lat = rng.uniform(-90, 90, n)
        lon = rng.uniform(-180, 180, n)
    elif name == "density_cell":
        tl = truth["latitude"].to_numpy(np.float64)
        tn = truth["longitude"].to_numpy(np.float64)
        ok = np.isfinite(tl) & np.isfinite(tn)
        i = np.floor((tl[ok] + 90) / cell_deg).astype(int)
        j = np.floor((tn[ok] + 180) / cell_deg).astype(int)
        cells, counts = np.unique(np.stack([i, j], 1), axis=0, return_counts=True)
        ci, cj = cells[int(np.argmax(counts))]
        lat = np.full(n, -90 + (ci + 0.5) * cell_deg)
        lon = np.full(n, -180 + (cj + 0.5) * cell_deg)
    elif name == "median":
        lat = np.full(n, float(np.nanmedian(truth["latitude"])))
        lon = np.full(n, float(np.nanmedian(truth["longitude"])))
    else:
        from ..exceptions import ParameterError

        raise ParameterError(f"baseline must be one of {BASELINES}, got {name!r}")
    return pd.DataFrame(
        {
            "question_id": truth["key"].to_numpy(),
            "predicted_latitude": lat,
            "predicted_longitude": lon,
            "predicted_city": None,
            "predicted_country": None,
            "predicted_continent": None,
            "model_output": None,
            "finish_reason": None,
        }
    )
