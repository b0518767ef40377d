"""``tfparity backends --gradients``: each backend's gradients of a seeded scalar, judged
backwards against the float64 referee's.

One real run, once per module: the example model with a layer whose gradient is
stopped on torch only (its forward pass the same everywhere) through the CLI on
TensorFlow (also the referee's process) and torch. The clean model's gradients are
tested in test_backends.py, on the run its forward tests share (backend processes are
slow to start). The attribution rules are tested on made-up gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.keras_backends.launch import installed
from tfparity.cross_backend.gradients import (
    BackendGradients,
    add_gradients,
    culprit,
    zero_gradients,
)
from tfparity.cross_backend.judge import BackendOutputs, check_backends
from tfparity.report.backends import render_backends

EXAMPLE = "tfparity.examples.keras_backends_model"
# Reverse topological order: per layer, the gradient w.r.t. its output, then its weights.
ROWS = [
    "dense_2:output",
    "dense_2/kernel",
    "dense_2/bias",
    "norm:output",
    "norm/gamma",
    "norm/beta",
    "residual:output",
    "residual/alpha",
    "dense_1:output",
    "dense_1/kernel",
    "dense_1/bias",
    "embedding:output",
    "embedding/embeddings",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from tfparity.examples.keras_backends_model import save

    root = tmp_path_factory.mktemp("backends_gradients")
    return {
        "clean": save(root / "clean.keras"),
        "faulty": save(root / "faulty.keras", fault="torch_gradient"),
    }


@pytest.fixture(scope="module")
def faulty(files, backends_run):
    """The torch-only gradient fault: exit code, text, JSON."""
    if not installed("torch"):
        pytest.skip("torch is not installed")
    backends = ["tensorflow", "torch"]
    return backends_run(str(files["faulty"]), backends=backends, imports=[EXAMPLE], gradients=True)


def test_a_gradient_stopped_on_torch_only_fails_naming_torch_and_that_layer(faulty):
    code, text, data = faulty
    d = data["details"]
    assert code == 1 and data["passed"] is False
    assert d["first_divergence"] is None  # the forward pass agrees everywhere
    f = d["gradients"]["first_divergence"]
    assert (f["backend"], f["kind"], f["gradient"], f["layer"]) == (
        "torch",
        "one",
        "dense_1:output",
        "residual",
    )
    assert data["first_divergence"]["layer"] == "residual"
    assert "first gradient divergence: backend torch, gradient dense_1:output, " in text
    assert "FAIL backends: backend torch parts from tensorflow and the float64 referee's" in text
    verdicts = {c["name"]: c["passed"] for c in data["comparisons"]}
    assert all(v for n, v in verdicts.items() if ":grad:" not in n)  # forward: every layer
    assert all(v for n, v in verdicts.items() if n.startswith("tensorflow:"))
    # localised: torch's gradients above the stopped layer agree, those below it fail
    assert all(verdicts[f"torch:grad:{row}"] for row in ROWS[:8])
    assert not any(verdicts[f"torch:grad:{row}"] for row in ROWS[8:])


# The attribution alone, on made-up gradients: numpy only, no process.

RNG = np.random.default_rng(0)
TRUTH = {"out:output": RNG.standard_normal(8), "out/kernel": RNG.standard_normal((4, 2))}
LAYER_OF = {"out:output": "out", "out/kernel": "out"}


def _report(grads):
    truth = {"out": np.ones(3)}
    forward = {b: {"out": np.ones(3, np.float32)} for b in grads}
    report = check_backends(BackendOutputs("made-up", forward, truth, "tensorflow"))
    return add_gradients(report, BackendGradients(grads, TRUTH, LAYER_OF))


def test_a_model_output_gradient_is_blamed_on_its_own_layer_a_weight_on_its_owner():
    held = BackendGradients({}, TRUTH, {**LAYER_OF, "a:output": "a"}, {"a": ["b", "c"]})
    assert culprit("out:output", held) == ["out"]  # nothing takes the model's output
    assert culprit("a:output", held) == ["b", "c"]
    assert culprit("out/kernel", held) == ["out"]


def test_backends_sharing_a_wrong_gradient_are_told_apart_from_one():
    right = {k: t.astype(np.float32) for k, t in TRUTH.items()}
    wrong = {**right, "out/kernel": (TRUTH["out/kernel"] * 1.01).astype(np.float32)}
    assert _report({"tensorflow": right, "jax": right}).passed
    one = _report({"tensorflow": right, "jax": wrong}).details["gradients"]["first_divergence"]
    assert (one["backend"], one["kind"], one["gradient"]) == ("jax", "one", "out/kernel")
    report = _report({"tensorflow": wrong, "jax": wrong})
    f = report.details["gradients"]["first_divergence"]
    assert not report.passed and report.details["first_divergence"] is None
    assert (f["backend"], f["kind"], f["layer"]) == (None, "all", "out")
    assert f["text"].startswith("every backend parts from the float64 referee's gradients")


def test_the_gradient_divergence_gets_the_hints_of_the_layer_whose_backward_pass_made_it():
    """A half-precision policy on the layer blamed backwards is hinted, as forwards."""
    right = {k: t.astype(np.float32) for k, t in TRUTH.items()}
    wrong = {**right, "out/kernel": (TRUTH["out/kernel"] * 1.01).astype(np.float32)}
    facts = {"class": "Dense", "dtype_policy": "float32"}
    half = {**facts, "dtype_policy": "mixed_bfloat16"}
    layer_facts = {"tensorflow": {"out": facts}, "jax": {"out": half}}
    grads = {"tensorflow": right, "jax": wrong}
    truth = {"out": np.ones(3)}
    forward = {b: {"out": np.ones(3, np.float32)} for b in grads}
    report = check_backends(BackendOutputs("made-up", forward, truth, "tensorflow"))
    report = add_gradients(report, BackendGradients(grads, TRUTH, LAYER_OF, {}, 0, layer_facts))
    f = report.details["gradients"]["first_divergence"]
    assert len(f["hints"]) == 1 and "half precision (mixed_bfloat16 on jax)" in f["hints"][0]
    assert f"  hint: {f['hints'][0]}" in render_backends(report).splitlines()
    clean = _report({"tensorflow": wrong, "jax": wrong})  # no facts recorded: no hint
    assert clean.details["gradients"]["first_divergence"]["hints"] == []


# A gradient zero in exact arithmetic (a key projection's bias): judged in its layer's scale.

LAYER = {"att/kernel": "att", "att/bias": "att", "att:output": "att"}


def _zero_report(bias: dict[str, np.ndarray], kernel_fault: float = 1.0):
    """Truth: a kernel gradient of RMS ~1, an output gradient, a bias gradient that is
    float64 rounding alone (1e-19); each backend's bias gradient from ``bias``."""
    truth = {
        "att:output": RNG.standard_normal(6),
        "att/kernel": RNG.standard_normal((3, 2)),
        "att/bias": np.full(2, 1e-19),
    }
    grads = {
        b: {
            "att:output": truth["att:output"].astype(np.float32),
            "att/kernel": (truth["att/kernel"] * (kernel_fault if b == "jax" else 1)).astype(
                np.float32
            ),
            "att/bias": value.astype(np.float32),
        }
        for b, value in bias.items()
    }
    truth_fwd = {"out": np.ones(3)}
    forward = {b: {"out": np.ones(3, np.float32)} for b in grads}
    report = check_backends(BackendOutputs("made-up", forward, truth_fwd, "tensorflow"))
    return add_gradients(report, BackendGradients(grads, truth, LAYER))


def test_a_zero_gradient_with_float32_noise_passes_where_a_relative_rule_failed():
    noise = {"tensorflow": np.array([3e-8, -2e-8]), "jax": np.array([-4e-8, 5e-8])}
    report = _zero_report(noise)
    rows = {r["gradient"]: r for r in report.details["gradients"]["rows"]}
    assert report.passed
    assert rows["att/bias"]["zero"]["of"] == "layer att"
    assert "zero" not in rows["att/kernel"]


def test_the_zero_gradient_floor_hides_no_fault_there_nor_elsewhere_in_the_layer():
    noise = np.array([3e-8, -2e-8])
    wrong = {"tensorflow": noise, "jax": np.array([1e-3, -1e-3])}  # 0.1% of the layer's
    f = _zero_report(wrong).details["gradients"]["first_divergence"]
    assert (f["backend"], f["gradient"], f["layer"]) == ("jax", "att/bias", "att")
    skewed = _zero_report({"tensorflow": noise, "jax": noise}, kernel_fault=1.001)
    f = skewed.details["gradients"]["first_divergence"]
    assert (f["backend"], f["gradient"]) == ("jax", "att/kernel")


def test_a_small_but_nonzero_gradient_keeps_the_relative_rule():
    held = BackendGradients(
        {}, {"a/k": np.ones(4), "a/b": np.full(2, 1e-6)}, {"a/k": "a", "a/b": "a"}
    )
    assert zero_gradients(held) == {}  # 1e-6 of its layer: float32 resolves it
    lone = BackendGradients({}, {"a/b": np.full(2, 1e-20), "z/k": np.ones(3)}, {"a/b": "a"})
    assert zero_gradients(lone)["a/b"].of == "the model"  # no other gradient in its layer
