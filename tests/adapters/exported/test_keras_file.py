"""Keras 3 exports of a keras-hub backbone: a ``.keras`` file (checked as a keras-hub
model, taps included) and ``backbone.export(dir, format="tf_saved_model")`` (a
SavedModel with keras-hub's own input and output names), clean and with a layer-1 FFN
fault, each against its source and against PyTorch."""

from __future__ import annotations

import contextlib
import io

import pytest

pytest.importorskip("keras_hub")

from tfparity import InputOptions, cli  # noqa: E402
from tfparity.adapters.keras_hub.side import KerasHubModel, load_keras_hub  # noqa: E402
from tfparity.api import crosscheck, load_model  # noqa: E402
from tfparity.architectures import keras_hub_layouts  # noqa: E402
from tfparity.architectures.faults import scale  # noqa: E402
from tfparity.checks.crosscheck.export_source import export_verdict  # noqa: E402

INPUTS = InputOptions(random=4, seq_len=12, batch_size=2, seed=5)
SOURCE = "keras-hub:tiny:bert"


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The tiny BERT backbone as a clean and a faulty .keras file, and its Keras 3
    SavedModel export."""
    root = tmp_path_factory.mktemp("keras-exports")
    backbone = load_keras_hub(SOURCE).backbone
    backbone.save(root / "clean.keras")
    with contextlib.redirect_stdout(io.StringIO()):  # export() prints its endpoints
        backbone.export(str(root / "saved"), format="tf_saved_model")
    scale(keras_hub_layouts.block(backbone, 1)._feedforward_intermediate_dense.kernel, 1.1)
    backbone.save(root / "faulty.keras")
    return root


def test_a_keras_file_loads_as_a_keras_hub_model_bound_to_its_source(exports):
    side = load_model(str(exports / "clean.keras"), companion=SOURCE)
    assert isinstance(side, KerasHubModel) and side.tokenizer is not None
    assert side.localisable()  # the keras-hub layout's taps
    assert any("ported variables matched" in n for n in side.notes)


def test_clean_keras_file_matches_its_source_and_fails_pytorch_only_as_the_port_does(exports):
    reports = crosscheck(str(exports / "clean.keras"), source=SOURCE, inputs=INPUTS)
    vs_source, vs_pt, source_vs_pt = reports
    assert vs_source.passed and vs_source.worst().max_abs_diff == 0.0  # the same graph
    # keras-hub's BertBackbone hard-codes the tanh GELU: its known difference, not the file's
    assert not vs_pt.passed and not source_vs_pt.passed
    assert vs_pt.first_divergence.component == "intermediate"
    assert "known difference of this port" in vs_pt.first_divergence.hint
    rerun = "to check the rest of the port, rerun with --pt-config hidden_act=gelu_pytorch_tanh"
    # tests/adapters/reference/test_pt_config.py reruns it
    assert vs_pt.first_divergence.hint.endswith(rerun)
    assert "the port is at fault, not the export" in export_verdict(reports)


def test_faulty_keras_file_differs_from_its_source_at_layer_1(exports):
    (vs_source, vs_pt, _) = crosscheck(str(exports / "faulty.keras"), source=SOURCE, inputs=INPUTS)
    assert not vs_source.passed
    assert (vs_source.first_divergence.hidden_state, vs_source.first_divergence.layer) == (2, 1)
    assert not vs_pt.passed  # (first at layer 0: the port's own GELU difference)


def test_keras_hub_saved_model_export_maps_keras_hub_names(exports):
    reports = crosscheck(str(exports / "saved"), source=SOURCE, inputs=INPUTS)
    vs_source, vs_pt, _ = reports
    assert vs_source.passed, [c.name for c in vs_source.failures]
    assert {c.name for c in vs_source.comparisons} == {"last_hidden_state", "pooler_output"}
    assert any("token_ids <- input_ids" in n for n in vs_source.notes)
    assert not vs_pt.passed  # the tanh GELU again, now at the outputs: no hidden states
    assert vs_pt.first_divergence.layer == "output"
    assert any("keras-hub" in n and "gelu" in n.lower() for n in vs_pt.notes)


def test_a_keras_file_of_another_model_is_checked_as_a_model_of_your_own(tmp_path, capsys):
    """Not a keras-hub model: its outputs are compared as a user's model (here an
    embedding lookup, not BERT: it fails at the outputs, exit 1); a model whose inputs
    tfparity cannot feed exits 2 naming them."""
    import keras

    from tfparity.adapters.sources.tiny import tiny_config

    config = tiny_config("bert")
    ids = keras.Input((None,), dtype="int32", name="input_ids")
    hidden = keras.layers.Embedding(config.vocab_size, config.hidden_size)(ids)
    keras.Model(ids, hidden).save(tmp_path / "mine.keras")
    args = ["crosscheck", str(tmp_path / "mine.keras"), "--pt", "tiny:bert", "--no-reload"]
    assert cli.main([*args, "--random", "2", "--seq-len", "8"]) == 1
    out = capsys.readouterr().out
    assert "as a model of your own" in out and "not localised to a layer" in out
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.save(tmp_path / "other.keras")
    args = ["crosscheck", str(tmp_path / "other.keras"), "--pt", "tiny:bert"]
    assert cli.main([*args, "--random", "2"]) == 2
    assert "other.keras" in capsys.readouterr().err
