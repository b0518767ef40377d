"""keras-hub (Keras 3) backbones as a TF side: specs, the embeds check, the cross-check
against Hugging Face PyTorch (verdicts of keras-hub's converters, as docs/keras-hub.md
states them), and the fault catalogue injected into keras-hub backbones."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("keras_hub")

from tfparity import InputOptions, cli  # noqa: E402
from tfparity.adapters.keras_hub.side import load_keras_hub  # noqa: E402
from tfparity.adapters.reference.pt_model import load_pt  # noqa: E402
from tfparity.adapters.sources.specs import parse_spec  # noqa: E402
from tfparity.api import check_embeds, make_batches  # noqa: E402
from tfparity.architectures import keras_hub_layouts, lookup  # noqa: E402
from tfparity.architectures.faults import scale  # noqa: E402
from tfparity.checks.crosscheck.check import crosscheck  # noqa: E402
from tfparity.errors import TfparityError  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
INPUTS = InputOptions(random=6, seq_len=16, batch_size=3, seed=1)


def _table_script():
    spec = importlib.util.spec_from_file_location("kht", ROOT / "scripts" / "keras_hub_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- specs


def test_keras_hub_specs_parse_to_the_checkpoint_they_convert():
    spec = parse_spec("keras-hub:tiny:llama")
    assert spec.kind == "keras-hub" and spec.inner.kind == "tiny"
    assert spec.inner.location == "llama"
    with pytest.raises(TfparityError, match="names no checkpoint"):
        parse_spec("keras-hub:")


def test_without_keras_hub_the_spec_exits_2_naming_the_extra(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "keras_hub" else real(name, *a),
    )
    with pytest.raises(TfparityError, match=r"pip install 'tfparity\[keras-hub\]'"):
        parse_spec("keras-hub:tiny:bert")
    assert cli.main(["check", "keras-hub:tiny:bert", "--no-pt"]) == 2
    assert "tfparity[keras-hub]" in capsys.readouterr().err


# ----------------------------------------------------------------------------- embeds


@pytest.mark.parametrize("inner", ["tiny:bert", "tiny:roberta", "tiny:gpt2", "tiny:gemma"])
def test_the_embeds_path_matches_the_ids_path_on_keras_3(inner):
    model = load_keras_hub(f"keras-hub:{inner}")
    report = check_embeds(model, batches=make_batches(model, INPUTS))
    assert report.passed, [(c.name, c.max_abs_diff) for c in report.failures]
    assert sum(c.name.startswith("hidden_states[") for c in report.comparisons) == 3
    assert any("functional graph cut" in n for n in report.notes)


def test_cli_check_and_crosscheck_accept_keras_hub_specs(tmp_path, capsys):
    """`check` on a keras-hub port is the embeds check alone (saying where the PyTorch
    comparison is); `crosscheck` compares with PyTorch."""
    out = tmp_path / "r.json"
    assert cli.main(["check", "keras-hub:tiny:qwen2", "--json", str(out)]) == 0
    reports = json.loads(out.read_text())
    reports = reports if isinstance(reports, list) else reports.get("reports", [reports])
    assert [r["check"] for r in reports] == ["embeds"]
    assert any("tfparity crosscheck keras-hub:tiny:qwen2" in n for n in reports[0]["notes"])
    html = tmp_path / "r.html"
    args = ["crosscheck", "--tf", "keras-hub:tiny:llama", "--pt", "tiny:llama"]
    assert cli.main([*args, "--html", str(html)]) == 1  # the rms_norm_eps finding
    assert "rms_norm_eps" in capsys.readouterr().out and html.is_file()


@pytest.mark.parametrize("flag", ["--save-outputs", "--load-outputs"])
def test_check_refuses_golden_outputs_for_keras_hub_pointing_at_crosscheck(flag, capsys):
    assert cli.main(["check", "keras-hub:tiny:bert", flag, "x.npz"]) == 2
    err = capsys.readouterr().err
    assert "tfparity crosscheck keras-hub:tiny:bert" in err and "Traceback" not in err


def test_check_on_minilm_is_the_embeds_check_and_passes(capsys):
    """The issue's done-when: `check keras-hub:minilm` passes (the tanh-GELU finding is
    crosscheck's to report, see test_the_bert_finding_...)."""
    assert cli.main(["check", "keras-hub:minilm"]) == 0
    out = capsys.readouterr().out
    assert "PASS embeds" in out and "tfparity crosscheck ·" not in out
    assert "Hugging Face PyTorch is `tfparity crosscheck keras-hub:minilm`" in out


@pytest.mark.parametrize(
    "inner,passed", [("tiny:qwen2", True), ("tiny:llama", False)], ids=["qwen2", "llama"]
)
def test_sweep_runs_keras_hub_specs_eagerly_with_right_verdicts(inner, passed, tmp_path):
    """A right converter (Qwen) passes every item; Llama's rms_norm_eps finding fails
    every item's cross-check and nothing else. No LM head: top-1 says why."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nthe cat sat on the mat\n")
    out = tmp_path / "s"
    args = ["sweep", f"keras-hub:{inner}", "--texts", str(corpus), "--out", str(out)]
    assert cli.main([*args, "--checks", "embeds,crosscheck,positions"]) == (0 if passed else 1)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for r in records:
        assert r["checks"]["embeds"]["passed"] is True
        assert r["checks"]["crosscheck"]["passed"] is passed
        assert r["checks"]["positions"]["passed"] is None  # rotary: does not apply
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["execution"] == "eager" and summary["failed"] == (0 if passed else 2)
    manifest = json.loads((out / "run.json").read_text())
    assert "no LM head" in manifest["top1_note"]["crosscheck"]


def test_sweep_refuses_compiled_runs_of_keras_hub_specs(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\n")
    args = ["sweep", "keras-hub:tiny:bert", "--texts", str(corpus), "--out", str(tmp_path)]
    assert cli.main([*args, "--graph"]) == 2
    assert "run eagerly in float32" in capsys.readouterr().err


def test_the_pytest_fixture_loads_keras_hub_specs():
    from tfparity.pytest_plugin import _Session

    model = _Session(None, None).load("keras-hub:tiny:gpt2")
    assert type(model.backbone).__name__ == "GPT2Backbone"


# ----------------------------------------------------------------------------- presets


def _preset(tmp_path, inner, change=None):
    """``keras-hub:<inner>`` written by keras-hub's own save_to_preset (after ``change``
    edits its backbone), as a keras-hub:<dir> spec."""
    model = load_keras_hub(f"keras-hub:{inner}")
    if change is not None:
        change(model.backbone)
    directory = tmp_path / inner.replace(":", "-")
    model.backbone.save_to_preset(str(directory))
    return f"keras-hub:{directory}"


def test_a_bert_preset_passes_the_embeds_check_and_has_no_tokenizer(tmp_path, capsys):
    spec = _preset(tmp_path, "tiny:bert")
    model = load_keras_hub(spec)
    assert model.config.model_type == "bert" and model.config.hidden_size == 32
    assert model.tokenizer is None and not model.ports
    assert cli.main(["check", spec, "--random", "2", "--seq-len", "8"]) == 0
    assert cli.main(["check", spec, "--text", "hello"]) == 2
    assert "has no tokenizer" in capsys.readouterr().err


def test_a_decoder_preset_cross_checks_against_its_checkpoint_with_weight_hints(tmp_path):
    """A right port (Qwen) saved as a preset passes against the checkpoint it came from;
    one FFN kernel of layer 1 scaled before saving fails there, and the converter's
    mapping, recovered from --pt, names the weight."""
    spec = _preset(tmp_path, "tiny:qwen2")
    assert cli.main(["check", spec, "--random", "2", "--seq-len", "8"]) == 0
    assert cli.main(["crosscheck", "--tf", spec, "--pt", "tiny:qwen2"]) == 0

    def scale_ffn(backbone):
        scale(keras_hub_layouts.block(backbone, 1)._feedforward_intermediate_dense.kernel, 1.1)

    broken = _preset(tmp_path / "broken", "tiny:qwen2", scale_ffn)
    out = tmp_path / "r.json"
    args = ["crosscheck", "--tf", broken, "--pt", "tiny:qwen2", "--json", str(out)]
    assert cli.main(args) == 1
    report = json.loads(out.read_text())
    report = report[0] if isinstance(report, list) else report.get("reports", [report])[0]
    d = report["first_divergence"]
    assert (d["hidden_state"], d["layer"], d["component"]) == (2, 1, "intermediate")
    assert (
        d["hint"]
        == "weight layers.1.mlp.up_proj.weight is PyTorch's scaled by 1.1 (a uniform scale)"
    )
    assert any("converter run on tiny:qwen2" in n for n in report["notes"])


def test_a_preset_sweeps_against_the_reference_it_is_given(tmp_path):
    """run_sweep(pt=...) binds a preset to that checkpoint (tokenizer, weight mapping)."""
    from tfparity.sweep import SweepOptions, run_sweep

    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nthe cat sat\n")
    options = SweepOptions(checks=("embeds", "crosscheck"), progress="none")
    spec = _preset(tmp_path, "tiny:qwen2")
    result = run_sweep(spec, corpus, tmp_path / "s", options, pt="tiny:qwen2")
    assert result.passed and result.summary["items"] == 2


def test_a_preset_of_a_backbone_tfparity_cannot_map_exits_2(tmp_path, capsys):
    directory = tmp_path / "p"
    directory.mkdir()
    (directory / "metadata.json").write_text("{}")
    (directory / "config.json").write_text(json.dumps({"class_name": "WhisperBackbone"}))
    assert cli.main(["check", f"keras-hub:{directory}"]) == 2
    err = capsys.readouterr().err
    assert "WhisperBackbone" in err and "BertBackbone" in err and "Traceback" not in err


def test_a_preset_without_pt_has_no_reference_to_cross_check(tmp_path, capsys):
    spec = _preset(tmp_path, "tiny:gpt2")
    assert cli.main(["crosscheck", spec]) == 2
    assert "give one with --pt" in capsys.readouterr().err


@pytest.mark.parametrize(
    "inner", ["tiny:roberta", "tiny:distilbert", "tiny:gpt2", "tiny:albert", "tiny:gemma"]
)
def test_each_family_reads_a_preset_config_as_its_checkpoint_config(inner):
    """The structure a preset states, mapped back through the family's layout, is the
    Hugging Face config keras-hub converted (RoBERTa's +2 position rows, Gemma's halved
    FFN, DistilBERT's and GPT-2's own names)."""
    model = load_keras_hub(f"keras-hub:{inner}")
    stated = model.layout.preset_config(model.backbone.get_config())
    hf = model.hf_config
    rebuilt = type(hf)(**stated)
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"):
        assert getattr(rebuilt, key) == getattr(hf, key), key
    for key, value in stated.items():  # None: transformers' default (GPT-2's n_inner)
        assert getattr(hf, key) in (value, None), (key, getattr(hf, key), value)


# ----------------------------------------------------------------------------- converters


def test_the_docs_table_is_real_output_and_each_verdict_holds():
    """Every tiny converter's verdict, first divergence and hint, re-run: a changed
    verdict or a stale page fails (MiniLM's row is written by the script, not re-run).
    The max abs diff is held to a factor, since its digits depend on the kernels."""
    script = _table_script()
    page = script.parse_rows(script.page_table())
    for inner in script.tiny_specs():
        r = script.row(inner)
        model_type = inner.split(":", 1)[1]
        known = lookup(model_type).keras_hub.known_difference
        assert r["passed"] == (known is None), (inner, r)
        if known is not None:
            comp = f", {known.component}" if known.component != known.layer else ""
            assert r["where"] == f"hidden_states[{known.hidden_state}], layer {known.layer}{comp}"
            assert known.hint in r["hint"], (inner, r["hint"])
        fresh = script.parse_rows(script.render_rows([r]))[f"keras-hub:{inner}"]
        problems = script.stale(fresh, page.get(f"keras-hub:{inner}"))
        assert not problems, problems  # python scripts/keras_hub_table.py rewrites the page


def test_the_staleness_rule_holds_stable_columns_exactly_and_digits_to_a_factor():
    script = _table_script()
    page = script.parse_rows(script.page_table())
    row = dict(page["keras-hub:tiny:gpt2"])
    assert script.stale(row, page["keras-hub:tiny:gpt2"]) == []
    assert script.stale(dict(row, diff=f"{float(row['diff']) * 3:.2g}"), row) == []  # kernels
    assert script.stale(dict(row, diff=f"{float(row['diff']) * 30:.2g}"), row)  # too far
    assert script.stale(dict(row, verdict="**FAIL**"), row)
    assert script.stale(dict(row, where="hidden_states[1], layer 0"), row)
    assert script.stale(row, None)  # a spec the page lacks


def test_the_bert_finding_is_the_gelu_swapping_it_makes_the_port_pass():
    model = load_keras_hub("keras-hub:tiny:bert")
    batches = make_batches(model, INPUTS)
    pt = load_pt("tiny:bert")
    assert not crosscheck(model, pt, batches).passed
    _exact_gelu_everywhere(model)
    fixed = crosscheck(model, pt, batches)
    assert fixed.passed, [(c.name, c.max_abs_diff) for c in fixed.failures]


def test_the_qwen3_finding_is_the_qk_norm_epsilon_setting_it_makes_the_port_pass():
    """keras-hub's Qwen3 decoder builds its attention without layer_norm_epsilon, so
    q_norm/k_norm use 1e-5 whatever rms_norm_eps says (1e-6 here)."""
    model = load_keras_hub("keras-hub:tiny:qwen3")
    batches = make_batches(model, INPUTS)
    pt = load_pt("tiny:qwen3")
    assert not crosscheck(model, pt, batches).passed
    for i in range(2):
        attention = keras_hub_layouts.block(model.backbone, i)._self_attention_layer
        assert attention._query_dense_layer_norm.epsilon == 1e-5  # not the config's 1e-6
        attention._query_dense_layer_norm.epsilon = pt.config.rms_norm_eps
        attention._key_dense_layer_norm.epsilon = pt.config.rms_norm_eps
    fixed = crosscheck(model, pt, batches)
    assert fixed.passed, [(c.name, c.max_abs_diff) for c in fixed.failures]


def _exact_gelu_everywhere(model):
    for i in range(2):
        keras_hub_layouts.swap_gelu(
            keras_hub_layouts.block(model.backbone, i)._feedforward_intermediate_dense
        )


# ----------------------------------------------------------------------------- faults


@pytest.mark.parametrize(
    "inner,fix",
    [("tiny:bert", _exact_gelu_everywhere), ("tiny:qwen2", None)],
    ids=["bert", "qwen2"],
)
def test_faults_injected_into_keras_hub_backbones_are_localised(inner, fix):
    """On a right port (BERT with its GELU fixed, Qwen as converted), each fault of the
    family's keras-hub catalogue fails the cross-check at its layer and component, with
    the right hint."""
    model_type = inner.split(":", 1)[1]
    faults = lookup(model_type).keras_hub.faults
    assert faults
    pt = load_pt(inner)
    batches = None
    for fault in faults:
        model = load_keras_hub(f"keras-hub:{inner}")
        if fix is not None:
            fix(model)
        batches = batches or make_batches(model, INPUTS)
        report = crosscheck(fault.apply(model), pt, batches)
        d = report.first_divergence
        assert not report.passed, fault.name
        assert (d.hidden_state, d.layer, d.component) == (
            fault.expect.hidden_state,
            fault.expect.layer,
            fault.expect.component,
        ), (fault.name, d)
        assert fault.expect.hint in d.hint, (fault.name, d.hint)


@pytest.mark.parametrize("flag", [["--graph"], ["--xla"], ["--precision", "bf16"]])
def test_execution_flags_keras_hub_cannot_honour_are_refused(flag):
    """Never silently ignored: a keras-hub model runs eagerly in float32."""
    assert cli.main(["check", "keras-hub:tiny:bert", "--no-pt", *flag]) == 2
