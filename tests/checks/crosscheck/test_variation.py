"""Run-to-run variation (tfparity/checks/crosscheck/variation.py): a port whose dropout
ignores ``training=False`` is named as such, at the first layer that varies, and not
given a LayerNorm-epsilon fit. That a deterministic break is not said to vary is
asserted where the broken ports are run already (test_crosscheck_runs.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity import InputOptions
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.reference.pt_model import PTModel
from tfparity.api import make_batches
from tfparity.checks.crosscheck.check import CrosscheckOptions, crosscheck
from tfparity.checks.crosscheck.variation import varying
from tfparity.trace import Trace

TINY = "tiny:bert"


@pytest.fixture(scope="module")
def reference(load_tf_model):
    tf_model = load_tf_model(TINY)
    batches = make_batches(tf_model, InputOptions(random=2, seq_len=8, seed=3))
    return PTModel.from_tf(tf_model.model), batches


def _dropout_at_inference(model: TFModel, layer: int) -> TFModel:
    """Layer ``layer``'s FFN-output dropout made to ignore ``training=False``, as a port
    that calls its dropout with ``training=True`` does."""
    dropout = model.model.bert.encoder.layer[layer].bert_output.dropout
    call = dropout.call
    dropout.call = lambda inputs, training=None: call(inputs, training=True)
    return model


def test_dropout_at_inference_is_named_at_the_first_layer_that_varies(reference):
    pt_model, batches = reference
    tf_model = _dropout_at_inference(TFModel.load(TINY), layer=1)
    report = crosscheck(tf_model, pt_model, batches, CrosscheckOptions())
    assert not report.passed
    hint = report.first_divergence.hint
    assert hint.startswith("TF's outputs change from run to run"), hint
    assert "from hidden_states[2] (layer 1) on" in hint, hint
    assert "dropout active at inference" in hint, hint
    assert "LayerNorm epsilon" not in hint, hint


def test_varying_names_the_first_tensor_beyond_rounding():
    rng = np.random.default_rng(0)
    a = {f"hidden_states[{k}]": rng.normal(size=(2, 4, 8)).astype(np.float32) for k in range(3)}
    same = {k: v.copy() for k, v in a.items()}
    ulps = {k: np.nextafter(v, np.inf) for k, v in a.items()}  # an accelerator's reordering
    assert varying(Trace(a), Trace(same)) is None
    assert varying(Trace(a), Trace(ulps)) is None
    dropped = dict(same, **{"hidden_states[1]": a["hidden_states[1]"] * (rng.random() > 0.1)})
    dropped["hidden_states[1]"] = a["hidden_states[1]"] * (rng.random((2, 4, 8)) > 0.1)
    found = varying(Trace(a), Trace(dropped))
    assert found is not None and found.name == "hidden_states[1]"
    assert found.where == "hidden_states[1] (layer 0)"
