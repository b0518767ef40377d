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


# ----------------------------------------------------------------------------- the door


def _count_parses(monkeypatch) -> list[str]:
    """Every parse_spec call from now on, by the text parsed: patched in every tfparity
    module that holds the function, so a new call site importing it is counted too."""
    import sys

    from tfparity.adapters.sources import specs

    original, seen = specs.parse_spec, []

    def counted(text):
        seen.append(text)
        return original(text)

    for name, module in list(sys.modules.items()):
        if name.startswith("tfparity") and getattr(module, "parse_spec", None) is original:
            monkeypatch.setattr(module, "parse_spec", counted)
    return seen


def test_one_generate_call_parses_its_spec_once(monkeypatch):
    from tfparity import generate

    seen = _count_parses(monkeypatch)
    report = generate("tiny:gpt2", new_tokens=2, texts=["a b"])
    assert report.passed
    assert seen == ["tiny:gpt2"]  # before the one door: 4 parses of the same string
    seen.clear()
    with pytest.raises(TfparityError, match="not a causal language model"):
        generate("tiny:bert", new_tokens=2, texts=["a b"])  # refused: parsed once too
    assert seen == ["tiny:bert"]


def test_load_models_table_covers_every_spec_kind():
    from typing import get_args

    from tfparity.adapters.sides import SPEC_LOADERS
    from tfparity.adapters.sources.specs import EXPORT_KINDS, Kind

    assert set(SPEC_LOADERS) == set(get_args(Kind))  # a new kind without a loader fails
    assert set(EXPORT_KINDS) <= set(SPEC_LOADERS)


def test_load_model_dispatches_a_parsed_spec_through_the_table(monkeypatch):
    from tfparity.adapters import sides
    from tfparity.adapters.sources.specs import ModelSpec
    from tfparity.architectures.heads import Head
    from tfparity.orchestration import load_model

    asked = []
    monkeypatch.setitem(sides.SPEC_LOADERS, "tiny", lambda spec, req: asked.append((spec, req)))
    load_model("tiny:bert", head="masked-lm", decoders=True)
    ((spec, request),) = asked
    assert isinstance(spec, ModelSpec) and spec.location == "bert"
    assert request.head is Head.MASKED_LM and request.decoders
    with pytest.raises(TfparityError, match="names a signature of an export"):
        load_model("tiny:bert", signature="serving_default")  # before any loader runs
    assert len(asked) == 1


def test_pair_refuses_a_side_that_cannot_generate_before_its_reference_loads(monkeypatch):
    from tfparity import orchestration

    def no_reference(*args, **kwargs):
        raise AssertionError("the reference loaded before the refusal")

    monkeypatch.setattr(orchestration, "reference_for", no_reference)
    with pytest.raises(TfparityError, match="not a causal language model"):
        orchestration.pair("tiny:bert", generating=True)
    paired = orchestration.pair("tiny:bert", with_reference=False)
    assert paired.reference is None and paired.tf.spec.text == "tiny:bert"


def test_pair_gives_the_bound_side_and_its_reference_in_the_sides_precision():
    from tfparity.adapters.runtime.execution_options import ExecutionOptions
    from tfparity.orchestration import pair

    assert not pair("tiny:bert").reference.name.endswith(" in bf16")
    paired = pair("tiny:bert", execution=ExecutionOptions(precision="bf16"))
    assert paired.tf.spec.text == "tiny:bert" and paired.reference_spec is None
    assert paired.reference.name.endswith(" in bf16")  # PyTorch's error in bf16 sets the bar
