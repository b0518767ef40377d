"""keras-hub's causal-LM task models as a TF side (tfparity/adapters/keras_hub_task.py):
which spec gives the task, the cross-check with the task's own logits (top-1 agreement,
a broken LM head localised to the head with its weight named), and generation through
keras-hub's own ``CausalLM.generate`` (tfparity/adapters/keras_hub_generation.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

pytest.importorskip("keras_hub")

from tfparity import InputOptions, cli  # noqa: E402
from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir  # noqa: E402
from tfparity.adapters.interfaces.sides import TFSideBase  # noqa: E402
from tfparity.adapters.keras_hub.task import KerasHubCausalLM  # noqa: E402
from tfparity.api import check_embeds, crosscheck, generate, load_model, make_batches  # noqa: E402
from tfparity.architectures import keras_hub_layouts  # noqa: E402
from tfparity.architectures.faults import scale  # noqa: E402
from tfparity.architectures.heads import Head  # noqa: E402
from tfparity.errors import TfparityError  # noqa: E402

INPUTS = InputOptions(random=2, seq_len=8, batch_size=2, seed=1)
QWEN2 = "keras-hub:tiny:qwen2/causal-lm"
PROMPT = ["The quick brown fox"]
N = 6


# ----------------------------------------------------------------------------- which side


def test_the_head_follows_the_flag_the_spec_and_the_checkpoint_config():
    """A checkpoint whose config.architectures names a causal LM is its task; --head base
    is the backbone as before; tiny:<type> is the base model unless it names a head."""
    directory = checkpoint_dir("qwen2")  # saved as Qwen2ForCausalLM
    task = load_model(f"keras-hub:{directory}")
    assert isinstance(task, KerasHubCausalLM) and task.head is Head.CAUSAL_LM
    assert type(task.model).__name__ == "QwenCausalLM" and task.headless_reason is None
    backbone = load_model(f"keras-hub:{directory}", head="base")
    assert not isinstance(backbone, KerasHubCausalLM) and backbone.head is Head.BASE
    assert load_model("keras-hub:tiny:qwen2").head is Head.BASE
    assert load_model("keras-hub:tiny:qwen2", head="causal-lm").head is Head.CAUSAL_LM


@pytest.mark.parametrize(
    "argv, words",
    [
        (["crosscheck", "keras-hub:tiny:bert", "--head", "causal-lm"], "no CausalLM task"),
        (["crosscheck", "keras-hub:tiny:qwen2", "--head", "masked-lm"], "--head causal-lm"),
        (["generate", "keras-hub:tiny:bert"], "no CausalLM task for BertBackbone"),
    ],
)
def test_a_head_keras_hub_has_no_task_for_exits_2_naming_why(argv, words, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


@dataclass
class _NoDecoding(TFSideBase):
    name: str = "my-export"


def test_a_side_without_decoding_refuses_to_generate_naming_its_kind():
    with pytest.raises(TfparityError, match="my-export is a _NoDecoding, which tfparity cannot"):
        _NoDecoding().generator()


# ----------------------------------------------------------------------------- cross-check


def test_a_clean_causal_lm_passes_with_its_logits_and_top1_agreement():
    (report,) = crosscheck("keras-hub:tiny:gpt2/causal-lm", inputs=INPUTS, reload=False)
    assert report.passed, [(c.name, c.max_abs_diff) for c in report.failures]
    assert report.details["head"] == "causal-lm"
    assert report.details["reference"] == "PyTorch tiny:gpt2/causal-lm"
    names = [c.name for c in report.comparisons]
    assert "logits" in names and "hidden_states[2]" in names
    (top1,) = [a for a in report.details["agreement"] if a["measure"] == "top-1"]
    assert top1["output"] == "logits" and top1["agree"] == top1["total"] > 0


def test_a_scaled_lm_head_fails_at_the_head_naming_the_weight():
    """Qwen2 unties its head: keras-hub ports lm_head.weight into the token embedding's
    reverse_embeddings, so scaling those leaves every hidden state right."""
    model = load_model(QWEN2)
    scale(model.backbone.token_embedding.reverse_embeddings, 1.1)
    (report,) = crosscheck(model, pt=QWEN2, inputs=INPUTS)
    assert not report.passed
    assert [c.name for c in report.failures] == ["logits"]
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (None, "head", "head")
    assert d.hint == "weight lm_head.weight is PyTorch's scaled by 1.1 (a uniform scale)"


def test_the_embeds_path_gives_the_tasks_logits_too():
    """Gemma scales the embeddings by sqrt(d) after the lookup: the embeds path keeps it."""
    model = load_model("keras-hub:tiny:gemma/causal-lm")
    report = check_embeds(model, batches=make_batches(model, INPUTS))
    assert report.passed, [(c.name, c.max_abs_diff) for c in report.failures]
    assert "logits" in [c.name for c in report.comparisons]


# ----------------------------------------------------------------------------- generate


def test_keras_hub_generate_agrees_on_every_token_with_a_consistent_cache():
    report = generate("keras-hub:tiny:qwen2", new_tokens=N, texts=PROMPT)
    assert report.passed, [c.problem for c in report.failures]
    assert report.details["kv_cache"] == "yes" and report.details["embeds_start"] == "compared"
    (p,) = report.details["generation"]
    assert p["tf_tokens"] == p["pt_tokens"] == p["embeds_tokens"] and p["tokens_agreed"] == N
    assert all(s["cache_ok"] and s["embeds_ok"] for s in p["steps"])
    assert any("QwenCausalLM.generate" in n for n in report.notes)


def test_a_fault_that_changes_greedy_tokens_fails_naming_the_step_and_the_layer():
    model = load_model(QWEN2)
    scale(keras_hub_layouts.block(model.backbone, 1)._feedforward_intermediate_dense.kernel, 3.0)
    report = generate(model, pt=QWEN2, new_tokens=N, texts=PROMPT, embeds=False)
    assert not report.passed
    (p,) = report.details["generation"]
    first = p["first_divergent_step"]
    assert first is not None and first["tf_token"] != first["pt_token"]
    assert p["tf_tokens"][: first["step"]] == p["pt_tokens"][: first["step"]]
    assert not p["cache_failures"]  # the forward pass is broken, the cache is not
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (2, 1)
    assert f"first divergent step {first['step']}" in d.hint
    assert "layers.1.mlp.up_proj.weight" in d.hint and "scaled by 3" in d.hint


def test_a_fault_only_in_the_tasks_cached_decoding_is_caught_by_cache_consistency():
    """The cached logits judged are those keras-hub's generate chose from: a KV cache
    scaled inside call_with_cache shows at every step (keras-hub decodes even the first
    new token on the cache its prefill built), and nowhere else."""
    model = load_model(QWEN2)
    task = model.task
    own = task.call_with_cache

    def scaled_cache(token_ids, cache, index, *args, **kwargs):
        return own(token_ids, cache * 1.05, index, *args, **kwargs)

    task.call_with_cache = scaled_cache  # the prefill's cache starts as zeros: unchanged
    report = generate(model, pt=QWEN2, new_tokens=4, texts=PROMPT)
    (p,) = report.details["generation"]
    assert not report.passed and p["cache_failures"] == [0, 1, 2, 3]
    assert not p["embeds_failures"] and not p["defects"]  # recomputation is untouched
    assert [c.name for c in report.failures] == ["prompt 0: cache"]
    assert np.isfinite([s["cache_rmse"] for s in p["steps"]]).all()


# ----------------------------------------------------------------------------- unported heads


@pytest.fixture(scope="module")
def classifier_checkpoint(tmp_path_factory):
    """A DistilBERT sequence-classification checkpoint (tiny body, seeded head), and a
    keras-hub TextClassifier converted from it (keras-hub ports the backbone only and
    makes the head up), also saved as a ``.keras`` file. DistilBERT's backbone passes,
    so a verdict here is about the head."""
    import keras_hub
    import torch
    import transformers

    root = tmp_path_factory.mktemp("seq-cls")
    torch.manual_seed(0)
    model = transformers.DistilBertForSequenceClassification.from_pretrained(
        str(checkpoint_dir("distilbert")), num_labels=3
    )
    model.save_pretrained(str(root / "ckpt"))
    task = keras_hub.models.DistilBertTextClassifier.from_preset(
        str(root / "ckpt"), num_classes=3, preprocessor=None
    )
    task.save(str(root / "task.keras"))
    return str(root / "ckpt"), task, str(root / "task.keras")


RANDOM = ["--random", "2", "--seq-len", "8", "--no-reload"]


def test_a_keras_file_of_a_text_classifier_exits_2_naming_its_unported_head(
    classifier_checkpoint, capsys
):
    ckpt, _, keras_file = classifier_checkpoint
    assert cli.main(["crosscheck", keras_file, "--pt", ckpt, *RANDOM]) == 2
    err = capsys.readouterr().err
    assert "DistilBertTextClassifier" in err and "logits/kernel" in err
    assert "--head base" in err and "Traceback" not in err
    assert cli.main(["crosscheck", keras_file, "--pt", ckpt, "--head", "base", *RANDOM]) == 0
    out = capsys.readouterr().out
    assert "the task's head (pooled_dense/kernel" in out and "is not checked" in out
    assert out.splitlines()[-3].startswith("PASS crosscheck")


def test_a_text_classifier_held_in_memory_is_refused_unless_head_base(classifier_checkpoint):
    ckpt, task, _ = classifier_checkpoint
    with pytest.raises(TfparityError, match=r"DistilBertTextClassifier\) whose head \(.*logits"):
        crosscheck(tf=task, pt=ckpt, inputs=INPUTS)
    (report,) = crosscheck(tf=task, pt=ckpt, head="base", inputs=INPUTS)
    assert report.passed, [c.name for c in report.failures]
    assert any("head (" in n and "is not checked" in n for n in report.notes)
    assert "logits" not in {c.name for c in report.comparisons}


def test_a_classifier_checkpoint_as_keras_hub_checks_its_backbone_saying_the_head_is_not(
    classifier_checkpoint, capsys
):
    ckpt, _, _ = classifier_checkpoint
    (report,) = crosscheck(f"keras-hub:{ckpt}", inputs=INPUTS, reload=False)
    assert report.passed and report.details["reference"].startswith("DistilBertModel")
    assert any("sequence-classification head is not checked" in n for n in report.notes)
    argv = ["crosscheck", f"keras-hub:{ckpt}", "--head", "sequence-classification", *RANDOM]
    assert cli.main(argv) == 2
    assert "--head base" in capsys.readouterr().err
