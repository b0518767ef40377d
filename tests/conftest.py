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
