"""Every foreseeable bad argument to the Python API is refused clearly (issue 12).

Each case must raise the documented error type with a message naming the parameter;
the CLI's refusals: tests/cli/test_bad_input.py. Then what the API, the assertions and
the pytest plugin do with inputs at their edges (NaN in a weight no input reaches, an
``embeds_fn`` that returns no tensor, nothing compared, a file for a directory).
"""

from __future__ import annotations

import numpy as np
import pytest

from tfparity import api, assertions
from tfparity.compare import Tolerance, ToleranceError
from tfparity.errors import TfparityError
from tfparity.inputs import Batch, InputOptions
from tfparity.validation import NothingComparedError

pytest_plugins = ["pytester"]


# ----------------------------------------------------------------------------- API


def _batch() -> Batch:
    ids = np.array([[5, 6, 7, 0]], np.int32)
    return Batch(ids, np.array([[1, 1, 1, 0]], np.int32), np.zeros_like(ids))


ONES = np.ones((1, 4, 3), np.float32)
# (id, call, error type, fragments)
API_CASES = [
    (
        "assert_close-atol-neg",
        lambda: api.assert_close(ONES, ONES, atol=-1),
        ToleranceError,
        ["atol"],
    ),
    (
        "assert_close-atol-nan",
        lambda: api.assert_close(ONES, ONES, atol=float("nan")),
        ToleranceError,
        ["atol", "NaN"],
    ),
    (
        "assert_close-rtol-inf",
        lambda: api.assert_close(ONES, ONES, rtol=float("inf")),
        ToleranceError,
        ["rtol", "infinite"],
    ),
    (
        "assert_close-atol-str",
        lambda: api.assert_close(ONES, ONES, atol="1e-3"),
        TypeError,
        ["atol"],
    ),
    (
        "assert_close-equal_nan-str",
        lambda: api.assert_close(ONES, ONES, equal_nan="yes"),
        TypeError,
        ["equal_nan"],
    ),
    (
        "assert_close-mask-zeros",
        lambda: api.assert_close(ONES, ONES, attention_mask=np.zeros((1, 4))),
        NothingComparedError,
        ["attention_mask"],
    ),
    ("assert_close-empty", lambda: api.assert_close({}, {}), NothingComparedError, ["nothing"]),
    (
        "assert_close-empty-arrays",
        lambda: api.assert_close(np.zeros(0), np.zeros(0)),
        NothingComparedError,
        ["empty"],
    ),
    (
        "assert_close-complex",
        lambda: api.assert_close(np.ones(3) + 1j, np.ones(3) + 2j),
        TypeError,
        ["complex"],
    ),
    ("Tolerance-nan", lambda: Tolerance(atol=float("nan"), rtol=0.0), ToleranceError, ["atol"]),
    ("Tolerance-neg-rtol", lambda: Tolerance(atol=0.0, rtol=-1e-6), ToleranceError, ["rtol"]),
    ("InputOptions-str-texts", lambda: InputOptions(texts="hello"), TypeError, ["texts", "str"]),
    ("InputOptions-int-item", lambda: InputOptions(texts=("a", 3)), TypeError, ["texts[1]"]),
    (
        "InputOptions-surrogate",
        lambda: InputOptions(texts=("a\ud800",)),
        TfparityError,
        ["texts[0]", "Unicode"],
    ),
    ("InputOptions-empty-texts", lambda: InputOptions(texts=()), TfparityError, ["texts"]),
    (
        "InputOptions-negative-seed",
        lambda: InputOptions(random=2, seed=-1),
        TfparityError,
        ["seed"],
    ),
    ("InputOptions-float-random", lambda: InputOptions(random=2.5), TypeError, ["random"]),
    (
        "InputOptions-padding",
        lambda: InputOptions(padding_side="top"),
        TfparityError,
        ["padding_side"],
    ),
    (
        "check_embeds-str-texts",
        lambda: api.check_embeds("tiny:bert", texts="hello"),
        TypeError,
        ["texts"],
    ),
    (
        "check_embeds-float-tolerance",
        lambda: api.check_embeds("tiny:bert", tolerance=1e-3),
        TypeError,
        ["tolerance"],
    ),
    (
        "check_embeds-embeds_fn-not-callable",
        lambda: api.check_embeds("tiny:bert", embeds_fn=np.zeros(3)),
        TypeError,
        ["embeds_fn"],
    ),
    (
        "check_embeds-no-batches",
        lambda: api.check_embeds("tiny:bert", batches=[]),
        NothingComparedError,
        ["batches"],
    ),
    (
        "check_embeds-batches-not-batch",
        lambda: api.check_embeds("tiny:bert", batches=[{"x": 1}]),
        TypeError,
        ["batches[0]"],
    ),
    ("load_model-int", lambda: api.load_model(3), TypeError, ["model"]),
    (
        "crosscheck-inputs-dict",
        lambda: api.crosscheck("tiny:bert", inputs={"random": 2}),
        TypeError,
        ["inputs"],
    ),
    (
        "crosscheck-localise",
        lambda: api.crosscheck("tiny:bert", localise="sometimes"),
        ValueError,
        ["localise"],
    ),
    (
        "crosscheck-referee",
        lambda: api.crosscheck("tiny:bert", referee="half"),
        ValueError,
        ["referee", "'lazy' or 'full'"],
    ),
    (
        "crosscheck-attribute-alone",
        lambda: api.crosscheck("tiny:bert", attribute=True),
        TfparityError,
        ["--attribute", "--quantize"],
    ),
    (
        "crosscheck-quantize-on-jax",
        lambda: api.crosscheck("keras-hub:tiny:bert", quantize="int8", backend="jax"),
        TfparityError,
        ["--quantize", "--backend jax"],
    ),
    (
        "generate-quantize-on-jax",
        lambda: api.generate("keras-hub:tiny:gpt2", quantize="int8", backend="jax"),
        TfparityError,
        ["quantize=int8", "drop one of the two"],
    ),
    (
        "gradients-no-pt-frozen",
        lambda: api.gradients("tiny:bert", pt=False, frozen="word_embeddings"),
        TfparityError,
        ["frozen=", "pt=False"],
    ),
    (
        "gradients-no-pt-pt_config",
        lambda: api.gradients("tiny:bert", pt=False, pt_config={"hidden_act": "relu"}),
        TfparityError,
        ["pt_config=", "pt=False"],
    ),
    (
        "check_tying-noise-nan",
        lambda: api.check_tying("tiny:bert", noise_scales=[1.0, float("nan")]),
        ValueError,
        ["noise_scales", "finite"],
    ),
    (
        "check_positions-permutations",
        lambda: api.check_positions("tiny:bert", permutations=0),
        ValueError,
        ["permutations"],
    ),
    (
        "diagnose-ids-2**32+5",
        lambda: api.diagnose(
            "tiny:bert", np.array([[5, 2**32 + 5]], np.int64), np.ones((1, 2, 32))
        ),
        TfparityError,
        ["input_ids", "4294967301"],
    ),
    (
        "diagnose-ids-float",
        lambda: api.diagnose("tiny:bert", np.array([[5, 6.5]]), np.ones((1, 2, 32))),
        TfparityError,
        ["input_ids", "6.5"],
    ),
    (
        "diagnose-embeds-int",
        lambda: api.diagnose("tiny:bert", np.array([[5, 6]]), np.ones((1, 2, 32), np.int32)),
        TfparityError,
        ["inputs_embeds"],
    ),
    (
        "diagnose-tolerance-float",
        lambda: api.diagnose("tiny:bert", [[5, 6]], np.ones((1, 2, 32)), tolerance=0.1),
        TypeError,
        ["tolerance"],
    ),
    (
        "assert_embeds_parity-atol-nan",
        lambda: assertions.assert_embeds_parity("tiny:bert", atol=float("nan")),
        ToleranceError,
        ["atol"],
    ),
    (
        "assert_embeds_parity-str-texts",
        lambda: assertions.assert_embeds_parity("tiny:bert", texts="hi"),
        TypeError,
        ["texts"],
    ),
    (
        "assert_crosscheck-rtol-neg",
        lambda: assertions.assert_crosscheck("tiny:bert", rtol=-1.0),
        ToleranceError,
        ["rtol"],
    ),
]


@pytest.mark.parametrize(
    "call,error,fragments", [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES]
)
def test_api_refuses_bad_arguments(call, error, fragments):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_enough_cases():
    assert len(API_CASES) >= 20  # with the CLI's 40 (tests/cli/test_bad_input.py): 60


# ----------------------------------------------------------------------------- behaviour


@pytest.fixture(scope="module")
def nan_row_model():
    """tiny:bert with NaN in the last vocabulary row, which no input reaches."""
    from tfparity.adapters.hf_tf.tf_model import TFModel

    model = TFModel.load("tiny:bert")
    table = model.word_embeddings()
    values = table.numpy()
    values[-1] = np.nan
    table.assign(values)
    return model


def test_nan_in_an_unreached_weight_fails_embeds_crosscheck_and_embeddings(nan_row_model):
    from tfparity.checks.tying import check_tying
    from tfparity.report.text import render

    batches = api.make_batches(nan_row_model, InputOptions(random=2, seq_len=8))
    embeds = api.check_embeds(nan_row_model, batches=batches)
    assert not embeds.passed
    assert "word_embeddings" in render(embeds) and "NaN" in render(embeds)
    assert embeds.first_divergence is None  # every output agreed: no layer is blamed
    (cross,) = api.crosscheck(nan_row_model, batches=batches, reload=False)
    assert not cross.passed and any(c.name.startswith("weights:TF:") for c in cross.comparisons)
    tying = check_tying(nan_row_model, batches)
    assert not tying.passed and any("NaN" in n for n in tying.notes)


def test_embeds_fn_returning_none_or_a_wrong_shape_is_an_error(load_tf_model):
    model = load_tf_model("tiny:bert")
    batches = api.make_batches(model, InputOptions(random=2, seq_len=8))
    with pytest.raises(TfparityError, match="embeds_fn returned None"):
        api.check_embeds(model, batches=batches, embeds_fn=lambda b: None)
    with pytest.raises(TfparityError, match=r"embeds_fn returned shape \[2, 8, 5\]"):
        api.check_embeds(model, batches=batches, embeds_fn=lambda b: np.zeros((2, 8, 5), "f4"))
    with pytest.raises(TfparityError, match="embeds_fn returned a list of <U6 values"):
        api.check_embeds(model, batches=batches, embeds_fn=lambda b: "not a tensor".split())
    with pytest.raises(TfparityError, match="embeds_fn returned dict, not a tensor"):
        api.check_embeds(model, batches=batches, embeds_fn=lambda b: {"x": 1})
    right = api.check_embeds(model, batches=batches, embeds_fn=lambda b: model.gather(b.input_ids))
    assert right.passed


def test_identical_tensors_pass_and_nothing_masked_fails():
    api.assert_close(ONES, ONES, atol=0.0, rtol=0.0)
    from tfparity.compare import compare_arrays

    c = compare_arrays(ONES, ONES, mask=np.zeros((1, 4)))
    assert not c.passed and c.problem.startswith("Nothing compared")


def test_plugin_json_file_is_a_usage_error_and_names_are_unique(pytester, tmp_path):
    pytester.makepyfile(
        test_names="""
import pytest
from tfparity import assert_embeds_parity

@pytest.mark.parametrize("p", ["a/b", "a_b", "a b"])
def test_p(p):
    assert_embeds_parity("tiny:bert", texts=["hello world"])
"""
    )
    a_file = tmp_path / "reports.json"
    a_file.write_text("{}")
    result = pytester.runpytest("--tfparity-json", str(a_file))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "is a file" in result.stderr.str()
    out = tmp_path / "reports"
    result = pytester.runpytest("--tfparity-json", str(out))
    result.assert_outcomes(passed=3)
    assert len(list(out.iterdir())) == 3  # one report per test id, none overwritten
