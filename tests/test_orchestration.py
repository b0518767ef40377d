"""One orchestration path: the PyTorch reference, the tolerance from a lone atol or
rtol, and the reload pass are decided in tfparity.orchestration, and the API, the
assertion helpers, the sweep and the CLI all follow it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfparity import Tolerance, compare_arrays
from tfparity.cli import main
from tfparity.errors import TfparityError
from tfparity.inputs import InputOptions
from tfparity.orchestration import reference_for, tolerance_from, wants_reload

INPUTS = InputOptions(random=3, seq_len=8, batch_size=3)

# ----------------------------------------------------------------------------- tolerance


def test_no_tolerance_given_means_dtype_defaults_or_referee():
    assert tolerance_from(None, None) is None


def test_both_given_are_used_as_given():
    assert tolerance_from(1e-3, 0.0) == Tolerance(atol=1e-3, rtol=0.0)


@pytest.mark.parametrize(
    ("dtype", "atol", "rtol"),
    [("float32", 1e-5, 1.3e-6), ("float16", 1e-5, 1e-3), ("bfloat16", 1e-5, 1.6e-2)],
)
def test_a_lone_atol_or_rtol_keeps_the_others_dtype_default(dtype, atol, rtol):
    assert tolerance_from(0.5, None, dtype) == Tolerance(atol=0.5, rtol=rtol)
    assert tolerance_from(None, 0.5, dtype) == Tolerance(atol=atol, rtol=0.5)


def test_why_a_lone_rtol_keeps_the_default_atol():
    """With atol 0 a lone rtol fails a near-zero element on rounding alone."""
    actual, expected = np.array([1e-9, 1.0], np.float32), np.array([0.0, 1.0], np.float32)
    assert compare_arrays(actual, expected, tolerance=tolerance_from(None, 1e-3)).passed
    assert not compare_arrays(actual, expected, tolerance=Tolerance(atol=0.0, rtol=1e-3)).passed


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_negative_or_nan_tolerance_is_refused(bad):
    with pytest.raises(TfparityError, match=r"atol (must not be negative|is NaN)"):
        tolerance_from(bad, None)


def test_api_assertions_and_cli_apply_the_same_lone_atol_rule(load_tf_model, tmp_path):
    from tfparity import assert_close, assert_embeds_parity

    report = assert_embeds_parity(load_tf_model("tiny:bert"), inputs=INPUTS, atol=1e-3)
    assert {(c.atol, c.rtol) for c in report.comparisons} == {(1e-3, 1.3e-6)}
    path = tmp_path / "r.json"
    argv = ["check", "tiny:bert", "--random", "3", "--seq-len", "8", "--no-pt", "--atol", "1e-3"]
    assert main([*argv, "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    rows = data["reports"] if "reports" in data else [data]
    assert {(c["atol"], c["rtol"]) for r in rows for c in r["comparisons"]} == {(1e-3, 1.3e-6)}
    # assert_close: the same rule, for the dtype of the expected values
    expected = np.array([0.0, 1.0], np.float32)
    assert_close(expected + np.float32(1e-9), expected, rtol=1e-3)
    with pytest.raises(AssertionError):
        assert_close(expected + np.float32(2e-5), expected, rtol=1e-3)


def test_cli_refuses_a_negative_tolerance_with_exit_2(tmp_path, capsys):
    argv = ["check", "tiny:bert", "--random", "2", "--seq-len", "8", "--no-pt", "--rtol", "-1"]
    with pytest.raises(SystemExit) as refused:  # argparse refuses the value itself
        main(argv)
    assert refused.value.code == 2
    assert "argument --rtol: '-1' is not a finite number >= 0" in capsys.readouterr().err


# ----------------------------------------------------------------------------- reference


def _broken():
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import by_name

    return by_name("dropped output bias").apply(TFModel.load("tiny:bert"))


def test_reference_is_loaded_from_the_spec_not_copied_from_the_model_under_test():
    """A broken port loaded from tiny:bert is checked against the seeded tiny:bert, by
    the API and by the assertion helper alike (both used to copy the broken weights
    into PyTorch and pass)."""
    from tfparity import assert_crosscheck
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.api import crosscheck

    broken = _broken()
    (report,) = crosscheck(broken, inputs=INPUTS, reload=False)
    assert not report.passed and report.first_divergence.hidden_state == 2
    with pytest.raises(AssertionError, match="hidden_states"):
        assert_crosscheck(broken, inputs=INPUTS, reload=False)
    (clean,) = crosscheck(TFModel.load("tiny:bert"), inputs=INPUTS, reload=False)
    assert clean.passed


def test_a_model_without_a_spec_needs_an_explicit_reference(load_tf_model):
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.reference.pt_model import PTModel
    from tfparity.api import crosscheck

    wrapped = TFModel.wrap(load_tf_model("tiny:bert").model)
    with pytest.raises(TfparityError, match="never copies the reference"):
        reference_for(wrapped)
    with pytest.raises(TfparityError, match="pt="):
        crosscheck(wrapped, inputs=INPUTS, reload=False)
    explicit = PTModel.from_tf(wrapped.model)  # the caller's own choice: used as given
    assert reference_for(wrapped, explicit) is explicit
    (report,) = crosscheck(tf=wrapped, pt=explicit, inputs=INPUTS)
    assert report.passed


# ----------------------------------------------------------------------------- reload


def test_reload_pass_rule():
    assert wants_reload(True, separate_port=False)
    assert not wants_reload(False, separate_port=False)
    assert not wants_reload(True, separate_port=True)
    # the default (None): MODEL's own TF side reloads; a named reference does not
    assert wants_reload(None, separate_port=False)
    assert not wants_reload(None, separate_port=False, named_reference=True)
    assert not wants_reload(None, separate_port=True)
    assert wants_reload(True, separate_port=False, named_reference=True)  # asked for


def test_reload_pass_runs_for_the_model_itself_not_for_a_separate_port(load_tf_model):
    from tfparity import assert_crosscheck
    from tfparity.api import crosscheck

    reports = assert_crosscheck(load_tf_model("tiny:bert"), inputs=INPUTS)
    assert [r.check for r in reports] == ["crosscheck", "crosscheck-reloaded"]
    assert all(r.passed for r in reports)
    (one,) = crosscheck(tf=load_tf_model("tiny:bert"), pt="tiny:bert", inputs=INPUTS)
    assert one.passed
