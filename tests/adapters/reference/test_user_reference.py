"""A torch module of one's own as the reference (tfparity/adapters/user_reference.py):
a head model as users write it (tfparity/examples/own_head.py: a Hugging Face BERT
body, a mean-pool, a dense classifier) on both sides passes on the outputs both name,
judged by the float64 referee; the Keras classifier's kernel scaled fails on
``logits`` with the weight named; a module tfparity cannot take a config from, or that
returns a tuple, is exit 2 (TfparityError)."""

from __future__ import annotations

import pytest

pytest.importorskip("tf_keras")
torch = pytest.importorskip("torch")

import tfparity  # noqa: E402
from tfparity import InputOptions  # noqa: E402
from tfparity.adapters.reference.own import FLOAT32_IN_FLOAT64  # noqa: E402
from tfparity.adapters.reference.pt_model import load_pt  # noqa: E402
from tfparity.errors import TfparityError  # noqa: E402
from tfparity.examples import own_head  # noqa: E402

INPUTS = InputOptions(random=4, seq_len=12, batch_size=4, seed=3)


@pytest.fixture(scope="module")
def heads(load_tf_model):
    """The Keras head model and its PyTorch twin, the same weights; built once."""
    tf_model = own_head.tf_head_model(load_tf_model("tiny:bert").model)
    pt_module = own_head.pt_head_module(load_pt("tiny:bert").model)
    own_head.copy_classifier(tf_model, pt_module)
    return tf_model, pt_module


def _check(tf, pt, **kwargs):
    (report,) = tfparity.crosscheck(tf=tf, pt=pt, inputs=INPUTS, **kwargs)
    return report


def test_head_models_of_ones_own_pass_on_the_outputs_both_name(heads):
    tf_model, pt_module = heads
    report = _check(tf_model, pt_module)
    assert report.passed, [c.name for c in report.failures]
    assert {c.name for c in report.comparisons} == {"last_hidden_state", "logits"}
    assert report.details["judge"].startswith("float64 referee")
    assert report.details["float64_batches"] >= 1  # the module ran in float64
    assert report.details["reference"] == "MeanPoolClassifier (your own module)"
    assert not any("not compared (no counterpart)" in n for n in report.notes)


def test_a_scaled_dense_kernel_fails_on_the_logits_with_the_weight_named(heads):
    tf_model, pt_module = heads
    kernel = tf_model.get_layer("classifier").kernel
    original = kernel.numpy()
    kernel.assign(original * 1.01)
    try:
        report = _check(tf_model, pt_module, weights=own_head.WEIGHTS)
    finally:
        kernel.assign(original)
    assert not report.passed
    assert [c.name for c in report.failures] == ["logits"]
    hint = report.first_divergence.hint
    assert "weight classifier.weight is PyTorch's scaled by 1.01" in hint
    assert "in your model: classifier/kernel" in hint


def test_a_module_called_with_one_dict_returning_a_tensor(heads, load_tf_model):
    """forward(inputs) gets the dict; a tensor on both sides is the last hidden state."""
    body = heads[1].body
    hf = load_tf_model("tiny:bert").model

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = body

        def forward(self, inputs):
            return self.bert(**inputs).last_hidden_state

    def encode(inputs):
        return hf(**inputs, training=False).last_hidden_state

    report = _check(encode, Encoder())
    assert report.passed
    assert [c.name for c in report.comparisons] == ["last_hidden_state"]

    class Shifted(Encoder):
        def forward(self, inputs):
            return super().forward(inputs) + 1e-3

    assert not _check(encode, Shifted()).passed


def test_a_module_that_casts_its_float64_run_down_is_named(heads):
    body = heads[1].body

    class Cast(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = body

        def forward(self, input_ids, attention_mask):
            return {"last_hidden_state": self.body(input_ids, attention_mask)[0].float()}

    report = _check(lambda inputs: {"last_hidden_state": heads[0](inputs)["last_hidden_state"]},
                    Cast())  # fmt: skip
    note = FLOAT32_IN_FLOAT64.format(name="Cast (your own module)", names="last_hidden_state")
    assert note in report.notes


def test_a_module_with_no_config_is_refused(heads):
    with pytest.raises(TfparityError, match="no Hugging Face model inside it and no `config`"):
        _check(heads[0], torch.nn.Linear(4, 4))


def test_a_module_returning_a_tuple_is_refused(heads):
    body = heads[1].body

    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = body

        def forward(self, input_ids, attention_mask):
            return (self.body(input_ids, attention_mask)[0],)

    with pytest.raises(TfparityError, match="returned a tuple; return the last hidden state"):
        _check(heads[0], Pair())


def test_an_object_that_is_no_reference_is_refused(heads):
    with pytest.raises(TfparityError, match="a torch.nn.Module of your own"):
        _check(heads[0], object())


def test_the_docs_page_shows_the_example_module_as_it_is():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    page = (root / "docs" / "your-own-model.md").read_text()
    block = page.split("<!-- code: tfparity/examples/own_head.py -->\n```python\n")[1]
    shown = block.split("\n```\n<!-- end of code -->")[0]
    assert shown == (root / "tfparity" / "examples" / "own_head.py").read_text().rstrip("\n")
