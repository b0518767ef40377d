"""``tfparity backends`` on mixed-precision models (docs/backends.md): a classifier
built under ``mixed_float16`` or ``mixed_bfloat16`` (every layer computing in half
precision, the head float32) runs on every backend, and each layer is held to a floor
and ceiling in units of its rounding, read from the layer's dtype policy.

Both ways, per policy, on TensorFlow and torch in the session's warm processes: the
clean classifier passes (its errors to the float64 referee are half precision's, 10^3
to 10^4 times float32's, and the report names the policy); the same classifier whose
custom layer is skewed on torch only, far above the policy's rounding (1% under
float16, whose unit roundoff is 4.9e-4; 10% under bfloat16, 3.9e-3), fails at that
layer, naming torch; and so does a skew too small for the RMSE bound but systematic,
found by the layer's scale against the referee (``scaled``): 0.1% under float16 (two
units of its rounding), bfloat16's smallest, 1/128 (two units; 1.001 rounds to 1 in
bfloat16 and is no fault at all). The rule's arithmetic is checked without processes.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.compare.judge import Referee
from tfparity.compare.rounding import UNIT_ROUNDOFF, compute_dtype, widened
from tfparity.compare.scale import scale_fit
from tfparity.cross_backend.judge import (
    SCALE_FLOOR_UNITS,
    SCALE_STANDARD_ERRORS,
    judge_layer,
    layer_roundings,
)

EXAMPLE = "tfparity.examples.keras_backends_model"
OPTIONS = {"backends": ["tensorflow", "torch"], "imports": [EXAMPLE]}
LAYERS = ["embedding", "dense_1", "residual", "norm", "pool", "head"]
# policy -> (the dtype its layers compute in, a torch-only skew far above its rounding)
POLICIES = {"mixed_float16": ("float16", 1.01), "mixed_bfloat16": ("bfloat16", 1.1)}
# policy -> a torch-only skew within the RMSE bound, 2 units of the dtype's rounding
SMALL = {"mixed_float16": 1.001, "mixed_bfloat16": 1 + 2**-7}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, backends_run):
    """Per policy, the clean and the torch-skewed classifier's (code, text, JSON)."""
    from tfparity.examples.keras_backends_model import build_classifier

    root = tmp_path_factory.mktemp("mixed")
    found = {}
    for policy, (_, scale) in POLICIES.items():
        skews = (("clean", None), ("skewed", ("torch", scale)), ("small", ("torch", SMALL[policy])))
        for name, skew in skews:
            path = root / f"{policy}-{name}.keras"
            build_classifier(policy, skew).save(path)
            found[policy, name] = backends_run(str(path), **OPTIONS)
    return found


@pytest.mark.parametrize("policy", POLICIES)
def test_a_clean_mixed_precision_classifier_passes_on_every_backend(runs, policy):
    code, text, data = runs[policy, "clean"]
    assert code == 0, text
    d = data["details"]
    assert [r["layer"] for r in d["layers"]] == LAYERS
    dtype = POLICIES[policy][0]
    assert f"dtype policy: {policy} (5 layers), float32 (1 layer)" in text
    assert d["dtype_policies"] == {policy: 5, "float32": 1}
    assert {r["rounding"] for r in d["layers"]} == {dtype}  # the float32 head: after them
    errors = [c["relative_rmse"] for r in d["layers"][1:] for c in r["backends"].values()]
    # really computed in half precision (far above float32's 1e-7), and within its ceiling
    assert min(errors) > 1e-4 and max(errors) < widened(1e-7, 1e-4, dtype)[1]
    # every layer's scale against the referee: within the floor, none scaled
    cells = [c for r in d["layers"] for c in r["backends"].values()]
    assert all(abs(c["scale"] - 1) < SCALE_FLOOR_UNITS * UNIT_ROUNDOFF[dtype] for c in cells)
    assert not any(c["scaled"] for c in cells)
    assert f"scale against the referee within {SCALE_STANDARD_ERRORS:g} standard errors" in text


@pytest.mark.parametrize("policy", POLICIES)
def test_a_one_backend_skew_of_two_units_is_named_by_its_scale(runs, policy):
    code, text, data = runs[policy, "small"]
    assert code == 1
    f = data["details"]["first_divergence"]
    assert (f["backend"], f["backends"], f["layer"], f["kind"]) == (
        "torch",
        ["torch"],
        "residual",
        "scaled",
    )
    assert "FAIL backends: backend torch's output at layer residual is 1.00" in text
    rows = {r["layer"]: r["backends"] for r in data["details"]["layers"]}
    torch, tf = rows["residual"]["torch"], rows["residual"]["tensorflow"]
    # the RMSE bound passes it: only the scale fails it, and TensorFlow stays within
    assert torch["rmse"] <= torch["allowed_rmse"] and torch["scaled"] and not tf["scaled"]
    assert tf["passed"] and all(c["passed"] for layer in LAYERS[:2] for c in rows[layer].values())
    unit = UNIT_ROUNDOFF[POLICIES[policy][0]]
    assert 1.5 * unit < torch["scale"] - 1 < 2.5 * unit


def test_a_bfloat16_skew_below_half_a_unit_is_no_fault(tmp_path, backends_run):
    """1.001 rounds to 1 in bfloat16: the skewed layer computes what the clean one does."""
    from tfparity.examples.keras_backends_model import build_classifier

    path = tmp_path / "bf16-0.1%.keras"
    build_classifier("mixed_bfloat16", ("torch", 1.001)).save(path)
    code, text, data = backends_run(str(path), **OPTIONS)
    assert code == 0, text
    residual = data["details"]["layers"][2]["backends"]["torch"]
    assert abs(residual["scale"] - 1) < UNIT_ROUNDOFF["bfloat16"]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_one_backend_skew_far_above_the_policy_s_rounding_is_named(runs, policy):
    code, text, data = runs[policy, "skewed"]
    assert code == 1
    f = data["details"]["first_divergence"]
    assert (f["backend"], f["layer"], f["kind"]) == ("torch", "residual", "one")
    assert (
        "FAIL backends: backend torch parts from tensorflow and the float64 referee at layer "
        in text
    )
    rows = {r["layer"]: r["backends"] for r in data["details"]["layers"]}
    assert rows["residual"]["tensorflow"]["passed"]  # the other backend stays within
    assert all(c["passed"] for layer in LAYERS[:2] for c in rows[layer].values())


def test_each_layer_rounds_like_the_coarsest_dtype_up_to_it():
    assert [compute_dtype(p) for p in ("mixed_float16", "mixed_bfloat16", "float32")] == [
        "float16",
        "bfloat16",
        "float32",
    ]
    assert compute_dtype("int8_from_mixed_bfloat16") == "bfloat16"
    facts = {
        "tensorflow": {"a": {"dtype_policy": "float32"}, "b": {"dtype_policy": "mixed_float16"}}
    }
    facts["tensorflow"]["c"] = {"dtype_policy": "float32"}
    # c computes in float32 but carries b's float16 error; a/1 is a's output, b#1 b's call
    assert layer_roundings(["a/1", "b#1", "c"], facts) == {
        "a/1": "float32",
        "b#1": "float16",
        "c": "float16",
    }
    floor, ceiling = widened(1e-7, 1e-4, "float16")
    assert floor == pytest.approx(1e-7 * 2**13) and ceiling == pytest.approx(64 * 2**-11)
    assert widened(1e-7, 1e-4, "float32") == (1e-7, 1e-4)
    assert widened(1e-7, 0.5, "float16")[1] == 0.5  # a wider --ceiling wins


def test_the_scale_rule_sees_a_systematic_skew_not_rounding_and_not_in_float32():
    """Rounding noise of one float16 unit per element: a 0.1% scale on top stands out
    by many standard errors, the noise alone does not; a float32 layer has no scale
    rule (its kernels' own biases reach units of float32's rounding)."""
    rng = np.random.default_rng(0)
    truth = rng.normal(size=(2, 8, 32))
    noisy = truth * (1 + rng.normal(scale=UNIT_ROUNDOFF["float16"], size=truth.shape))
    clean = scale_fit(noisy, truth)
    assert clean.standard_errors < 4 and not clean.departs(4.9e-4, SCALE_STANDARD_ERRORS)
    skewed = scale_fit(noisy * 1.001, truth)
    assert skewed.standard_errors > 20 and skewed.departs(4.9e-4, SCALE_STANDARD_ERRORS)
    assert scale_fit(np.zeros(3), np.zeros(3)) is None  # a zero truth has no scale
    outputs = {"tensorflow": noisy, "torch": noisy * 1.001}
    half = judge_layer("residual", outputs, truth, Referee(), 1e-4, "float16")
    assert half.scaled == ("torch",) and half.failing == ["torch"]
    # a scale every backend shares (rounding of the same weights, on a few elements) is
    # not one backend's fault: neither parts from the other
    noisier = truth * (1 + rng.normal(scale=UNIT_ROUNDOFF["float16"], size=truth.shape))
    shared = {"tensorflow": noisy * 1.002, "torch": noisier * 1.002}
    assert judge_layer("residual", shared, truth, Referee(), 1e-4, "float16").scaled == ()
    # the same outputs as a float32 layer's: no fits, no scale verdict
    assert judge_layer("residual", outputs, truth, Referee(), 1.0, "float32").fits == {}
