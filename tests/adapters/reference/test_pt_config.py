"""``--pt-config KEY=VALUE`` / ``pt_config=``: the PyTorch reference built from its
checkpoint's config with fields changed (:mod:`tfparity.adapters.reference.config`).

The issue's line, on the tiny BERT: keras-hub's BertBackbone (hard-coded tanh GELU)
and its Keras 3 exports (a ``.keras`` file, a ``backbone.export`` SavedModel) fail
against the checkpoint's own PyTorch BERT (exact GELU), naming the known difference and
the rerun, and pass against ``hidden_act=gelu_pytorch_tanh``; with that reference a
port or export broken at layer 1 still fails there. MiniLM is measured by hand
(docs/keras-hub.md)."""

from __future__ import annotations

import contextlib
import io
import json
from types import SimpleNamespace

import pytest

pytest.importorskip("keras_hub")

from tfparity import InputOptions, cli  # noqa: E402
from tfparity.adapters.keras_hub.side import load_keras_hub  # noqa: E402
from tfparity.adapters.reference.config import overridden, parse_items, parse_value  # noqa: E402
from tfparity.adapters.reference.pt_model import load_pt  # noqa: E402
from tfparity.adapters.sources.tiny import tiny_config  # noqa: E402
from tfparity.api import crosscheck, gradients  # noqa: E402
from tfparity.architectures import keras_hub_layouts, registry  # noqa: E402
from tfparity.architectures.faults import scale  # noqa: E402
from tfparity.checks.crosscheck.hints import config_differences  # noqa: E402
from tfparity.errors import TfparityError  # noqa: E402

INPUTS = InputOptions(random=4, seq_len=12, batch_size=2, seed=5)
SPEC = "keras-hub:tiny:bert"
TANH = {"hidden_act": "gelu_pytorch_tanh"}
RERUN = "to check the rest of the port, rerun with --pt-config hidden_act=gelu_pytorch_tanh"
KNOWN = "a known difference of this port"
CHANGED = "runs with hidden_act='gelu_pytorch_tanh' instead of the checkpoint's 'gelu'"


def _keras_hub_findings():
    """(model type, known difference) of every keras-hub port with one."""
    return [
        (a.model_type, a.keras_hub.known_difference)
        for a in registry().values()
        if a.keras_hub is not None and a.keras_hub.known_difference is not None
    ]


# ----------------------------------------------------------------------------- parsing


def test_items_read_as_json_where_they_parse_else_as_strings():
    items = ["hidden_act=gelu_pytorch_tanh", "layer_norm_eps=1e-5", "use_cache=false"]
    items += ["sliding_window=null", "num_hidden_layers=2", "name=a=b"]
    assert parse_items(items) == {
        "hidden_act": "gelu_pytorch_tanh",
        "layer_norm_eps": 1e-5,
        "use_cache": False,
        "sliding_window": None,
        "num_hidden_layers": 2,
        "name": "a=b",
    }
    assert parse_items(None) is None and parse_items([]) is None  # no change, ever


@pytest.mark.parametrize(
    "items,named",
    [
        (["hidden_act"], "'hidden_act' is malformed"),
        (["=gelu"], "'=gelu' is malformed"),
        (["hidden act=gelu"], "is malformed"),
        (["hidden_act=gelu", "hidden_act=relu"], "hidden_act twice"),
    ],
)
def test_malformed_items_are_refused_naming_them(items, named):
    with pytest.raises(TfparityError, match=named):
        parse_items(items)


def test_every_registry_rerun_reads_back_as_its_reference_config():
    """The hint's ``--pt-config KEY=VALUE`` items, fed back to the parser, give the
    record's config change exactly (``1e-06`` stays a float, a name a string)."""
    findings = [k for _, k in _keras_hub_findings() if k.reference_config]
    assert {tuple(k.reference_config) for k in findings} >= {("hidden_act",), ("rms_norm_eps",)}
    for known in findings:
        items = known.rerun().split("rerun with ", 1)[1].split("--pt-config ")[1:]
        assert parse_items([i.strip() for i in items]) == known.reference_config
    assert parse_value("1e-06") == 1e-6 and parse_value("gelu") == "gelu"


def test_keys_the_config_lacks_and_values_of_another_kind_are_refused():
    config = tiny_config("bert")
    with pytest.raises(TfparityError, match="has no field 'hidden_actt'"):
        overridden(config, {"hidden_actt": "gelu"})
    with pytest.raises(TfparityError, match="names the architecture"):
        overridden(config, {"model_type": "gpt2"})
    with pytest.raises(TfparityError, match="layer_norm_eps=abc: .* a number"):
        overridden(config, {"layer_norm_eps": "abc"})
    changed = overridden(config, {"layer_norm_eps": 1e-5, **TANH})
    assert (changed.layer_norm_eps, changed.hidden_act) == (1e-5, "gelu_pytorch_tanh")
    assert config.hidden_act == "gelu"  # the checkpoint's config is untouched


def test_config_hints_compare_with_the_changed_config():
    """One function under two names is no difference; a field the user changed is said
    to be theirs; a real difference is still named."""
    tf = SimpleNamespace(model_type="bert", hidden_act="gelu_approximate")
    tanh = SimpleNamespace(model_type="bert", hidden_act="gelu_pytorch_tanh")
    exact = SimpleNamespace(model_type="bert", hidden_act="gelu")
    assert config_differences(tf, tanh, ["hidden_act"]) == []
    (hint,) = config_differences(exact, tanh, ["hidden_act"])
    assert (
        hint.text
        == "config hidden_act: 'gelu' (TF) vs 'gelu_pytorch_tanh' (PyTorch, set by --pt-config)"
    )
    (hint,) = config_differences(tf, exact)
    assert hint.text == "config hidden_act: 'gelu_approximate' (TF) vs 'gelu' (PyTorch)"


# ----------------------------------------------------------------------------- the reference


def test_the_changed_reference_says_so_and_computes_otherwise():
    own, changed = load_pt("tiny:bert"), load_pt("tiny:bert", changes=TANH)
    assert own.config.hidden_act == "gelu" and changed.config.hidden_act == "gelu_pytorch_tanh"
    assert changed.config_changes == {"hidden_act": ("gelu", "gelu_pytorch_tanh")}
    assert changed.name == "PyTorch tiny:bert (--pt-config hidden_act=gelu_pytorch_tanh)"
    assert any(CHANGED in n for n in changed.notes) and not own.config_changes
    import torch

    x = torch.linspace(-3, 3, 13, dtype=torch.float64)
    act = changed.fp64().encoder.layer[0].intermediate.intermediate_act_fn  # the referee too
    assert torch.equal(act(x), torch.nn.functional.gelu(x, approximate="tanh"))
    assert not torch.equal(act(x), torch.nn.functional.gelu(x))
    assert changed.in_precision("bf16").notes == changed.notes


def test_cli_keras_hub_bert_fails_on_its_gelu_and_passes_against_the_tanh_reference(
    tmp_path, capsys
):
    args = ["crosscheck", SPEC, "--no-reload", "--random", "4", "--seq-len", "12"]
    assert cli.main(args) == 1
    out = capsys.readouterr().out
    assert "layer 0 · component intermediate" in out and KNOWN in out and RERUN in out
    report = tmp_path / "tanh.json"
    args += ["--pt-config", "hidden_act=gelu_pytorch_tanh", "--json", str(report)]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert CHANGED in out and "PASS crosscheck" in out
    saved = json.loads(report.read_text())  # one report: itself
    assert any(CHANGED in n for n in saved["notes"])
    assert saved["details"]["reference"].endswith("(--pt-config hidden_act=gelu_pytorch_tanh)")


@pytest.mark.parametrize(
    "extra,named",
    [
        (["--pt-config", "hidden_actt=gelu"], "has no field 'hidden_actt'"),
        (["--pt-config", "hidden_act=nonsense"], "hidden_act=nonsense: transformers could not"),
        (["--pt-config", "hidden_act", "--random", "2"], "'hidden_act' is malformed"),
        (["--pt-config", "hidden_act=gelu", "--load-outputs", "x.npz"], "--load-outputs"),
    ],
    ids=["unknown-key", "rejected-value", "malformed", "stored-reference"],
)
def test_cli_bad_pt_config_exits_2_naming_the_key(extra, named, capsys):
    assert cli.main(["crosscheck", "tiny:bert", "--no-reload", "--random", "2", *extra]) == 2
    assert named in capsys.readouterr().err


def test_api_pt_config_is_for_a_reference_loaded_from_a_spec():
    with pytest.raises(TypeError, match="pt_config must be a dict"):
        crosscheck("tiny:bert", pt_config=["hidden_act=gelu"], inputs=INPUTS)
    with pytest.raises(TfparityError, match="reference already built"):
        crosscheck("tiny:bert", pt=load_pt("tiny:bert"), pt_config=TANH, inputs=INPUTS)


def test_a_broken_port_still_fails_at_its_layer_against_the_changed_reference():
    """Both ways on the port itself: layer 1's FFN scaled by 1.1 fails at layer 1 with
    the weight named (and no activation hint: the reference's tanh GELU is keras-hub's);
    layer 0's, where the known difference sits, fails there without the finding (the
    reference already computes the port's GELU, so that is not the cause)."""
    for layer in (1, 0):
        model = load_keras_hub(SPEC)
        scale(
            keras_hub_layouts.block(model.backbone, layer)._feedforward_intermediate_dense.kernel,
            1.1,
        )
        (report,) = crosscheck(model, pt_config=TANH, inputs=INPUTS, reload=False)
        d = report.first_divergence
        assert not report.passed and (d.layer, d.component) == (layer, "intermediate"), d
        assert (
            f"encoder.layer.{layer}.intermediate.dense.weight is PyTorch's scaled by 1.1" in d.hint
        )
        assert "config hidden_act" not in d.hint and KNOWN not in d.hint, d.hint


@pytest.mark.parametrize("model_type,known", _keras_hub_findings(), ids=lambda v: str(v)[:12])
def test_each_reference_config_in_the_registry_makes_its_tiny_port_pass(model_type, known):
    """A record's ``reference_config`` is a claim: PyTorch with it computes what the
    port computes. Held on the tiny model; a record without one gives no rerun."""
    if not known.reference_config:
        assert known.rerun() == ""
        return
    spec = f"keras-hub:tiny:{model_type}"
    (plain,) = crosscheck(spec, inputs=INPUTS, reload=False)
    assert not plain.passed and known.rerun() in plain.first_divergence.hint
    (changed,) = crosscheck(spec, inputs=INPUTS, reload=False, pt_config=known.reference_config)
    assert changed.passed, [(c.name, c.max_abs_diff) for c in changed.failures]


# ----------------------------------------------------------------------------- exports


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The tiny BERT backbone as Keras 3 exports, clean and with layer 1's FFN kernel
    scaled by 1.1: ``.keras`` files and ``backbone.export`` SavedModels."""
    root = tmp_path_factory.mktemp("pt-config-exports")
    backbone = load_keras_hub(SPEC).backbone
    for kind in ("clean", "faulty"):
        if kind == "faulty":
            scale(keras_hub_layouts.block(backbone, 1)._feedforward_intermediate_dense.kernel, 1.1)
        backbone.save(root / f"{kind}.keras")
        with contextlib.redirect_stdout(io.StringIO()):  # export() prints its endpoints
            backbone.export(str(root / f"{kind}-saved"), format="tf_saved_model")
    return root


@pytest.mark.parametrize("export", ["clean.keras", "clean-saved"])
def test_keras3_exports_pass_against_the_tanh_reference_and_fail_without(exports, export):
    path = str(exports / export)
    vs_source, vs_pt, source_vs_pt = crosscheck(path, source=SPEC, inputs=INPUTS)
    assert vs_source.passed and not vs_pt.passed and not source_vs_pt.passed
    if export.endswith(".keras"):  # per layer: the known difference, and the rerun
        assert vs_pt.first_divergence.layer == 0 and RERUN in vs_pt.first_divergence.hint
    else:  # no hidden states: placed at the outputs, the port's finding in a note
        assert vs_pt.first_divergence.layer == "output"
        assert any(RERUN in n for n in vs_pt.notes)
    assert RERUN in source_vs_pt.first_divergence.hint
    reports = crosscheck(path, source=SPEC, inputs=INPUTS, pt_config=TANH)
    assert all(r.passed for r in reports), [(r.check, r.first_divergence) for r in reports]
    assert all(any(CHANGED in n for n in r.notes) for r in reports[1:])


def test_broken_keras3_exports_still_fail_against_the_tanh_reference(exports):
    """The .keras file is localised to layer 1's FFN, its weight named; the SavedModel,
    which returns no hidden states, fails at its outputs while its source passes."""
    vs_source, vs_pt, source_vs_pt = crosscheck(
        str(exports / "faulty.keras"), source=SPEC, inputs=INPUTS, pt_config=TANH
    )
    assert source_vs_pt.passed and not vs_source.passed and not vs_pt.passed
    d = vs_pt.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (2, 1, "intermediate"), d
    assert "encoder.layer.1.intermediate.dense.weight is PyTorch's scaled by 1.1" in d.hint
    assert vs_source.first_divergence.layer == 1
    vs_source, vs_pt, source_vs_pt = crosscheck(
        str(exports / "faulty-saved"), source=SPEC, inputs=INPUTS, pt_config=TANH
    )
    assert source_vs_pt.passed and not vs_source.passed and not vs_pt.passed
    assert vs_pt.first_divergence.layer == "output"


# ----------------------------------------------------------------------------- other commands


def test_gradients_and_sweep_run_against_the_changed_reference(tmp_path, capsys):
    """The same reference serves the gradients check and the sweep: tiny:bert's own TF
    model (exact GELU) fails against the tanh reference, saying why."""
    _, grads = gradients("tiny:bert", inputs=INPUTS, pt_config=TANH)
    assert not grads.passed and any(CHANGED in n for n in grads.notes)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("A short sentence.\nAnother one, a little longer than the first.\n")
    args = ["sweep", "tiny:bert", "--texts", str(corpus), "--checks", "crosscheck"]
    args += ["--out", str(tmp_path / "out"), "--progress", "none"]
    assert cli.main([*args, "--pt-config", "hidden_act=gelu_pytorch_tanh"]) == 1
    assert "hidden_act='gelu_pytorch_tanh' (--pt-config)" in capsys.readouterr().out
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["options"]["pt_config"] == TANH  # a resume against another reference: refused
    assert cli.main([*args, "--resume"]) == 2
    args = ["sweep", "tiny:bert", "--checks", "embeds", "--out", str(tmp_path / "embeds")]
    assert cli.main([*args, "--pt-config", "hidden_act=gelu_pytorch_tanh"]) == 2
    assert "add crosscheck" in capsys.readouterr().err  # it would change nothing: refused


def test_check_runs_its_cross_check_against_the_changed_reference(capsys):
    """tiny:bert's own TF model (exact GELU) passes the embeds check and fails its
    cross-check pass against the tanh reference; a `check` with no cross-check to
    change refuses the option rather than ignore it."""
    args = ["check", "tiny:bert", "--random", "2", "--seq-len", "8"]
    assert cli.main([*args, "--pt-config", "hidden_act=gelu_pytorch_tanh"]) == 1
    out = capsys.readouterr().out
    assert "PASS embeds" in out and "FAIL crosscheck" in out and CHANGED in out
    assert cli.main([*args, "--no-pt", "--pt-config", "hidden_act=gelu"]) == 2
    assert cli.main(["check", SPEC, "--pt-config", "hidden_act=gelu_pytorch_tanh"]) == 2
    assert "use `tfparity crosscheck`" in capsys.readouterr().err
