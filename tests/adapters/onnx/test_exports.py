"""The ONNX side on the exporters users run, each file made once per module: a tiny
GPT-2 LM with its KV cache through torch's dynamo exporter (made once per session,
conftest.py: weights in external data, nodes named generically, module paths in
``pkg.torch.onnx.name_scopes``), a tiny BERT classifier
through the legacy exporter, and a tiny TFBertModel through tf2onnx with the Erfc handler.
Each clean file passes with every hidden state compared; a file with one weight off
fails where that weight is, named. The dynamo export and the tf2onnx conversion cost
10-25 s each: those tests are slow (test_graph.py's GPT-2 test runs always)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from tfparity import cli  # noqa: E402
from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir  # noqa: E402
from tfparity.adapters.onnx.torch_export import export_torch  # noqa: E402

INPUTS = ["--random", "5", "--seq-len", "12", "--batch-size", "3"]
HIDDEN = {"hidden_states[0]", "hidden_states[1]", "hidden_states[2]"}
SCALED = "h.1.mlp.c_fc.weight"


def _crosscheck(capsys, tmp_path, path, *args):
    report = tmp_path / "report.json"
    code = cli.main(["crosscheck", str(path), *args, *INPUTS, "--json", str(report)])
    out = capsys.readouterr().out
    return code, out, json.loads(report.read_text())


@pytest.fixture(scope="module")
def gpt2(gpt2_cached):
    """The session's dynamo export of tiny GPT-2's LM with its KV cache (conftest.py):
    ``clean``, its copy without a cache returning logits only (its hidden states read
    from inside it, the last after ``ln_f``); ``scaled``, the cached graph (run with an
    empty past) whose initializer ``h.1.mlp.c_fc.weight`` is scaled by 1.05."""
    return {**gpt2_cached, "clean": gpt2_cached["plain"]}


@pytest.mark.slow
def test_a_gpt2_dynamo_export_passes_every_hidden_state_and_sub_layer(gpt2, capsys, tmp_path):
    # tiny:gpt2's config names no class: the vocabulary-wide logits make it a causal LM
    code, out, report = _crosscheck(
        capsys, tmp_path, gpt2["clean"], "--pt", "tiny:gpt2", "--localise", "always"
    )
    assert code == 0, out
    assert report["details"]["head"] == "causal-lm"
    assert {c["name"] for c in report["comparisons"]} == HIDDEN | {"logits"}
    assert all(c["passed"] for c in report["comparisons"])
    assert "top-1 agreement (logits)" in out and "3 tensors inside the graph" not in out
    assert "hidden states it does not output" in out  # all three read from inside
    # sub-layers from the name scopes: ln_2's and mlp.c_proj's inputs, the block's output
    components = {c["name"]: c["accumulated_ok"] for c in report["details"]["components"]}
    blocks = {f"layer_{i}.{c}" for i in (0, 1) for c in ("attention", "intermediate", "output")}
    assert set(components) == blocks and all(components.values())


@pytest.mark.slow
def test_a_gpt2_export_with_c_fc_scaled_fails_at_layer_1_naming_the_weight(gpt2, capsys, tmp_path):
    code, out, report = _crosscheck(capsys, tmp_path, gpt2["scaled"], "--pt", gpt2["ckpt"])
    assert code == 1, out
    d = report["first_divergence"]
    assert (d["hidden_state"], d["layer"], d["component"]) == (2, 1, "intermediate")
    assert SCALED in d["hint"] and "scaled by 1.05" in d["hint"], d["hint"]
    components = {c["name"]: c["accumulated_ok"] for c in report["details"]["components"]}
    assert components["layer_1.attention"] and not components["layer_1.intermediate"]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A tiny BERT classifier (3 labels, seeded head) saved as a checkpoint, exported by
    the legacy exporter (logits only: hidden states come from inside the graph), and
    exported again with the classifier's output channel 1 negated."""
    import transformers

    root = tmp_path_factory.mktemp("onnx-cls")
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification.from_pretrained(
        str(checkpoint_dir("bert")), num_labels=3, attn_implementation="eager"
    ).eval()
    model.save_pretrained(str(root / "ckpt"))
    export_torch(model, root / "clean.onnx", hidden_states=False)
    with torch.no_grad():
        model.classifier.weight[1].neg_()
    export_torch(model, root / "negated.onnx", hidden_states=False)
    return root


def test_a_bert_classifier_export_passes_with_label_agreement(classifier, capsys, tmp_path):
    ckpt = str(classifier / "ckpt")
    code, out, report = _crosscheck(capsys, tmp_path, classifier / "clean.onnx", "--pt", ckpt)
    assert code == 0, out
    assert report["details"]["head"] == "sequence-classification"
    assert {c["name"] for c in report["comparisons"]} == HIDDEN | {"logits"}
    assert all(c["passed"] for c in report["comparisons"])
    assert "label agreement (logits): 5/5" in out


def test_a_negated_classifier_channel_fails_at_the_head_naming_it(classifier, capsys, tmp_path):
    ckpt = str(classifier / "ckpt")
    code, out, report = _crosscheck(capsys, tmp_path, classifier / "negated.onnx", "--pt", ckpt)
    assert code == 1, out
    passed = {c["name"]: c["passed"] for c in report["comparisons"]}
    assert all(passed[h] for h in HIDDEN) and not passed["logits"]
    d = report["first_divergence"]
    assert d["layer"] == "head" and "classifier.weight" in d["hint"], d


@pytest.mark.slow
def test_a_tf2onnx_conversion_with_the_erfc_handler_passes_against_source_and_pytorch(
    load_tf_model, capsys, tmp_path
):
    """tiny:bert's TF model through tf2onnx 1.17 with the handler docs/onnx.md shows:
    it matches its source and PyTorch, sub-layers located by their TF op names."""
    tf = pytest.importorskip("tensorflow")
    tf2onnx = pytest.importorskip("tf2onnx")
    import tfparity.adapters.onnx.tf2onnx_erfc  # noqa: F401  (registers the handler)

    model = load_tf_model("tiny:bert").model
    names = ("input_ids", "attention_mask", "token_type_ids")
    signature = [tf.TensorSpec((None, None), tf.int32, name=n) for n in names]

    @tf.function(input_signature=signature)
    def forward(input_ids, attention_mask, token_type_ids):
        out = model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        )
        return {"last_hidden_state": out.last_hidden_state, "pooler_output": out.pooler_output}

    path = tmp_path / "tf.onnx"
    tf2onnx.convert.from_function(
        forward, input_signature=signature, opset=17, output_path=str(path)
    )
    code, out, report = _crosscheck(
        capsys, tmp_path, path, "--source", "tiny:bert", "--localise", "always"
    )
    assert code == 0, out
    assert "export parity: the export matches its source, and both match PyTorch." in out
    by_check = {r["check"]: r for r in report["reports"]}
    assert set(by_check) == {"export-vs-source", "crosscheck", "crosscheck-source"}
    onnx_vs_pt = by_check["crosscheck"]
    assert HIDDEN <= {c["name"] for c in onnx_vs_pt["comparisons"]}
    assert all(c["passed"] for r in report["reports"] for c in r["comparisons"])
    assert {c["name"] for c in onnx_vs_pt["details"]["components"]} >= {"layer_1.intermediate"}
