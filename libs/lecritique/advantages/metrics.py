"""How well a critic predicts returns.

- explained variance, Le Critique §4.3: EV = 1 - Var(R - V) / Var(R) over policy tokens, also
  per response-position bucket (next to TETHER's per-bucket rho, §7.3);
- value MSE against Monte-Carlo value estimates, GenAC §6.3.1;
- top-1 ranking accuracy among candidate next segments, GenAC §6.3.2.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lecritique.advantages.batch import BoolArray, FloatArray, IntArray, _to_numpy
from lecritique.advantages.positions import position_buckets


def _token_pairs(values: Any, returns: Any, mask: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    values_np = _to_numpy(values).astype(np.float64)
    returns_np = _to_numpy(returns).astype(np.float64)
    if values_np.ndim == 2 and returns_np.ndim == 1:
        if returns_np.shape[0] != values_np.shape[0]:
            raise ValueError(f"returns has {returns_np.shape[0]} rows, values has {values_np.shape[0]}")
        returns_np = np.broadcast_to(returns_np[:, None], values_np.shape)
    if returns_np.shape != values_np.shape:
        raise ValueError(f"returns shape {returns_np.shape} does not match values shape {values_np.shape}")
    if mask is None:
        selected = np.ones(values_np.shape, dtype=bool)
    else:
        selected = _to_numpy(mask).astype(bool)
        if selected.shape != values_np.shape:
            raise ValueError(f"mask shape {selected.shape} does not match values shape {values_np.shape}")
    return values_np[selected], returns_np[selected]


def explained_variance(values: Any, returns: Any, mask: Any = None) -> float:
    """1 - Var(R - V) / Var(R) over the selected tokens; NaN when undefined (no tokens, Var(R) = 0).

    ``returns`` may be per trajectory [B] (broadcast over tokens) or per token like ``values``.
    """
    v, r = _token_pairs(values, returns, mask)
    if r.size == 0:
        return float("nan")
    variance = float(np.var(r))
    if variance == 0.0 or not np.isfinite(variance):
        return float("nan")
    return float(1.0 - np.var(r - v) / variance)


def explained_variance_moments(values: Any, returns: Any, mask: Any = None) -> npt.NDArray[np.float64]:
    """Sufficient statistics [n, sum R, sum R^2, sum E, sum E^2] with E = R - V, so that
    explained variance over a batch can be accumulated chunk by chunk."""
    v, r = _token_pairs(values, returns, mask)
    error = r - v
    return np.array([r.size, r.sum(), (r * r).sum(), error.sum(), (error * error).sum()])


def explained_variance_from_moments(moments: npt.NDArray[np.float64]) -> float:
    """Explained variance from accumulated :func:`explained_variance_moments`; NaN if undefined."""
    count, sum_r, sum_r2, sum_e, sum_e2 = (float(x) for x in moments)
    if count == 0:
        return float("nan")
    variance = sum_r2 / count - (sum_r / count) ** 2
    if variance <= 1e-12 * max(1.0, sum_r2 / count):
        return float("nan")
    error_variance = max(sum_e2 / count - (sum_e / count) ** 2, 0.0)
    return float(1.0 - error_variance / variance)


def bucket_explained_variance_moments(
    values: FloatArray, returns: FloatArray, mask: BoolArray, bucket: IntArray, buckets: int
) -> FloatArray:
    """:func:`explained_variance_moments` of each bucket's policy tokens, shape [buckets, 5].

    ``values``, ``mask`` and ``bucket`` are [B, T] (``bucket`` in [0, buckets)), ``returns`` is [B].
    """
    selected = bucket[mask]
    returns_tokens = np.broadcast_to(returns[:, None], mask.shape)[mask]
    errors = returns_tokens - values[mask]
    columns = (np.ones_like(returns_tokens), returns_tokens, returns_tokens**2, errors, errors**2)
    moments: FloatArray = np.stack(
        [np.bincount(selected, weights=column, minlength=buckets) for column in columns], axis=1
    )
    return moments


def explained_variance_per_bucket(moments: FloatArray) -> FloatArray:
    """Explained variance of each row of accumulated :func:`bucket_explained_variance_moments`
    (NaN where undefined: no tokens, or constant returns in the bucket)."""
    return np.array([explained_variance_from_moments(row) for row in moments], dtype=np.float64)


VALUE_EV_BUCKETS = 4
"""Response-position buckets of the per-bucket explained variance of an estimator without its own
buckets (TETHER with ``buckets > 1`` uses its own, so each rho_m has its EV next to it)."""


def bucket_explained_variance(
    values: Any, returns: Any, mask: Any, buckets: int, max_length: int
) -> FloatArray:
    """The critic's explained variance on the policy tokens of each response-position bucket
    (``buckets`` uniform bins of [0, max_length), :func:`~lecritique.advantages.positions.position_buckets`);
    NaN where undefined (no tokens, or equal returns in the bucket)."""
    mask_np = _to_numpy(mask).astype(bool)
    bucket = position_buckets(mask_np, buckets, max_length)
    moments = bucket_explained_variance_moments(
        _to_numpy(values).astype(np.float64), _to_numpy(returns).astype(np.float64), mask_np, bucket, buckets
    )
    return explained_variance_per_bucket(moments)


def value_mse(values: Any, targets: Any, mask: Any = None) -> float:
    """Mean squared error of predicted values against (e.g. Monte-Carlo) targets; NaN if empty."""
    v, r = _token_pairs(values, targets, mask)
    if r.size == 0:
        return float("nan")
    return float(np.mean((v - r) ** 2))


def top1_ranking_accuracy(predicted: Any, true_values: Any) -> float:
    """Fraction of rows whose highest-scored candidate has the highest true value.

    Both arrays are [N, k] (k candidate next segments per state). Ties are not hits: the critic
    must give one candidate its strictly highest score (a constant critic ranks nothing), and that
    candidate must hold the strictly highest true value (a tie at the top names no single best).
    Chance level is therefore 1/k on rows without true ties and lower with them. NaN for N = 0.
    """
    pred = _to_numpy(predicted).astype(np.float64)
    true = _to_numpy(true_values).astype(np.float64)
    if pred.ndim != 2 or pred.shape != true.shape:
        raise ValueError(f"predicted {pred.shape} and true_values {true.shape} must both be [N, k]")
    if pred.shape[0] == 0:
        return float("nan")
    if pred.shape[1] < 2:
        raise ValueError(f"ranking needs k >= 2 candidates, got k = {pred.shape[1]}")
    chosen = np.argmax(pred, axis=1)
    unique_choice = (pred == pred.max(axis=1, keepdims=True)).sum(axis=1) == 1
    unique_best = (true == true.max(axis=1, keepdims=True)).sum(axis=1) == 1
    hits = unique_choice & unique_best & (chosen == np.argmax(true, axis=1))
    return float(hits.mean())
