"""Converted PT->TF weights are cached on disk by checkpoint hash and reused."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tfparity.adapters.hf_tf import loading
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.sources.weight_cache import weight_key


@pytest.fixture(scope="module")
def pt_checkpoint(tmp_path_factory):
    """tiny:bert saved as a PyTorch safetensors checkpoint (config.json + weights)."""
    from tfparity.adapters.reference.pt_model import load_pt

    directory = tmp_path_factory.mktemp("ptckpt")
    load_pt("tiny:bert").model.save_pretrained(directory, safe_serialization=True)
    return directory


def weights(model: TFModel) -> dict[str, np.ndarray]:
    return {weight_key(v): v.numpy() for v in model.model.weights}


def test_second_load_uses_the_cache_and_gives_identical_weights(
    pt_checkpoint, tmp_path, monkeypatch
):
    monkeypatch.setenv("TFPARITY_CACHE_DIR", str(tmp_path / "cache"))
    first = TFModel.load(str(pt_checkpoint))
    digest = hashlib.sha256((pt_checkpoint / "model.safetensors").read_bytes()).hexdigest()
    cached = list((tmp_path / "cache" / digest).glob("*.npz"))
    assert len(cached) == 1 and "cached in" in first.source

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again instead of using the cache")

    monkeypatch.setattr(loading, "_from_pt_state", no_conversion)
    second = TFModel.load(str(pt_checkpoint))
    assert "from cache" in second.source
    a, b = weights(first), weights(second)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    reference = weights(TFModel.load("tiny:bert"))
    assert all(np.array_equal(a[k], reference[k]) for k in reference)


def test_corrupt_cache_is_rewritten_and_off_disables(pt_checkpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("TFPARITY_CACHE_DIR", str(tmp_path / "cache"))
    TFModel.load(str(pt_checkpoint))
    (path,) = (tmp_path / "cache").rglob("*.npz")
    path.write_bytes(b"not an npz")
    again = TFModel.load(str(pt_checkpoint))
    assert "cached in" in again.source and path.stat().st_size > 100
    monkeypatch.setenv("TFPARITY_CACHE_DIR", "off")
    assert "cache off" in TFModel.load(str(pt_checkpoint)).source
