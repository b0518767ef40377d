"""The PyTorch adapter: weights copied from TF, or read from a checkpoint directory."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.reference.pt_model import PTModel, load_pt
from tfparity.errors import TfparityError


def test_tf_weights_copied_into_pytorch_t5_without_false_missing_notes(load_tf_model):
    tf_model = load_tf_model("tiny:t5")
    pt = PTModel.from_tf(tf_model.model)
    assert pt.notes == []  # encoder.embed_tokens.weight is tied to shared.weight
    assert pt.model.encoder.embed_tokens.weight is pt.model.shared.weight
    np.testing.assert_array_equal(
        pt.model.shared.weight.detach().numpy(), tf_model.word_embeddings().numpy()
    )


def test_minilm_from_its_checkpoint_runs_in_fp32_and_fp64(minilm):
    pt = load_pt("minilm")
    assert all(p.device.type == "cpu" for p in pt.model.parameters())
    from tfparity.api import make_batches
    from tfparity.inputs import InputOptions

    (batch,) = make_batches(minilm, InputOptions(texts=("Hello world.",)))
    fp32, fp64 = pt.run(batch), pt.run(batch, float64=True)
    assert fp32["last_hidden_state"].dtype == np.float32
    assert fp64["last_hidden_state"].dtype == np.float64
    diff = np.abs(fp32["last_hidden_state"] - fp64["last_hidden_state"]).max()
    assert 0 < diff < 1e-4  # fp32 rounding, nothing more


def test_pickle_only_directory_needs_the_flag(tmp_path):
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config

    transformers.BertModel(tiny_config("bert")).save_pretrained(tmp_path, safe_serialization=False)
    with pytest.raises(TfparityError, match="--allow-pickle"):
        PTModel.from_dir(tmp_path)
    assert PTModel.from_dir(tmp_path, allow_pickle=True).notes == []


def test_tiny_spec_gets_the_tf_weights():
    tf_model = TFModel.load("tiny:bert")
    pt = load_pt("tiny:bert")
    np.testing.assert_array_equal(
        pt.model.embeddings.word_embeddings.weight.detach().numpy(),
        tf_model.word_embeddings().numpy(),
    )


def test_a_reference_is_named_by_the_spec_not_a_machine_path():
    """Reports carry the reference's name: the spec the user typed, never the
    site-packages directory minilm lives in."""
    from tfparity.adapters.reference.pt_model import load_pt

    name = load_pt("minilm").name
    assert name == "BertModel (minilm)"
    assert "/" not in name


def test_a_reference_that_refuses_its_inputs_is_a_usage_error_naming_it(capsys):
    from tfparity.cli import main

    # Longformer's QA head asserts two separator tokens per question; random ids have none
    argv = ["crosscheck", "tiny:longformer/question-answering", "--random", "2", "--no-reload"]
    assert main([*argv, "--seq-len", "8"]) == 2
    err = capsys.readouterr().err
    assert "LongformerForQuestionAnswering) refused these inputs: AssertionError" in err
    assert "please report it" not in err
