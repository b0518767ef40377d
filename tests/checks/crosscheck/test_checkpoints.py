"""What the checkpoints hold decides what is judged: never weights a loader invented."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tfparity.adapters.sources.holdings import Holdings, refuse_unused_body
from tfparity.checks.crosscheck.checkpoints import checkpoint_gaps
from tfparity.checks.crosscheck.hints import describe_weight
from tfparity.cli import main
from tfparity.compare import factor_text
from tfparity.errors import TfparityError

BODY = frozenset({"embeddings", "encoder"})


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """Seeded tiny BERTs saved by save_pretrained: a base model, a token classifier and
    a sequence classifier on the same body, and a base model whose config.json says 1
    layer for a checkpoint of 2."""
    torch = pytest.importorskip("torch")
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer

    root = tmp_path_factory.mktemp("ckpts")

    def save(model, name):
        model.save_pretrained(root / name, safe_serialization=True)
        tiny_tokenizer().save_pretrained(root / name)
        return str(root / name)

    torch.manual_seed(0)
    base = transformers.BertModel(tiny_config("bert"))
    found = {"base": save(base, "base")}
    for name, cls in (
        ("tokcls", transformers.BertForTokenClassification),
        ("seqcls", transformers.BertForSequenceClassification),
    ):
        model = cls(tiny_config("bert"))
        model.bert.load_state_dict(base.state_dict(), strict=False)
        found[name] = save(model, name)
    shutil.copytree(root / "base", root / "small")
    config = json.loads((root / "small" / "config.json").read_text())
    (root / "small" / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    found["small"] = str(root / "small")
    return found


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_weights_neither_checkpoint_holds_are_not_judged(ckpts, tmp_path, capsys):
    """A token classifier checked as its base model: both poolers are random."""
    out = tmp_path / "r.json"
    argv = ["crosscheck", ckpts["tokcls"], "--head", "base", "--no-reload", "--json", str(out)]
    code, text, _ = _run(argv, capsys)
    assert code == 0
    assert "Not judged: pooler_output" in text and "pooler.dense.weight" in text
    report = json.loads(out.read_text())
    assert "pooler_output" not in [c["name"] for c in report["comparisons"]]
    assert "last_hidden_state" in [c["name"] for c in report["comparisons"]]


def test_a_token_classifier_as_itself_has_no_pooler_to_judge(ckpts, capsys):
    code, text, _ = _run(["crosscheck", ckpts["tokcls"], "--no-reload"], capsys)
    assert code == 0 and "pooler_output" not in text and "logits" in text


def test_weights_the_port_lacks_fail_naming_them(ckpts, capsys):
    argv = ["crosscheck", "--tf", ckpts["base"], "--pt", ckpts["seqcls"]]
    code, text, _ = _run([*argv, "--head", "sequence-classification"], capsys)
    assert code == 1
    assert "The TF port lacks weights the PyTorch reference holds: classifier.bias" in text
    assert "first divergence: head" in text


def test_weights_the_reference_lacks_exit_2_naming_them(ckpts, capsys):
    argv = ["crosscheck", "--tf", ckpts["seqcls"], "--pt", ckpts["base"]]
    code, _, err = _run([*argv, "--head", "sequence-classification"], capsys)
    assert code == 2 and "reference's checkpoint lacks" in err and "classifier.weight" in err


def test_a_config_smaller_than_its_checkpoint_exits_2_naming_the_unused_layer(ckpts, capsys):
    code, _, err = _run(["crosscheck", ckpts["small"], "--no-reload"], capsys)
    assert code == 2 and "never uses" in err and "encoder.layer.1." in err
    assert "please report" not in err


def test_unused_head_weights_are_a_note_not_an_error(ckpts, capsys):
    code, text, _ = _run(["crosscheck", ckpts["seqcls"], "--head", "base", "--no-reload"], capsys)
    assert code == 0 and "Unused weights" in text and "classifier.weight" in text
    assert f"note: Unused weights of the checkpoint in {ckpts['seqcls']}, not part" in text
    assert "of The " not in text  # the checkpoint's description is mid-sentence


TF_FORMATS = ["h5", "safetensors", "h5-sharded"]


@pytest.fixture(scope="module")
def tf_ports(ckpts, tmp_path_factory):
    """TF ports of ``ckpts`` made the usual way (``TF*.from_pretrained(pt_dir,
    from_pt=True)``, then ``save_pretrained``), as ``tf_model.h5`` (whole and sharded)
    and as TF-format safetensors: a sequence classifier, its base model (no head), a
    token classifier (no pooler), and the base model with a config.json of 1 layer for
    its 2."""
    import transformers

    root = tmp_path_factory.mktemp("tf-ports")
    found = {}
    for fmt in TF_FORMATS:
        for name, cls in (
            ("seqcls", transformers.TFBertForSequenceClassification),
            ("base", transformers.TFBertModel),
            ("tokcls", transformers.TFBertForTokenClassification),
        ):
            target = root / f"{fmt}-{name}"
            model = cls.from_pretrained(ckpts[name], from_pt=True)
            shard = "20KB" if fmt.endswith("sharded") else "5GB"
            model.save_pretrained(
                target, safe_serialization=fmt == "safetensors", max_shard_size=shard
            )
            shutil.copy(Path(ckpts[name]) / "vocab.txt", target)
            found[f"{fmt}-{name}"] = str(target)
        small = root / f"{fmt}-small"
        shutil.copytree(root / f"{fmt}-base", small)
        config = json.loads((small / "config.json").read_text())
        (small / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
        found[f"{fmt}-small"] = str(small)
    return found


@pytest.mark.parametrize("fmt", TF_FORMATS)
def test_a_complete_tf_port_passes_against_its_complete_reference(tf_ports, ckpts, fmt, capsys):
    argv = ["crosscheck", "--tf", tf_ports[f"{fmt}-seqcls"], "--pt", ckpts["seqcls"]]
    code, text, _ = _run([*argv, "--no-reload"], capsys)
    assert code == 0 and "logits" in text and "lacks" not in text


@pytest.mark.parametrize("fmt", TF_FORMATS)
def test_a_tf_port_lacking_its_head_fails_naming_the_weights(tf_ports, ckpts, fmt, capsys):
    """Saved from TFBertModel, loaded as a sequence classifier: the loader made the
    classifier up, which is the port's gap, not a weight that "differs"."""
    argv = ["crosscheck", "--tf", tf_ports[f"{fmt}-base"], "--pt", ckpts["seqcls"], "--no-reload"]
    code, text, _ = _run([*argv, "--head", "sequence-classification"], capsys)
    assert code == 1
    lacks = "The TF port lacks weights the PyTorch reference holds: classifier.bias, "
    assert lacks + "classifier.weight" in text
    assert "first divergence: head" in text and "differs" not in text


@pytest.mark.parametrize("fmt", TF_FORMATS)
def test_a_reference_lacking_the_tf_ports_head_exits_2(tf_ports, ckpts, fmt, capsys):
    argv = ["crosscheck", "--tf", tf_ports[f"{fmt}-seqcls"], "--pt", ckpts["base"], "--no-reload"]
    code, _, err = _run([*argv, "--head", "sequence-classification"], capsys)
    assert code == 2 and "reference's checkpoint lacks weights that the TF port holds" in err
    assert "classifier.weight" in err and "Traceback" not in err


@pytest.mark.parametrize("fmt", TF_FORMATS)
def test_a_tf_config_smaller_than_its_checkpoint_exits_2(tf_ports, fmt, capsys):
    code, _, err = _run(["crosscheck", tf_ports[f"{fmt}-small"], "--no-reload"], capsys)
    assert code == 2 and "never uses" in err and "encoder.layer.1." in err
    assert "encoder.layer.0." not in err


@pytest.mark.parametrize("fmt", TF_FORMATS)
def test_a_tf_token_classifier_as_its_base_model_leaves_the_pooler_unjudged(tf_ports, fmt, capsys):
    """Its reference is its own TF weights in PyTorch: both poolers are made up (by two
    loads), so they are not judged, as for a PyTorch checkpoint; its head is unused."""
    argv = ["crosscheck", tf_ports[f"{fmt}-tokcls"], "--head", "base", "--no-reload"]
    code, text, _ = _run(argv, capsys)
    assert code == 0
    assert "Not judged: pooler_output" in text and "pooler.dense.weight" in text
    assert "note: Unused weights of the checkpoint in" in text and "classifier.weight" in text


@pytest.fixture(scope="module")
def saved_models(tf_ports, tmp_path_factory):
    """SavedModels exported from ``tf_ports``: the sequence classifier; the base port
    loaded as a sequence classifier (its classifier made up) and the token classifier
    loaded as a base model (its pooler made up), each exported as it was."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.architectures.heads import Head
    from tfparity.testing import export_saved_model

    root = tmp_path_factory.mktemp("saved")
    made = {
        "seqcls": TFModel.load(tf_ports["h5-seqcls"]),
        "lacking": TFModel.load(tf_ports["h5-base"], head=Head.SEQUENCE_CLASSIFICATION),
        "tokbase": TFModel.load(tf_ports["h5-tokcls"], head=Head.BASE),
    }
    return {k: str(export_saved_model(m, root / k)) for k, m in made.items()}


SEQ = ["--head", "sequence-classification", "--no-reload"]


def test_a_saved_model_passes_against_its_complete_reference(saved_models, ckpts, capsys):
    code, text, _ = _run(
        ["crosscheck", saved_models["seqcls"], "--pt", ckpts["seqcls"], *SEQ], capsys
    )
    assert code == 0 and "logits" in text


def test_a_saved_model_with_a_made_up_head_fails_at_the_head(saved_models, ckpts, capsys):
    """An export holds the values its model had: a head made up before it was exported
    is a head that differs (nothing in the export says it was random)."""
    argv = ["crosscheck", saved_models["lacking"], "--pt", ckpts["seqcls"], *SEQ]
    code, text, _ = _run(argv, capsys)
    assert code == 1 and "first divergence: head" in text and "classifier.weight" in text


def test_a_reference_lacking_a_saved_models_head_exits_2(saved_models, ckpts, capsys):
    code, _, err = _run(["crosscheck", saved_models["seqcls"], "--pt", ckpts["base"], *SEQ], capsys)
    assert code == 2 and "reference's checkpoint lacks weights that the TF port holds" in err
    assert "classifier.weight" in err and "Traceback" not in err


def test_a_reference_lacking_only_the_pooler_leaves_an_exports_pooler_unjudged(
    saved_models, ckpts, capsys
):
    """The export's pooler may be made up as the reference's is (a token-classification
    checkpoint): not judged, as for two checkpoints; against a reference that holds a
    pooler, the export's made-up one fails."""
    export = saved_models["tokbase"]
    argv = ["crosscheck", export, "--pt", ckpts["tokcls"], "--head", "base", "--no-reload"]
    code, text, _ = _run(argv, capsys)
    assert code == 0 and "Not judged: pooler_output" in text
    code, text, _ = _run(["crosscheck", export, "--pt", ckpts["base"], "--no-reload"], capsys)
    assert code == 1 and "first divergence: pooler" in text


@pytest.fixture(scope="module")
def flatbuffer(tf_ports, tmp_path_factory):
    """The sequence-classification port as a LiteRT flatbuffer (static [2, 16] inputs):
    it returns logits and holds every weight it computes with."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import to_litert

    path = tmp_path_factory.mktemp("litert") / "seqcls.tflite"
    return str(to_litert(TFModel.load(tf_ports["h5-seqcls"]), path))


def test_a_flatbuffer_passes_against_its_complete_reference(flatbuffer, ckpts, capsys):
    code, text, _ = _run(["crosscheck", flatbuffer, "--pt", ckpts["seqcls"], "--no-reload"], capsys)
    assert code == 0 and "head: sequence-classification" in text and "logits" in text
    assert "lacks" not in text


def test_a_reference_lacking_a_flatbuffers_head_exits_2_with_head_given(flatbuffer, ckpts, capsys):
    """``--head`` reaches the flatbuffer: against a base checkpoint (no head to take it
    from) it is a sequence classifier, and the reference lacks its classifier."""
    argv = ["crosscheck", flatbuffer, "--pt", ckpts["base"], *SEQ]
    code, _, err = _run(argv, capsys)
    assert code == 2 and "The PyTorch reference's checkpoint lacks weights" in err
    assert "classifier.weight" in err and "Traceback" not in err


def test_head_names_what_a_flatbuffer_returning_logits_is(flatbuffer, ckpts):
    from tfparity.adapters.exported import load_export
    from tfparity.adapters.sources.specs import parse_spec
    from tfparity.architectures.heads import Head

    spec = parse_spec(flatbuffer)
    assert load_export(spec, ckpts["base"]).head == Head.BASE  # a BertModel companion
    named = load_export(spec, ckpts["base"], head=Head.SEQUENCE_CLASSIFICATION)
    assert named.head == Head.SEQUENCE_CLASSIFICATION


@pytest.fixture(scope="module")
def keras_files(ckpts, tmp_path_factory):
    """The base checkpoint ported by keras-hub and saved as ``.keras`` backbone files,
    as it is and with its pooler scaled (a pooler made up before it was saved, as far
    as the file can tell). keras-hub cannot port a checkpoint lacking the pooler."""
    pytest.importorskip("keras_hub")
    from tfparity.adapters.keras_hub.side import load_keras_hub
    from tfparity.architectures.faults import scale

    root = tmp_path_factory.mktemp("keras-files")
    backbone = load_keras_hub(f"keras-hub:{ckpts['base']}").backbone
    backbone.save(root / "base.keras")
    scale(backbone.get_layer("pooled_dense").kernel, 1.1)
    backbone.save(root / "pooler.keras")
    return {"base": str(root / "base.keras"), "pooler": str(root / "pooler.keras")}


# keras-hub's BertBackbone hard-codes the tanh GELU (its known difference): the reference
# runs it too, so what is judged here is the holdings, not the port's activation.
TANH = ["--pt-config", "hidden_act=gelu_pytorch_tanh", "--no-reload"]


def test_a_keras_file_against_a_reference_lacking_the_pooler_leaves_it_unjudged(
    keras_files, ckpts, capsys
):
    """A token-classification reference checked as base lacks the pooler: the file's
    pooler may be made up as well, so it is not judged, whatever its values."""
    for name in ("base", "pooler"):
        argv = ["crosscheck", keras_files[name], "--pt", ckpts["tokcls"], "--head", "base"]
        code, text, _ = _run([*argv, *TANH], capsys)
        assert code == 0, text
        assert "Not judged: pooler_output" in text and "pooler.dense.weight" in text


def test_a_keras_files_pooler_is_judged_against_a_reference_holding_one(keras_files, ckpts, capsys):
    def run(name):
        return _run(["crosscheck", keras_files[name], "--pt", ckpts["base"], *TANH], capsys)

    code, text, _ = run("base")
    assert code == 0 and "pooler_output" in text and "Not judged" not in text
    code, text, _ = run("pooler")
    assert code == 1 and "first divergence: pooler" in text


def test_unused_weights_read_as_sentences():
    """The checkpoint is described mid-sentence in the note, first in the refusal."""
    head = Holdings(unused=("classifier.weight",), body=BODY)
    assert refuse_unused_body(head, "the checkpoint in d") == [
        "Unused weights of the checkpoint in d, not part of the model checked: classifier.weight."
    ]
    body = Holdings(unused=("encoder.layer.1.output.dense.weight",), body=BODY)
    with pytest.raises(TfparityError, match="^The checkpoint in d holds weights of the"):
        refuse_unused_body(body, "the checkpoint in d")


def test_gaps_decide_by_body_and_side():
    def holds(*missing):
        return Holdings(missing=tuple(missing), body=BODY)

    assert checkpoint_gaps(None, holds("pooler.dense.weight")).unjudged == ()  # unknown
    both = checkpoint_gaps(holds("pooler.dense.weight"), holds("pooler.dense.weight"))
    assert both.unjudged == ("pooler.dense.weight",) and both.port_lacks == ()
    port = checkpoint_gaps(holds("classifier.bias"), holds())
    assert port.port_lacks == ("classifier.bias",)
    with pytest.raises(TfparityError, match="reference's checkpoint lacks.*classifier.bias"):
        checkpoint_gaps(holds(), holds("classifier.bias"))
    with pytest.raises(TfparityError, match="body.*encoder.layer.0.output.dense.weight"):
        body = "encoder.layer.0.output.dense.weight"
        checkpoint_gaps(holds(body), holds(body))


def test_a_weight_differing_by_low_precision_rounding_is_named_as_that():
    x = np.random.default_rng(0).normal(size=(3, 8)).astype(np.float32)
    half = x.astype(np.float16).astype(np.float32)
    assert "PyTorch's weights are TF's rounded to float16" in describe_weight("w", x, half)
    bits = (x.view(np.uint32) + 0x8000) & 0xFFFF0000  # bfloat16, rounded half up
    bf16 = bits.view(np.float32)
    assert not np.array_equal(bf16, x)
    text = describe_weight("w", bf16, x)
    assert "rounded to bfloat16" in text and "shifted" not in text


def test_a_two_row_table_is_not_called_shifted():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 8)), rng.normal(size=(2, 8))
    assert "shifted" not in describe_weight("token_type_embeddings.weight", a, b)


@pytest.mark.parametrize(
    ("factor", "said"),
    [(1.0001, "1.0001"), (0.9999, "0.9999"), (1.00012345, "1.00012"), (1.1, "1.1"), (3.0, "3")],
)
def test_a_scale_near_1_is_named_with_the_digits_that_matter(factor, said):
    """``{:.4g}`` printed 1.0001 as "1": a weight "scaled by 1" reads as unchanged."""
    x = np.random.default_rng(2).normal(size=(4, 8)).astype(np.float32)
    scaled = (x * np.float32(factor)).astype(np.float32)
    said = f"weight w is PyTorch's scaled by {said} (a uniform scale)"
    assert describe_weight("w", scaled, x) == said


def test_factor_text_keeps_two_digits_of_the_distance_from_1():
    assert factor_text(1.0) == "1" and factor_text(0.125) == "0.125"
    assert factor_text(1 + 3e-7) == "1.0000003" and factor_text(1 - 2.5e-6) == "0.9999975"
    assert factor_text(123456.0) == "1.235e+05"  # far from 1: four digits, as before


def test_rows_reordered_are_named_as_a_permutation_and_noise_is_not():
    from tfparity.checks.crosscheck.hints import column_permutation, row_permutation

    x = np.random.default_rng(3).normal(size=(3, 8)).astype(np.float32)
    assert row_permutation(x[[2, 0, 1]], x) == (2, 0, 1)
    assert describe_weight("classifier.weight", x[[1, 0, 2]], x) == (
        "weight classifier.weight is PyTorch's with its rows reordered: TF's rows 0, 1 are "
        "PyTorch's 1, 0"
    )
    assert row_permutation(x, x) is None and row_permutation(x + 1e-3, x) is None
    table = np.random.default_rng(4).normal(size=(40, 4))
    assert "i-3 (rotated)" in describe_weight("pos", np.roll(table, 3, axis=0), table)
    # rolled by one row: a shift, the likelier cause (an off-by-one position table)
    assert "rows shifted by -1" in describe_weight("pos", np.roll(table, 1, axis=0), table)
    logits = np.random.default_rng(5).normal(size=(5, 3))
    assert column_permutation(logits[:, [2, 0, 1]] + 1e-7, logits) == (2, 0, 1)
    assert column_permutation(logits + 1e-7, logits) is None
    assert column_permutation(logits[:, [2, 0, 1]] * 0.5, logits) is None  # no clear match
