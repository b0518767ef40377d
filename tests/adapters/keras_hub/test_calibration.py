"""``--calibration FILE`` and the exact check of a Keras GPTQ model
(tfparity/adapters/keras_hub/calibration.py, requantise.py; docs/quantised.md, "GPTQ and
AWQ"). A tiny keras-hub Llama, two layers quantised with GPTQ by Keras itself from two
calibration samples of 8 ids (built once per module): quantised afresh from its source
with the same data it reproduces variable by variable; a scale x1.05, or int values
moved on many entries, is named. Without the data the check says to give it; a file
that cannot be read, or given with a model that has no GPTQ layer, exits 2."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("keras_hub")

from tfparity import cli  # noqa: E402
from tfparity.errors import TfparityError  # noqa: E402

LLAMA = "keras-hub:tiny:llama/causal-lm"
# two layers only: Keras's GPTQ costs about 10 ms of CPU per kernel column
LAYERS = [
    "transformer_layer_0/self_attention/query",
    "transformer_layer_0/feedforward_output_dense",
]
SCALE = f"{LAYERS[1]}/kernel_scale"
KERNEL = f"{LAYERS[0]}/kernel"


@pytest.fixture(scope="module")
def gptq(tmp_path_factory):
    """The float side, its block 0 quantised by Keras's GPTQ, the calibration file."""
    from keras.quantizers import GPTQConfig

    from tfparity.adapters.keras_hub.quantised_side import quantised_side
    from tfparity.adapters.keras_hub.task import load_keras_hub_side

    side = load_keras_hub_side(LLAMA)
    ids = np.random.default_rng(0).integers(1, 1900, size=(2, 8)).astype(np.int32)
    path = tmp_path_factory.mktemp("calibration") / "calibration.npz"
    np.savez(path, token_ids=ids)
    config = GPTQConfig(
        dataset=ids, tokenizer=lambda x: x, num_samples=2, sequence_length=8, group_size=-1
    )
    return side, quantised_side(side, "gptq", LAYERS, config), str(path)


def test_a_gptq_model_reproduces_with_its_calibration_and_a_damage_is_named(gptq):
    from tfparity.adapters.keras_hub.calibration import read_calibration
    from tfparity.adapters.keras_hub.requantise import fresh_twin
    from tfparity.compare.requantisation import QuantisedVariable, compare_requantised

    side, stored, path = gptq
    twin = fresh_twin(stored, side, calibration=read_calibration(path, stored))
    assert twin.skipped is None and twin.mode == "gptq"
    assert twin.calibration["samples"] == 2 and twin.calibration["sequence_length"] == 8
    clean = compare_requantised(twin.stored, twin.fresh)
    assert clean.reproduces and clean.identical == clean.compared == 8  # 2 layers x 4
    # x1.05 on one scale, and +2 steps on the high nibble of 40 packed kernel bytes
    damaged = dict(twin.stored)
    damaged[SCALE] = QuantisedVariable(SCALE, twin.stored[SCALE].values * 1.05, "gptq")
    kernel = twin.stored[KERNEL].values.astype(np.int16).reshape(-1)
    kernel[:40] = (kernel[:40] + 32) % 256
    kernel = kernel.astype(np.uint8).reshape(twin.stored[KERNEL].values.shape)
    damaged[KERNEL] = QuantisedVariable(KERNEL, kernel, "gptq")
    found = {d.path: d for d in compare_requantised(damaged, twin.fresh).differences}
    assert set(found) == {SCALE, KERNEL}
    assert found[SCALE].detail == "scaled by 1.05"
    assert found[KERNEL].kind == "int_steps"


def test_without_calibration_the_check_says_to_give_it(gptq):
    from tfparity.adapters.keras_hub.requantise import fresh_twin

    side, stored, _ = gptq
    twin = fresh_twin(stored, side)
    assert twin.mode == "gptq" and twin.skipped.startswith("gptq quantisation takes calibration")
    assert "give --calibration FILE" in twin.skipped and "budgets judge it" in twin.skipped


def test_a_file_calibrated_elsewhere_is_not_judged_by_a_keras_blind_to_calibration():
    """Keras 3.15 ignores GPTQ's calibration data (keras-team/keras#23512): most layers
    differing from its fresh quantisation is not a damage it can name."""
    import keras

    from tfparity.adapters.keras_hub.calibration import keras_uses_calibration
    from tfparity.adapters.keras_hub.requantise import blind_calibration
    from tfparity.compare.requantisation import QuantisedVariable

    if keras.__version__.startswith("3.15."):
        assert not keras_uses_calibration()
    fresh = {
        f"layer_{i}/kernel": QuantisedVariable(f"layer_{i}/kernel", np.arange(8, dtype=np.uint8))
        for i in range(4)
    }
    one = dict(fresh)
    one["layer_0/kernel"] = QuantisedVariable("layer_0/kernel", fresh["layer_0/kernel"].values + 9)
    assert blind_calibration(one, fresh, "gptq", 2) is None  # one layer: a damage
    most = {p: QuantisedVariable(p, v.values + 9) for p, v in fresh.items()}
    why = blind_calibration(most, fresh, "gptq", 2, uses_data=False)
    assert why.startswith("not reproducible here") and "4 of 4 gptq layers differ" in why
    assert "ignores gptq calibration data" in why
    # a Keras that uses its data: two rows are cut at a per-process offset, one is not
    why = blind_calibration(most, fresh, "gptq", 2, uses_data=True)
    assert "offset from Python's string hash" in why and "PYTHONHASHSEED" in why
    assert blind_calibration(most, fresh, "gptq", 1, uses_data=True) is None


@pytest.mark.parametrize(
    ("arrays", "said"),
    [
        (None, "no such file"),
        ("npy", "not a numpy .npz file: it is one array (.npy)"),
        ({"ids": np.zeros((2, 8), np.int32)}, "holds no token_ids (it holds ids)"),
        ({"token_ids": np.zeros(8, np.int32)}, "must be a 2-D int array"),
        ({"token_ids": np.zeros((2, 8))}, "must be a 2-D int array"),
        ({"token_ids": np.zeros((2, 8), np.int32), "bits": 4}, "unknown setting 'bits'"),
    ],
)
def test_a_bad_calibration_file_exits_2_naming_what_is_wrong(arrays, said, tmp_path, capsys):
    path = tmp_path / "calibration.npz"
    if arrays == "npy":
        path = tmp_path / "calibration.npy"
        np.save(path, np.zeros((2, 8), np.int32))
    elif arrays is not None:
        np.savez(path, **arrays)
    model = tmp_path / "gptq.keras"  # never loaded: the calibration is read first
    model.write_bytes(b"")
    argv = ["crosscheck", "--tf", str(model), "--pt", "tiny:llama/causal-lm"]
    assert cli.main([*argv, "--calibration", str(path)]) == 2
    err = capsys.readouterr().err
    assert said in err and path.name in err, err


def test_calibration_for_a_model_with_no_gptq_layer_exits_2(gptq):
    from tfparity.adapters.keras_hub.calibration import read_calibration

    side, _, path = gptq
    with pytest.raises(TfparityError, match="is not one \\(it is not quantised"):
        read_calibration(path, side)


def test_a_gptq_file_saved_by_keras_3_15_is_refused_naming_its_lost_zero_points(
    gptq, tmp_path, capsys
):
    """Keras 3.15's save drops GPTQ zero points (keras-team/keras#23321): the file does
    not load back; the refusal says why."""
    import keras

    _, stored, path = gptq
    saved = tmp_path / "gptq.keras"
    stored.model.save(saved)
    try:
        keras.saving.load_model(saved, compile=False)
    except ValueError:
        argv = ["crosscheck", "--tf", str(saved), "--pt", "tiny:llama/causal-lm"]
        assert cli.main([*argv, "--calibration", path]) == 2
        assert "GPTQ layers saved by Keras 3.15 lack their zero points" in capsys.readouterr().err
    else:  # a Keras with the fix: the file loads
        assert not keras.__version__.startswith("3.15.")
