"""The public Python API: each check callable from `tfparity`, returning a Report."""

from __future__ import annotations

import numpy as np

import tfparity
from tfparity import Batch, InputOptions

IDS = np.array([[0, 10, 11, 12, 2]], np.int32)


def test_diagnose_names_hidden_states_0_and_accepts_word_embeddings(load_tf_model):
    model = load_tf_model("tiny:bert")
    types = np.zeros_like(IDS)
    hs0 = model.run(Batch(IDS, np.ones_like(IDS), types))["hidden_states[0]"]
    wrong = tfparity.diagnose(model, IDS, hs0, token_type_ids=types)
    assert wrong.passed is False
    assert wrong.details["verdict"] == "post_layernorm"
    assert wrong.details["recovered_ids_match"] == 1.0
    right = tfparity.diagnose(model, IDS, model.word_embeddings().numpy()[IDS])
    assert right.passed is True and right.details["verdict"] == "word_embeddings"


def test_check_tying_and_check_positions_return_reports(load_tf_model):
    model = load_tf_model("tiny:bert")
    inputs = InputOptions(random=2, seq_len=8)
    tying = tfparity.check_tying(model, inputs=inputs)
    assert tying.details["roundtrip"]["cosine"] == 1.0
    assert tying.details["tied"] is None  # the base model has no LM head
    positions = tfparity.check_positions(model, inputs=inputs, permutations=3)
    assert positions.passed and positions.details["equivariant"] is True
    assert positions.details["explicit_positions_match"] is True


def test_api_names_are_importable_without_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys, tfparity; "
        "[getattr(tfparity, n) for n in tfparity.__all__ if n not in tfparity._API]; "
        "assert 'tensorflow' not in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
