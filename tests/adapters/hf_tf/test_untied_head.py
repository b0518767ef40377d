"""A GPT-2 checkpoint with an LM head of its own (``tie_word_embeddings=false``) against
transformers' TFGPT2LMHeadModel, which can only tie its head to the word embeddings
(tfparity/adapters/hf_tf/untied_head.py): the cause is named at load and in the hint;
the usual tied checkpoint passes without it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, save_tiny):
    """Tiny GPT-2 LMs saved as users save them: one untied with its own seeded head
    (``untied``), one tied as GPT-2 ships (``tied``)."""
    torch = pytest.importorskip("torch")
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config

    root = tmp_path_factory.mktemp("gpt2-heads")
    found = {}
    for name, tie in (("untied", False), ("tied", True)):
        config = tiny_config("gpt2")
        config.tie_word_embeddings = tie
        config.architectures = ["GPT2LMHeadModel"]
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(config)
        if not tie:
            with torch.no_grad():
                model.lm_head.weight.normal_(0.0, 0.02)  # a head of its own
        found[name] = save_tiny(model, root / name)
    return found


def test_an_untied_head_the_tf_class_cannot_hold_is_named(checkpoints, crosscheck_dir):
    report = crosscheck_dir(checkpoints["untied"])
    assert not report.passed
    d = report.first_divergence
    assert d.layer == "head", d
    assert "TFGPT2LMHeadModel cannot hold an untied head" in d.hint, d.hint
    assert "it dropped lm_head.weight" in d.hint, d.hint
    assert "computation itself differs" not in d.hint, d.hint
    notes = " ".join(report.notes)
    assert "lm_head.weight (an untied LM head: tie_word_embeddings=false) was dropped" in notes
    assert "not part of the model checked" not in notes, notes


def test_a_tied_head_passes_without_that_explanation(checkpoints, crosscheck_dir):
    report = crosscheck_dir(checkpoints["tied"])
    assert report.passed, report.first_divergence
    assert not any("untied" in note for note in report.notes), report.notes
