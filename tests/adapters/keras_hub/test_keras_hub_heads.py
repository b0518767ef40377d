"""A keras-hub ``BertMaskedLM`` and ``BertTextClassifier`` saved to ``.keras`` (float, and
after ``quantize("int8")``) are checked whole against the matching Hugging Face head
through BERT's head map (keras-hub's converters port no text head): logits and every
hidden state, the masked LM's distribution metrics, and weight hints that name a damaged
head weight. Quantised, the tasks are checked as held (Keras 3.15 loads neither back from
a quantised ``.keras``). The artefacts are built once from tiny seeded checkpoints, their heads
loaded through the same map (:func:`port_head`)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("keras_hub")

from tfparity import InputOptions, render  # noqa: E402
from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir  # noqa: E402
from tfparity.adapters.keras_hub.heads import KerasHubHeadTask, port_head  # noqa: E402
from tfparity.adapters.keras_hub.side import import_keras_hub  # noqa: E402
from tfparity.adapters.tf_common.quantize import quantize  # noqa: E402
from tfparity.api import check_embeds, crosscheck, load_model, make_batches  # noqa: E402
from tfparity.architectures.faults import scale  # noqa: E402
from tfparity.architectures.heads import Head  # noqa: E402

INPUTS = InputOptions(random=5, seq_len=8, batch_size=5, seed=3)  # 5: the bootstrap's least
FLOAT_INPUTS = InputOptions(random=2, seq_len=8, seed=3)  # the referee needs no more
# keras-hub's BertBackbone runs the tanh GELU (its known difference, docs/keras-hub.md):
# the reference runs it too, so what is judged is the head
PT_CONFIG = {"hidden_act": "gelu_pytorch_tanh"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The tiny BERT masked-LM checkpoint and a sequence-classification one made from it
    (3 labels, seeded head); each keras-hub task with its head ported, saved float,
    damaged (the MLM head's LayerNorm gamma x1.05; the classifier's output channel 1
    negated); then each task quantised to int8 in memory."""
    import keras
    import torch
    import transformers

    keras_hub = import_keras_hub()
    root = tmp_path_factory.mktemp("keras-heads")
    mlm_ckpt = checkpoint_dir("bert")
    torch.manual_seed(0)
    transformers.BertForSequenceClassification.from_pretrained(
        str(mlm_ckpt), num_labels=3
    ).save_pretrained(str(root / "cls"))
    mlm = keras_hub.models.BertMaskedLM(
        backbone=keras_hub.models.Backbone.from_preset(str(mlm_ckpt)), preprocessor=None
    )
    clf = keras_hub.models.BertTextClassifier(
        backbone=keras_hub.models.Backbone.from_preset(str(root / "cls")),
        num_classes=3,
        preprocessor=None,
    )
    assert "cls.predictions.transform.dense.weight" in port_head(mlm, mlm_ckpt)
    assert port_head(clf, root / "cls") == ["classifier.weight", "classifier.bias"]
    for name, task in (("mlm", mlm), ("clf", clf)):
        task.save(root / f"{name}.keras")
    gamma = mlm.masked_lm_head._intermediate_layer_norm.gamma
    scale(gamma, 1.05)
    mlm.save(root / "mlm-damaged.keras")
    scale(gamma, 1 / 1.05)
    kernel = clf.output_dense.kernel
    kernel.assign(kernel * keras.ops.convert_to_tensor([1.0, -1.0, 1.0]))
    clf.save(root / "clf-damaged.keras")
    kernel.assign(kernel * keras.ops.convert_to_tensor([1.0, -1.0, 1.0]))
    for task in (mlm, clf):  # model.quantize("int8"), one garbage collection, not one a layer
        quantize(task, "int8")
    return {"mlm": str(mlm_ckpt), "clf": str(root / "cls"), "root": root, "int8": (mlm, clf)}


def check(files, name, head):
    path = str(files["root"] / f"{name}.keras")
    (report,) = crosscheck(path, pt=files[head], pt_config=PT_CONFIG, inputs=FLOAT_INPUTS)
    return report


def test_a_classifier_file_is_checked_whole_and_passes(files):
    side = load_model(str(files["root"] / "clf.keras"), companion=files["clf"])
    assert isinstance(side, KerasHubHeadTask) and side.head is Head.SEQUENCE_CLASSIFICATION
    report = check(files, "clf", "clf")
    assert report.passed, render(report)
    assert report.details["reference"].startswith("BertForSequenceClassification")
    assert {"logits", "hidden_states[0]", "hidden_states[2]"} <= {
        c.name for c in report.comparisons
    }
    (labels,) = [a for a in report.details["agreement"] if a["measure"] == "label"]
    assert labels["agree"] == labels["total"] == 2
    assert not any("is not checked" in n or "Unused weights" in n for n in report.notes)


def test_a_classifier_channel_negated_fails_at_the_head_naming_the_weight(files):
    report = check(files, "clf-damaged", "clf")
    assert not report.passed and [c.name for c in report.failures] == ["logits"]
    d = report.first_divergence
    assert (d.layer, d.component) == ("head", "head")
    assert "classifier.weight" in d.hint and "pooler" not in d.hint


def test_a_masked_lm_file_is_judged_at_its_logits_with_the_heads_known_difference(files):
    """Every hidden state passes; the logits are compared with the distribution metrics,
    and part from transformers' only by keras-hub's MaskedLMHead (LayerNorm epsilon
    1e-5, exact GELU), which the report says: no weight is blamed."""
    report = check(files, "mlm", "mlm")
    assert report.details["head"] == "masked-lm"
    assert [c.name for c in report.failures] == ["logits"]
    assert report.details["distribution"]["same_top1"] == 1.0
    assert any("MaskedLMHead" in n and "epsilon 1e-5" in n for n in report.notes)
    d = report.first_divergence
    assert (d.layer, d.component) == ("head", "head")
    assert "scaled by" not in d.hint and "not ported" not in d.hint


def test_a_masked_lm_head_weight_scaled_is_named_with_its_factor(files):
    report = check(files, "mlm-damaged", "mlm")
    assert not report.passed and [c.name for c in report.failures] == ["logits"]
    d = report.first_divergence
    assert (d.layer, d.component) == ("head", "head")
    assert "cls.predictions.transform.LayerNorm.weight" in d.hint and "scaled by 1.05" in d.hint


@pytest.mark.parametrize("name", ["mlm", "clf"])
def test_an_int8_head_task_passes_its_budgets_with_the_distribution(files, name):
    """Quantised in memory: Keras 3.15 cannot load these tasks back from a ``.keras``
    file once quantised (their heads' Dense layers are built unquantised on load), so
    the held task is what there is to check."""
    task = files["int8"][0 if name == "mlm" else 1]
    (report,) = crosscheck(tf=task, pt=files[name], pt_config=PT_CONFIG, inputs=INPUTS)
    assert report.passed, render(report)
    assert report.details["quantisation"] == "keras int8"
    assert report.details["head"] == ("masked-lm" if name == "mlm" else "sequence-classification")
    assert "logits" in {c.name for c in report.comparisons}
    if name == "mlm":  # an LM: KL and same-top-1 with their interval
        d = report.details["distribution"]
        assert 0 <= d["kl_mean"] < 0.015 and d["same_top1"] >= 0.95
        assert "95% CI [" in render(report)


def test_an_int8_tasks_embeds_path_reproduces_its_ids_path_exactly(files):
    """A quantised token embedding holds int8 rows and a scale per row: the embeds fed are
    its rows dequantised, and the task's lookup (Keras calls its quantized_call) answers
    with them, so the two paths agree exactly. Its stored integers without the scale, or
    one token's row scaled by 1.05, FAIL from hidden_states[0] on."""
    side = load_model(files["int8"][1], pt=files["clf"])
    batches = make_batches(side, FLOAT_INPUTS)
    report = check_embeds(side, batches=batches)
    assert report.passed, render(report)
    assert max(c.max_abs_diff for c in report.comparisons) == 0
    assert "logits" in [c.name for c in report.comparisons]
    token = int(batches[0].input_ids[0, 1])

    def one_row_scaled(batch):
        rows = np.asarray(side.gather(batch.input_ids))
        return np.where((batch.input_ids == token)[..., None], rows * 1.05, rows)

    def without_scale(batch):
        return np.asarray(side.word_embeddings())[batch.input_ids].astype(np.float32)

    for embeds_fn in (one_row_scaled, without_scale):
        report = check_embeds(side, batches=batches, embeds_fn=embeds_fn)
        assert not report.passed and report.first_divergence.hidden_state == 0
