"""Shared fixtures: models are loaded once per test session (loading costs seconds)."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def _load(spec: str):
    from tfparity.adapters.tf_model import TFModel

    return TFModel.load(spec)


@pytest.fixture(scope="session")
def load_tf_model():
    """``load_tf_model("tiny:bert")`` -> a cached TFModel. Do not mutate its weights;
    tests that break a model load their own copy with ``TFModel.load``."""
    return _load


@pytest.fixture(scope="session")
def minilm(load_tf_model):
    return load_tf_model("minilm")


# Floats that the CPU's kernels may move between two sweeps of the same items (another
# batch size, thread count or instruction set): held to within this factor, not digits.
KERNEL_FACTOR = 10.0


def _stable_view(summary: dict) -> dict:
    """A sweep summary without its run facts, worst items by verdict only (their order
    among passes follows the float diffs)."""
    out = {k: v for k, v in summary.items() if k not in ("run", "worst_items")}
    out["worst_verdicts"] = [w["passed"] for w in summary["worst_items"]]
    return out


def _differences(a, b, path: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a)} vs {sorted(b)}"]
        return [d for k in a for d in _differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, float) and isinstance(b, float):
        small, large = sorted((abs(a), abs(b)))
        if a == b or (small > 0 and large <= small * KERNEL_FACTOR):
            return []
    elif a == b:
        return []
    return [f"{path}: {a!r} vs {b!r}"]


@pytest.fixture(scope="session")
def sweep_differences():
    """``sweep_differences(a, b)`` -> where two sweep summaries of the same items differ:
    every count, verdict and name exactly, floats to within KERNEL_FACTOR."""
    return lambda a, b: _differences(_stable_view(a), _stable_view(b), "summary")
