"""tfparity.compare beyond one array, on hand-made numpy arrays with known answers:
attention masks, several batches, nested outputs, failure messages, and tensors from
TF/torch (imitated by tiny fake classes, so these tests run anywhere numpy does).
"""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.compare import (
    Comparison,
    compare_arrays,
    compare_batches,
    compare_output_batches,
    compare_outputs,
    failure_message,
    flatten,
    to_numpy,
    valid_positions,
)

# Any numpy warning (overflow, invalid value, ...) inside tfparity.compare is a bug here.
pytestmark = pytest.mark.filterwarnings("error")


# ----------------------------------------------------------------------------- attention masks


def _masked_case():
    # batch 2, seq 4, hidden 3; sample 1 has two padded positions at the end.
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]])
    expected = np.arange(24, dtype=np.float64).reshape(2, 4, 3)
    return mask, expected


def test_valid_positions():
    mask = np.array([[1, 0], [1, 1]])
    assert valid_positions((2, 2, 3), None) is None
    assert valid_positions((2,), mask) is None
    assert valid_positions((2, 3), mask) is None
    assert valid_positions((2, 2, 3, 5), np.ones((2, 3))) is None
    v = valid_positions((2, 2, 3), mask)
    assert v.shape == (2, 2, 3)
    assert v.dtype == bool
    assert v[0, 0].all() and not v[0, 1].any() and v[1].all()
    v2 = valid_positions((2, 2), mask)
    np.testing.assert_array_equal(v2, mask.astype(bool))


def test_mask_excludes_padding_from_verdict():
    mask, expected = _masked_case()
    actual = expected.copy()
    actual[1, 3, :] += 1000.0  # padded position
    actual[1, 2, 0] = np.nan  # padded position too
    c = compare_arrays(actual, expected, mask=mask)
    assert c.passed is True
    assert c.mismatched == 0
    assert c.total == 24 - 2 * 3
    assert c.masked_out == 6
    assert c.masked_max_abs_diff == 1000.0
    assert c.max_abs_diff == 0.0
    assert c.nonfinite_actual == 0
    assert c.problem is None

    # Without the mask, the same arrays fail.
    unmasked = compare_arrays(actual, expected)
    assert unmasked.passed is False
    assert unmasked.mismatched == 4
    assert unmasked.masked_out == 0


def test_mask_keeps_valid_positions_and_maps_worst_index_back():
    mask, expected = _masked_case()
    actual = expected.copy()
    actual[1, 3, 2] += 1000.0  # padded: ignored
    actual[1, 1, 2] += 0.5  # valid: the worst element that counts
    c = compare_arrays(actual, expected, mask=mask)
    assert c.passed is False
    assert c.mismatched == 1
    assert c.total == 18
    assert c.worst_index == [1, 1, 2]
    assert c.worst_expected == expected[1, 1, 2]
    assert c.worst_actual == expected[1, 1, 2] + 0.5
    assert c.max_abs_diff == 0.5
    assert c.masked_max_abs_diff == 1000.0
    assert "Excluded as padding: 6 elements (max abs diff there 1e+03)" in c.message()


def test_mask_does_not_apply_to_pooled_output():
    mask, _ = _masked_case()
    expected = np.arange(6, dtype=np.float64).reshape(2, 3)  # [batch, hidden], hidden != seq
    actual = expected.copy()
    actual[1, 2] += 1.0
    c = compare_arrays(actual, expected, mask=mask)
    assert c.passed is False
    assert c.masked_out == 0
    assert c.total == 6
    assert c.worst_index == [1, 2]


def test_mask_of_wrong_shape_is_not_applied():
    _, expected = _masked_case()
    actual = expected.copy()
    actual[1, 3, 0] += 1000.0
    wrong_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])  # seq 5, leaf has seq 4
    c = compare_arrays(actual, expected, mask=wrong_mask)
    assert c.passed is False
    assert c.masked_out == 0
    assert c.total == 24
    assert c.worst_index == [1, 3, 0]


def test_mask_applies_to_token_level_two_dimensional_leaf():
    mask, _ = _masked_case()
    expected = np.zeros((2, 4))  # e.g. per-token scores [batch, seq]
    actual = expected.copy()
    actual[1, 3] = 5.0
    c = compare_arrays(actual, expected, mask=mask)
    assert c.passed is True
    assert c.masked_out == 2
    assert c.masked_max_abs_diff == 5.0


# ----------------------------------------------------------------------------- several batches


def test_compare_batches_counts_rows_across_batches():
    exp1 = np.arange(12, dtype=np.float64).reshape(2, 3, 2)
    exp2 = np.arange(20, dtype=np.float64).reshape(2, 5, 2) + 100.0
    act1, act2 = exp1.copy(), exp2.copy()
    act1[0, 1, 0] += 0.25
    act2[1, 4, 1] += 0.5
    c = compare_batches([act1, act2], [exp1, exp2], name="last_hidden_state")
    assert c.passed is False
    assert c.name == "last_hidden_state"
    assert c.total == 12 + 20
    assert c.mismatched == 2
    assert c.worst_index == [3, 4, 1]  # second batch, row 1 -> sample 2 + 1
    assert c.worst_expected == exp2[1, 4, 1]
    assert c.max_abs_diff == 0.5
    assert c.mean_abs_diff == pytest.approx(0.75 / 32, rel=1e-12)
    # shape/dtype describe the first batch
    assert c.shape == [2, 3, 2]


def test_compare_batches_with_masks():
    exp1 = np.zeros((2, 3, 2))
    exp2 = np.zeros((2, 5, 2))
    mask1 = np.ones((2, 3), dtype=np.int32)
    mask2 = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    act1, act2 = exp1.copy(), exp2.copy()
    act2[1, 4, 0] = 99.0  # padding
    act2[1, 2, 1] = 0.5  # valid
    c = compare_batches([act1, act2], [exp1, exp2], masks=[mask1, mask2])
    assert c.passed is False
    assert c.total == 12 + 20 - 4
    assert c.masked_out == 4
    assert c.masked_max_abs_diff == 99.0
    assert c.mismatched == 1
    assert c.worst_index == [3, 2, 1]


def test_compare_batches_nonfinite_index_counts_rows_across_batches():
    exp1, exp2 = np.zeros((2, 3)), np.zeros((3, 4))
    act2 = exp2.copy()
    act2[1, 2] = np.nan
    c = compare_batches([exp1.copy(), act2], [exp1, exp2])
    assert c.passed is False
    assert "(3, 2)" in c.problem


def test_compare_batches_shape_mismatch_in_a_later_batch():
    a = [np.zeros((2, 3)), np.zeros((1, 4))]
    b = [np.zeros((2, 3)), np.zeros((1, 5))]
    c = compare_batches(a, b)
    assert c.passed is False
    assert c.problem == "Shape mismatch: [1, 4] vs expected [1, 5]."


@pytest.mark.parametrize(
    ("actual", "expected", "masks"),
    [
        ([np.zeros(2), np.ones(2)], [np.zeros(2)], None),  # an expected batch missing
        ([np.zeros(2)], [np.zeros(2), np.ones(2)], None),  # an actual batch missing
        ([np.zeros(2), np.ones(2)], [np.zeros(2), np.zeros(2)], [None]),  # a mask missing
        ([], [], None),
    ],
)
def test_compare_batches_rejects_unequal_batch_counts(actual, expected, masks):
    # Zipping unequal lists would silently drop the differing batch and pass.
    with pytest.raises(ValueError, match="same number"):
        compare_batches(actual, expected, masks=masks)


# ----------------------------------------------------------------------------- nested outputs


def test_flatten_names_nested_structures():
    h = [np.full((1, 2), float(i)) for i in range(4)]
    tree = {
        "last_hidden_state": np.zeros((1, 2)),
        "pooler_output": None,
        "hidden_states": tuple(h),
        "a": {"b": np.ones(2), "c": None},
        "past": [{"key": np.ones(1), "value": np.zeros(1)}],
    }
    flat = flatten(tree)
    assert list(flat) == [
        "last_hidden_state",
        "hidden_states[0]",
        "hidden_states[1]",
        "hidden_states[2]",
        "hidden_states[3]",
        "a.b",
        "past[0].key",
        "past[0].value",
    ]
    np.testing.assert_array_equal(flat["hidden_states[3]"], h[3])
    assert all(isinstance(v, np.ndarray) for v in flat.values())


def test_flatten_top_level_shapes():
    x = np.ones(3)
    assert list(flatten(x)) == [""]
    assert list(flatten([x, x])) == ["[0]", "[1]"]
    assert flatten(None) == {}
    assert list(flatten((x, None, x))) == ["[0]", "[2]"]


def test_compare_outputs_leaf_by_leaf(grid):
    expected = {
        "last_hidden_state": grid,
        "hidden_states": (np.zeros((2, 2)), np.ones((2, 2))),
        "extra": {"score": np.array([1.0])},
    }
    actual = {
        "last_hidden_state": grid.copy(),
        "hidden_states": (np.zeros((2, 2)), np.array([[1.0, 1.0], [1.0, 3.0]])),
        "extra": {"score": np.array([1.0])},
    }
    results = compare_outputs(actual, expected)
    assert [c.name for c in results] == [
        "last_hidden_state",
        "hidden_states[0]",
        "hidden_states[1]",
        "extra.score",
    ]
    assert [c.passed for c in results] == [True, True, False, True]
    bad = results[2]
    assert bad.worst_index == [1, 1]
    assert bad.max_abs_diff == 2.0


def test_compare_outputs_missing_leaf_names_the_side(roundtrip):
    expected = {"logits": np.zeros(2), "pooler_output": np.zeros(3), "only_expected": np.ones(1)}
    actual = {"logits": np.zeros(2), "pooler_output": None, "only_actual": np.ones(4)}
    results = {c.name: c for c in compare_outputs(actual, expected)}
    assert list(results) == ["logits", "pooler_output", "only_expected", "only_actual"]
    assert results["logits"].passed is True

    missing = results["pooler_output"]
    assert missing.passed is False
    assert missing.problem == "Output 'pooler_output' is missing from the actual side."
    assert missing.shape == [] and missing.expected_shape == [3]

    assert results["only_expected"].problem == (
        "Output 'only_expected' is missing from the actual side."
    )
    extra = results["only_actual"]
    assert extra.passed is False
    assert extra.problem == "Output 'only_actual' is missing from the expected side."
    assert extra.shape == [4] and extra.expected_shape == []
    assert extra.dtype == "float64" and extra.expected_dtype == ""
    roundtrip(extra)


def test_compare_outputs_passes_mask_to_every_leaf():
    mask = np.array([[1, 1, 0]])
    expected = {"last_hidden_state": np.zeros((1, 3, 2)), "pooler_output": np.zeros((1, 2))}
    actual = {"last_hidden_state": np.zeros((1, 3, 2)), "pooler_output": np.zeros((1, 2))}
    actual["last_hidden_state"][0, 2, :] = 7.0
    results = compare_outputs(actual, expected, mask=mask)
    assert [c.passed for c in results] == [True, True]
    assert results[0].masked_out == 2
    assert results[1].masked_out == 0


def test_compare_output_batches():
    exp = [{"h": np.zeros((2, 3))}, {"h": np.zeros((1, 5))}]
    act = [{"h": np.zeros((2, 3))}, {"h": np.zeros((1, 5))}]
    act[1]["h"][0, 4] = 1.0
    (c,) = compare_output_batches(act, exp)
    assert c.name == "h"
    assert c.total == 11
    assert c.worst_index == [2, 4]
    assert c.passed is False


# ----------------------------------------------------------------------------- messages


def _three_leaves(grid: np.ndarray) -> list[Comparison]:
    base = grid.astype(np.float32)
    small = base.copy()
    small[1, 2] += 0.5
    large = base.copy()
    large[0, 1] += 2.0
    return compare_outputs(
        {"small": small, "same": base.copy(), "large": large},
        {"small": base, "same": base, "large": base},
    )


def test_failure_message_lists_failing_leaves_worst_first(grid):
    results = _three_leaves(grid)
    assert [c.passed for c in results] == [False, True, False]
    msg = failure_message(results)
    assert msg.startswith("2 of 3 outputs differ.")
    assert "same:" not in msg
    assert msg.index("large: tensors are not close!") < msg.index("small: tensors are not close!")
    assert "Mismatched elements: 1 / 6 (16.7%)" in msg
    assert "Greatest absolute difference: 0.5 at index (1, 2) (up to 1e-05 allowed)" in msg
    assert "Greatest absolute difference: 2 at index (0, 1) (up to 1e-05 allowed)" in msg
    assert "Greatest relative difference: 1 (up to 1.3e-06 allowed)" in msg
    assert "Worst element: actual 6.5, expected 6" in msg


def test_failure_message_puts_problems_first(grid):
    results = _three_leaves(grid)
    shape = compare_arrays(np.zeros(2), np.zeros(3), name="shape_bad")
    msg = failure_message(results + [shape])
    assert msg.startswith("3 of 4 outputs differ.")
    assert msg.index("shape_bad:") < msg.index("large:") < msg.index("small:")
    assert "Shape mismatch: [2] vs expected [3]." in msg


def test_failure_message_when_all_close(grid):
    a = grid
    results = compare_outputs({"x": a, "y": a}, {"x": a.copy(), "y": a.copy()})
    assert failure_message(results) == "All outputs are close."
    assert failure_message([]) == "All outputs are close."


def test_message_without_name():
    c = compare_arrays(np.array([1.0, 2.0]), np.array([1.0, 3.0]))
    msg = c.message()
    assert msg.startswith("Tensors are not close!\n\n")
    assert "Mismatched elements: 1 / 2 (50.0%)" in msg
    assert "at index (1,)" in msg
    assert "(up to 1e-07 allowed)" in msg


# ----------------------------------------------------------------------------- to_numpy


class FakeTfTensor:
    """Has .numpy() like an eager TF tensor."""

    def __init__(self, values, dtype=np.float32):
        self._values = np.array(values, dtype=dtype)

    def numpy(self):
        return self._values


class FakeTorchTensor:
    """Has .detach().cpu() and, for bfloat16, .float() like a torch tensor."""

    def __init__(self, values, dtype="torch.float32"):
        self._values = np.array(values, dtype=np.float32)
        self.dtype = dtype
        self.calls: list[str] = []

    def detach(self):
        self.calls.append("detach")
        return self

    def cpu(self):
        self.calls.append("cpu")
        return self

    def float(self):
        self.calls.append("float")
        return FakeTorchTensor(self._values)

    def numpy(self):
        if self.dtype == "torch.bfloat16":
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self._values


def test_to_numpy_accepts_objects_with_numpy_method():
    out = to_numpy(FakeTfTensor([[1.0, 2.0]]))
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[1.0, 2.0]])


def test_a_tf_tensor_is_read_in_place_not_copied():
    """TF's .numpy() copies; a cross-check keeps every output, so each copy cost time
    and fresh memory. The array is a read-only view of the tensor's own buffer."""
    from tfparity.adapters.runtime.imports import import_tf

    tf = import_tf()
    tensor = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = to_numpy(tensor)
    np.testing.assert_array_equal(out, np.arange(6).reshape(2, 3))
    assert out.dtype == np.float32 and not out.flags.writeable and out.base is not None
    assert to_numpy(tensor).__array_interface__["data"][0] == out.__array_interface__["data"][0]
    assert tensor.numpy().__array_interface__["data"][0] != out.__array_interface__["data"][0]


def test_to_numpy_torch_like_paths():
    t = FakeTorchTensor([1.0, 2.0])
    np.testing.assert_array_equal(to_numpy(t), [1.0, 2.0])
    assert t.calls == ["detach", "cpu"]
    bf = FakeTorchTensor([3.0], dtype="torch.bfloat16")
    np.testing.assert_array_equal(to_numpy(bf), [3.0])
    assert bf.calls == ["detach", "cpu", "float"]


def test_to_numpy_plain_values():
    a = np.ones(3)
    assert to_numpy(a) is a
    out = to_numpy([[1, 2], [3, 4]])
    assert isinstance(out, np.ndarray) and out.shape == (2, 2)
    assert to_numpy(2.5).shape == ()


def test_compare_and_flatten_accept_fake_tensors():
    expected = {"logits": FakeTfTensor([1.0, 2.0, 3.0])}
    actual = {"logits": FakeTfTensor([1.0, 2.0, 3.5])}
    assert isinstance(flatten(actual)["logits"], np.ndarray)
    (c,) = compare_outputs(actual, expected)
    assert c.dtype == "float32"
    assert c.passed is False
    assert c.worst_index == [2]
    assert c.max_abs_diff == 0.5


def test_pooled_output_is_not_masked_even_when_its_width_equals_the_sequence_length():
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    pooled = np.zeros((2, 3), np.float32)
    other = pooled.copy()
    other[1, 2] = 1.0  # a real difference in the pooled vector, under a "padding" column
    (c,) = compare_outputs({"pooler_output": other}, {"pooler_output": pooled}, mask=mask)
    assert c.passed is False and c.masked_out == 0
    (per_token,) = compare_outputs({"scores": other}, {"scores": pooled}, mask=mask)
    assert per_token.passed is True and per_token.masked_out == 3
