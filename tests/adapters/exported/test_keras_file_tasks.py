"""A keras-hub ``CausalLM`` saved to ``.keras`` (float, or after ``quantize("int8")``)
and a task's preset directory are checked as the task they are, as a
``keras-hub:<SPEC>/causal-lm`` spec is: logits and every hidden state against the
checkpoint's causal LM, the distribution metrics and their bootstrap interval, and
``generate`` through the task's own ``generate``. A task whose head keras-hub never
ports and tfparity maps onto none (DistilBERT's ``MaskedLM``) keeps its refusal, and
``--head`` naming another kind than the file's task exits 2 naming both. Two families:
Llama (untied head, ported into ``reverse_embeddings``) and GPT-2 (tied)."""

from __future__ import annotations

import pytest

pytest.importorskip("keras_hub")

from tfparity import InputOptions, cli, render  # noqa: E402
from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir  # noqa: E402
from tfparity.adapters.keras_hub.side import import_keras_hub  # noqa: E402
from tfparity.adapters.keras_hub.task import KerasHubCausalLM  # noqa: E402
from tfparity.api import crosscheck, generate, load_model  # noqa: E402
from tfparity.architectures import keras_hub_layouts  # noqa: E402
from tfparity.architectures.faults import scale  # noqa: E402
from tfparity.architectures.heads import Head  # noqa: E402

INPUTS = InputOptions(random=5, seq_len=8, batch_size=5, seed=3)  # 5: the bootstrap's least
PROMPTS = InputOptions(random=2, seq_len=6, seed=3)
N = 5
# keras-hub's Llama converter drops rms_norm_eps (its known difference, docs/keras-hub.md):
# the reference is run with keras-hub's, so what is judged is the file
PT_CONFIG = {"llama": {"rms_norm_eps": 1e-6}, "gpt2": None}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Per family, its tiny causal-LM checkpoint and the keras-hub task converted from
    it, saved float (``float.keras``), with one weight scaled by 1.05
    (``scaled.keras``: Llama's untied LM head, GPT-2's layer-1 up-projection) and after
    ``quantize("int8")`` (``int8.keras``; Llama's also as a preset directory)."""
    keras_hub = import_keras_hub()
    root = tmp_path_factory.mktemp("keras-tasks")
    found = {}
    for family in ("llama", "gpt2"):
        ckpt = checkpoint_dir(family)
        task = keras_hub.models.CausalLM.from_preset(str(ckpt), preprocessor=None)
        (root / family).mkdir()
        task.save(root / family / "float.keras")
        if family == "llama":
            weight = task.backbone.token_embedding.reverse_embeddings
        else:
            weight = keras_hub_layouts.block(
                task.backbone, 1
            )._feedforward_intermediate_dense.kernel
        scale(weight, 1.05)
        task.save(root / family / "scaled.keras")
        scale(weight, 1 / 1.05)
        task.quantize("int8")
        task.save(root / family / "int8.keras")
        if family == "llama":
            task.save_to_preset(str(root / family / "int8-preset"))
        found[family] = (str(ckpt), root / family)
    return found


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_a_float_causal_lm_file_is_checked_with_its_logits_and_passes(files, family):
    ckpt, root = files[family]
    side = load_model(str(root / "float.keras"), companion=ckpt)
    assert isinstance(side, KerasHubCausalLM) and side.head is Head.CAUSAL_LM
    (report,) = crosscheck(
        str(root / "float.keras"), pt=ckpt, pt_config=PT_CONFIG[family], inputs=INPUTS
    )
    assert report.passed, [(c.name, c.max_abs_diff) for c in report.failures]
    assert report.details["head"] == "causal-lm"
    assert report.details["reference"].startswith(("LlamaForCausalLM", "GPT2LMHeadModel"))
    names = {c.name for c in report.comparisons}
    assert {"logits", "hidden_states[0]", "hidden_states[2]"} <= names
    (top1,) = [a for a in report.details["agreement"] if a["measure"] == "top-1"]
    assert top1["agree"] == top1["total"] > 0
    assert not any("the task's head is not" in n for n in report.notes)
    assert not any("Unused weights" in n for n in report.notes)


def test_an_lm_head_scaled_in_the_file_fails_at_the_head_naming_the_weight(files):
    """Llama's head is untied (lm_head.weight, in reverse_embeddings): every hidden state
    stays right, the logits fail, and the hint names the weight and the factor."""
    ckpt, root = files["llama"]
    (report,) = crosscheck(
        str(root / "scaled.keras"), pt=ckpt, pt_config=PT_CONFIG["llama"], inputs=INPUTS
    )
    assert not report.passed and [c.name for c in report.failures] == ["logits"]
    d = report.first_divergence
    assert (d.layer, d.component) == ("head", "head")
    assert "lm_head.weight" in d.hint and "scaled by 1.05" in d.hint


def test_a_block_weight_scaled_in_the_file_fails_at_its_layer(files):
    ckpt, root = files["gpt2"]
    (report,) = crosscheck(str(root / "scaled.keras"), pt=ckpt, inputs=INPUTS)
    assert not report.passed and "logits" in {c.name for c in report.failures}
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (2, 1)
    assert "h.1.mlp.c_fc.weight" in d.hint and "scaled by 1.05" in d.hint


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_an_int8_causal_lm_file_passes_its_distribution_budget_with_its_interval(files, family):
    ckpt, root = files[family]
    (report,) = crosscheck(str(root / "int8.keras"), pt=ckpt, inputs=INPUTS)
    assert report.passed, render(report)
    assert report.details["quantisation"] == "keras int8"
    d = report.details["distribution"]
    assert 0 <= d["kl_mean"] < 0.015 and d["same_top1"] >= 0.95
    text = render(report)
    # the tiny models' logits hold near ties: one flip in 20 positions leaves same_top1's
    # interval straddling 0.95 (INCONCLUSIVE, which does not fail); KL decides
    assert "over 5 sequences, 1000 bootstrap resamples" in text
    assert "kl_mean<=0.015 PASS (" in text and "same_top1>=0.95 " in text
    assert "95% CI [" in text


def test_a_quantised_task_preset_is_checked_as_its_causal_lm(files):
    """keras-hub's Backbone.from_preset cannot read a quantised task's preset; its task
    loads it whole, and the preset is checked with its logits."""
    ckpt, root = files["llama"]
    spec = f"keras-hub:{root / 'int8-preset'}"
    (report,) = crosscheck(spec, pt=ckpt, inputs=INPUTS)
    assert report.passed, render(report)
    assert report.details["head"] == "causal-lm"
    assert report.details["quantisation"] == "keras int8"
    assert report.details["distribution"]["same_top1"] >= 0.95


@pytest.mark.parametrize("family, stored", [("llama", "float"), ("gpt2", "int8")])
def test_generate_runs_on_a_stored_causal_lm_and_its_tokens_agree(files, family, stored):
    ckpt, root = files[family]
    report = generate(
        str(root / f"{stored}.keras"),
        pt=ckpt,
        pt_config=PT_CONFIG[family],
        new_tokens=N,
        inputs=PROMPTS,
    )
    assert report.passed, [c.problem for c in report.failures]
    rows = report.details["generation"]
    assert len(rows) == 2 and all(r["tokens_agreed"] == N for r in rows)
    if stored == "int8":  # judged by its mode's budget, not the float64 referee per step
        assert report.details["judge"].startswith("the int8 distribution budget")
        assert report.details["quantisation"]["quantised"].startswith("stored quantised")


def test_a_head_the_file_is_not_exits_2_naming_both(files, capsys):
    ckpt, root = files["gpt2"]
    argv = ["crosscheck", str(root / "float.keras"), "--pt", ckpt, "--random", "2"]
    assert cli.main([*argv, "--head", "masked-lm"]) == 2
    err = capsys.readouterr().err
    assert "GPT2CausalLM, a causal-lm task" in err and "--head masked-lm" in err
    assert "Traceback" not in err
    assert cli.main([*argv, "--seq-len", "8", "--head", "base"]) == 0  # its backbone only
    assert "its backbone (GPT2Backbone) is checked" in capsys.readouterr().out


def test_a_masked_lm_file_keeps_the_refusal_of_an_unported_head(tmp_path, capsys):
    """keras-hub's converters never port a MaskedLM's head (its own dense, norm and
    bias), and tfparity maps DistilBERT's onto none (BERT's it does:
    tests/adapters/keras_hub/test_keras_hub_heads.py): the file is refused, naming the
    head's variables, unless --head base."""
    keras_hub = import_keras_hub()
    ckpt = str(checkpoint_dir("distilbert"))
    task = keras_hub.models.DistilBertMaskedLM(
        backbone=keras_hub.models.Backbone.from_preset(ckpt), preprocessor=None
    )
    task.save(tmp_path / "mlm.keras")
    argv = ["crosscheck", str(tmp_path / "mlm.keras"), "--pt", ckpt, "--random", "2"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "DistilBertMaskedLM" in err and "mlm_head" in err and "--head base" in err
    assert "no map of DistilBertMaskedLM's head" in err
    assert cli.main([*argv, "--head", "causal-lm"]) == 2
    assert "DistilBertMaskedLM, a masked-lm task" in capsys.readouterr().err


def test_a_causal_lm_held_in_memory_is_checked_whole_too(files):
    import keras

    ckpt, root = files["gpt2"]
    task = keras.saving.load_model(root / "float.keras", compile=False)
    (report,) = crosscheck(tf=task, pt=ckpt, inputs=INPUTS)
    assert report.passed, [(c.name, c.max_abs_diff) for c in report.failures]
    assert report.details["head"] == "causal-lm"
    assert "logits" in {c.name for c in report.comparisons}
