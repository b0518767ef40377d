"""The embeds check passes on correct pipelines and fails on broken ones."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity import InputOptions, check_embeds
from tfparity.architectures import tiny_types
from tfparity.checks.embeds import NonFiniteOutputError
from tfparity.trace import hidden_state_index

RANDOM = InputOptions(random=6, seq_len=12, batch_size=4, seed=3)


@pytest.mark.parametrize("arch", tiny_types())
def test_gathered_embeddings_match_ids_path_on_every_tiny_arch(load_tf_model, arch):
    model = load_tf_model(f"tiny:{arch}")
    report = check_embeds(model, inputs=RANDOM)
    assert report.passed, report.comparisons
    names = [c.name for c in report.comparisons]
    assert "last_hidden_state" in names
    n_hidden = sum(hidden_state_index(n) is not None for n in names)
    assert n_hidden == 3  # embeddings + 2 layers
    assert all(c.max_abs_diff <= 1e-6 for c in report.comparisons)
    assert report.first_divergence is None


def test_minilm_default_texts_pass_with_every_hidden_state(minilm):
    report = check_embeds(minilm)
    assert report.passed
    names = {c.name for c in report.comparisons}
    assert {f"hidden_states[{k}]" for k in range(7)} <= names
    assert {"last_hidden_state", "pooler_output"} <= names
    assert max(c.max_abs_diff for c in report.comparisons) <= 1e-6
    assert report.details["tokens"] > 0


def test_feeding_hidden_states_0_is_reported_as_mismatch(minilm):
    """The classic mistake: hidden_states[0] already holds positions, types, LayerNorm."""
    report = check_embeds(minilm, embeds_fn=lambda batch: minilm.run(batch)["hidden_states[0]"])
    assert report.passed is False
    first = report.first_divergence
    assert (first.hidden_state, first.layer, first.component) == (0, "embeddings", "embeddings")
    assert "hidden_states[0]" in first.hint
    hs0 = next(c for c in report.comparisons if c.name == "hidden_states[0]")
    assert hs0.mismatched > 0.9 * hs0.total


def test_roberta_left_padding_is_localised_to_position_ids(load_tf_model):
    model = load_tf_model("tiny:roberta")
    right = check_embeds(model, inputs=InputOptions(padding_side="right"))
    left = check_embeds(model, inputs=InputOptions(padding_side="left"))
    assert right.passed
    assert not left.passed
    assert left.first_divergence.component == "embeddings"
    assert "position ids" in left.first_divergence.hint


def test_small_perturbation_of_embeddings_fails_and_tolerance_can_admit_it(load_tf_model):
    model = load_tf_model("tiny:bert")

    def nudged(batch):
        embeds = model.gather(batch.input_ids).numpy()
        rng = np.random.default_rng(0)
        return embeds + 1e-3 * rng.standard_normal(embeds.shape).astype(np.float32)

    assert not check_embeds(model, inputs=RANDOM, embeds_fn=nudged).passed
    from tfparity import Tolerance

    loose = check_embeds(model, inputs=RANDOM, embeds_fn=nudged, tolerance=Tolerance(1.0, 0.0))
    assert loose.passed


def test_padding_positions_are_excluded_from_the_verdict(load_tf_model):
    model = load_tf_model("tiny:bert")

    def garbage_at_padding(batch):
        embeds = model.gather(batch.input_ids).numpy()
        embeds[batch.attention_mask == 0] = 100.0
        return embeds

    report = check_embeds(model, inputs=RANDOM, embeds_fn=garbage_at_padding)
    assert report.passed
    hs0 = next(c for c in report.comparisons if c.name == "hidden_states[0]")
    assert hs0.masked_out > 0 and hs0.masked_max_abs_diff > 1.0


def test_nan_in_a_weight_fails_loudly(load_tf_model):
    from tfparity.adapters.hf_tf.tf_model import TFModel

    model = TFModel.load("tiny:bert")  # own copy: we break it
    matrix = model.word_embeddings()
    values = matrix.numpy()
    values[5:, 0] = np.nan
    matrix.assign(values)
    with pytest.raises(NonFiniteOutputError, match="NaN"):
        check_embeds(model, inputs=RANDOM)


def test_nan_only_in_the_embeds_path_fails_the_check(load_tf_model):
    model = load_tf_model("tiny:bert")

    def with_nan(batch):
        embeds = model.gather(batch.input_ids).numpy()
        embeds[0, 0, 0] = np.nan
        return embeds

    report = check_embeds(model, inputs=RANDOM, embeds_fn=with_nan)
    assert not report.passed
    assert any(c.problem and "NaN" in c.problem for c in report.comparisons)


def test_report_json_has_design_fields(load_tf_model):
    import json

    report = check_embeds(load_tf_model("tiny:gpt2"), inputs=RANDOM)
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    for key in ("tfparity_version", "check", "model", "passed", "comparisons", "first_divergence"):
        assert key in data
    first = data["comparisons"][0]
    for key in (
        "name",
        "max_abs_diff",
        "max_rel_diff",
        "mismatched",
        "total",
        "atol",
        "rtol",
        "passed",
    ):
        assert key in first
    assert data["check"] == "embeds" and data["first_divergence"] is None
