"""A quantised LiteRT flatbuffer against a fresh conversion of its float source: the
converter is deterministic for dynamic-range int8 and float16 (a clean file reproduces
constant for constant); one scale x1.05 and one output channel negated are named; a
full-integer file is said not to be reproducible. Each file is converted once (the
int8 one per session: conftest's ``tiny_bert_litert``)."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.exported import load_export
from tfparity.adapters.exported.litert_graph import constants_of
from tfparity.adapters.exported.litert_requantise import litert_twin, unscoped, variables
from tfparity.adapters.sources.specs import parse_spec
from tfparity.api import make_batches
from tfparity.compare.requantisation import compare_requantised
from tfparity.inputs import InputOptions

FFN = "bert/encoder/layer_._1/intermediate/dense/Tensordot/MatMul"


@pytest.fixture(scope="module")
def source():
    from tfparity.adapters.hf_tf.tf_model import TFModel

    return TFModel.load("tiny:bert")


@pytest.fixture(scope="module")
def files(tiny_bert_litert, tmp_path_factory):
    """tiny:bert's dynamic-range int8 file (conftest's, test_litert.py's too), and copies
    of it with the FFN kernel damaged."""
    root = tmp_path_factory.mktemp("litert-requantise")
    int8 = tiny_bert_litert("int8")
    paths = {"int8": int8}
    paths["scale"] = damaged(int8, root / "scale.tflite", lambda c: c.scales.__imul__(1.05))
    paths["negated"] = damaged(int8, root / "negated.tflite", lambda c: c.values[3].__imul__(-1))
    return paths


def damaged(path, out, change):
    """A copy of the flatbuffer at ``path`` with ``change`` made to the FFN kernel in place
    (its int8 values or its scales), as a tool that edits a shipped file would."""
    data = bytearray(path.read_bytes())
    (kernel,) = [c for name, c in constants_of(data).items() if unscoped(name) == FFN]
    change(kernel)
    out.write_bytes(bytes(data))
    return out


def side(path):
    return load_export(parse_spec(str(path)), "tiny:bert")


@pytest.fixture(scope="module")
def twin(files, source):
    """The exact check's material for the file with one scale x1.05: a second conversion
    of the same source, made by the check."""
    return litert_twin(side(files["scale"]), source)


@pytest.fixture(scope="module")
def fresh(twin):
    return twin.fresh


def test_a_second_conversion_reproduces_every_constant(files, fresh):
    judged = compare_requantised(variables(files["int8"].read_bytes()), fresh)
    assert judged.reproduces
    # every int8 kernel and its scales: 12 dense kernels and the word embeddings
    assert judged.compared == judged.identical >= 2 * 13


def test_one_scale_times_1_05_and_one_negated_channel_are_named(files, fresh):
    scaled = compare_requantised(variables(files["scale"].read_bytes()), fresh)
    assert [(d.path, d.kind) for d in scaled.differences] == [(FFN + "/scale", "scaled")]
    assert "scaled by 1.05" in scaled.differences[0].detail
    negated = compare_requantised(variables(files["negated"].read_bytes()), fresh)
    (d,) = negated.differences
    assert (d.path, d.kind, d.channels) == (FFN, "flipped", [[3]])


def test_the_twin_puts_the_fresh_scale_back_and_the_outputs_come_back(files, twin):
    assert twin.skipped is None and twin.mode == "dynamic-range int8"
    assert twin.parts[FFN + "/scale"] == 1  # block 1, by its TF name scope
    (batch,) = make_batches(side(files["scale"]), InputOptions(random=2, seq_len=10, batch_size=2))
    fresh_out = twin.run_fresh(batch)["last_hidden_state"]
    before = np.abs(twin.run_stored(batch)["last_hidden_state"] - fresh_out).max()
    with twin.put_back(FFN + "/scale"):
        after = np.abs(twin.run_stored(batch)["last_hidden_state"] - fresh_out).max()
    restored = np.abs(twin.run_stored(batch)["last_hidden_state"] - fresh_out).max()
    assert before > 1e-3 and after == 0.0 and restored == before


def test_without_a_source_the_twin_says_what_to_give(files, source):
    assert litert_twin(side(files["int8"]), None).skipped.startswith("no float source")


def test_crosscheck_reproduces_a_clean_file_and_names_a_negated_channel(files, tmp_path, capsys):
    """As a user runs it: the flatbuffer and its checkpoint, no --source (the reference
    checkpoint is converted afresh); the JSON carries what the text says."""
    import json

    from tfparity import cli

    base = ["crosscheck", "--pt", "tiny:bert", "--random", "2", "--seq-len", "10"]
    assert cli.main([*base, "--tf", str(files["int8"])]) == 0
    out = capsys.readouterr().out
    assert "requantisation: reproduces the LiteRT converter's fresh dynamic-range int8" in out
    report = tmp_path / "negated.json"
    assert cli.main([*base, "--tf", str(files["negated"]), "--json", str(report)]) == 1
    out = capsys.readouterr().out
    assert "signs flipped on 1 of 64 output channels (channel 3)" in out
    found = json.loads(report.read_text())  # one report: at the top level
    assert found["first_divergence"]["layer"] == 1
    (d,) = found["details"]["requantisation"]["differences"]
    assert (d["path"], d["kind"], d["block"]) == (FFN, "flipped", 1)
    assert d["effect"]["with_fresh"] < d["effect"]["error"]


def test_a_quantised_export_is_judged_against_its_source_by_its_budgets(files, source):
    """The export vs its source (``--source``): an int8 flatbuffer differs from its float
    source by design, so it is held to the int8 budgets, not to float32's bar (under
    which the clean file fails); a budget it cannot meet still fails it, named."""
    from tfparity.api import crosscheck
    from tfparity.checks.crosscheck.export_source import check_export_vs_source

    inputs = InputOptions(random=2, seq_len=10, seed=1)
    export = side(files["int8"])
    batches = make_batches(export, inputs)
    float_bar = check_export_vs_source(export, source, batches, tolerance=None, budget=None)
    assert float_bar.passed, "judged by the int8 budget"
    assert float_bar.details["judge"].startswith("quantised (dynamic-range int8): judged by")
    assert all(c.judge == "budget" for c in float_bar.comparisons)
    tight = check_export_vs_source(export, source, batches, budget="max=1e-4")
    assert not tight.passed and tight.first_divergence.hidden_state == 0
    first, *_ = crosscheck(str(files["int8"]), source="tiny:bert", inputs=inputs)
    assert first.check == "export-vs-source" and first.passed
    assert "int8" in first.details["judge"]


def users_int8(model, path, hidden_states=False):
    """tiny:bert converted as the TF docs show a user: their own serving function (ids and
    mask in, no token types; ``last_hidden_state`` out, the hidden states where asked),
    the Keras model handed to the converter, dynamic-range int8."""
    import tensorflow as tf

    spec = [tf.TensorSpec([2, 16], tf.int32, name=n) for n in ("input_ids", "attention_mask")]

    @tf.function(input_signature=spec)
    def serve(input_ids, attention_mask):
        out = model.model(input_ids, attention_mask=attention_mask, output_hidden_states=True)
        found = {"last_hidden_state": out.last_hidden_state}
        if hidden_states:
            found.update({f"hidden_states_{k}": h for k, h in enumerate(out.hidden_states)})
        return found

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [serve.get_concrete_function()], model.model
    )
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    path.write_bytes(converter.convert())
    return path


def test_a_users_own_conversion_without_token_types_or_pooler_reproduces_both_ways(
    source, tmp_path, capsys
):
    """The fresh conversion takes the file's inputs and outputs: a model served without
    token types folds its token-type row into a constant, one without ``pooler_output``
    has no pooler. Converted with tfparity's defaults instead, a clean file failed."""
    from tfparity import cli

    clean = users_int8(source, tmp_path / "users.tflite")
    scaled = damaged(clean, tmp_path / "scaled.tflite", lambda c: c.scales.__imul__(1.05))
    base = ["crosscheck", "--pt", "tiny:bert", "--random", "2", "--seq-len", "10", "--tf"]
    assert cli.main([*base, str(clean)]) == 0
    out = capsys.readouterr().out
    assert "requantisation: reproduces the LiteRT converter's fresh dynamic-range int8" in out
    assert cli.main([*base, str(scaled)]) == 1
    out = capsys.readouterr().out
    assert f"{FFN}/scale" in out and "scaled by 1.05" in out


def test_a_file_with_hidden_state_outputs_is_reproduced_with_them(source, tmp_path):
    path = users_int8(source, tmp_path / "hidden.tflite", hidden_states=True)
    twin = litert_twin(side(path), source)
    assert twin.skipped is None
    assert compare_requantised(twin.stored, twin.fresh).reproduces
    (batch,) = make_batches(side(path), InputOptions(random=2, seq_len=10, batch_size=2))
    assert set(twin.run_fresh(batch)) == set(twin.run_stored(batch))  # hidden states too
    assert "hidden_states[2]" in twin.run_fresh(batch)
