"""The architecture registry: every tiny model type passes the embeds check and the
cross-check, a port with one FFN weight of layer 1 scaled by 1.1 fails there (localised,
with the scale named), and transformers' own real TF/PyTorch differences fail as
expected. Model types nobody registered are served by the generic family."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tfparity import InputOptions
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.reference.pt_model import PTModel, load_pt
from tfparity.api import check_embeds, make_batches
from tfparity.architectures import Positions, lookup, registry, tiny_types
from tfparity.checks.crosscheck.check import crosscheck
from tfparity.errors import TfparityError
from tfparity.testing import ffn_fault

INPUTS = InputOptions(random=6, seq_len=16, batch_size=3, seed=1)


def test_the_registry_covers_at_least_25_tiny_model_types():
    types = tiny_types()
    assert len(types) >= 25, types
    people_port = {
        "bert", "roberta", "xlm-roberta", "camembert", "electra", "albert", "distilbert",
        "mpnet", "deberta", "deberta-v2", "mobilebert", "convbert", "roformer", "rembert",
        "esm", "xlnet", "xlm", "flaubert", "gpt2", "openai-gpt", "ctrl", "gptj", "opt",
        "xglm", "mistral", "t5", "mt5",
    }  # fmt: skip
    assert people_port <= set(types), people_port - set(types)


def test_every_record_is_complete():
    for model_type, arch in registry().items():
        assert arch.model_type == model_type
        assert arch.tf_class is None or arch.tf_class.startswith("TF")  # None: keras-hub only
        assert not arch.pt_class.startswith("TF")
        assert isinstance(arch.positions, Positions) and arch.positions is not Positions.UNKNOWN
        assert arch.ffn_weight, model_type
        assert ("{layer}" in arch.ffn_weight) != arch.shared_layers, model_type


@pytest.mark.parametrize("model_type", tiny_types())
def test_tiny_model_passes_and_a_perturbed_port_is_localised(model_type, load_tf_model):
    spec = f"tiny:{model_type}"
    tf_model = load_tf_model(spec)
    batches = make_batches(tf_model, INPUTS)
    embeds = check_embeds(tf_model, batches=batches)
    assert embeds.passed, [c.name for c in embeds.failures]
    n_hidden = sum(c.name.startswith("hidden_states[") for c in embeds.comparisons)
    assert n_hidden == 3  # embeddings + every layer, compared
    pt_model = load_pt(spec)  # the reference, loaded from its spec
    clean = crosscheck(tf_model, pt_model, batches)
    assert sum(c.name.startswith("hidden_states[") for c in clean.comparisons) == 3
    known = lookup(model_type).known_difference
    if known is not None:  # transformers' TF port really differs: FAIL, localised
        d = clean.first_divergence
        assert not clean.passed, "the registry claims a real difference; none was found"
        assert (d.hidden_state, d.layer, d.component) == (
            known.hidden_state,
            known.layer,
            known.component,
        ), d
        assert known.hint in d.hint, d.hint
        assert f"a known difference of this port: {known.finding}" in d.hint
        assert d.hint.endswith(f"{known.finding}{known.rerun()}")  # how to check the rest
        return
    assert clean.passed, [(c.name, c.max_abs_diff) for c in clean.failures]
    fault = ffn_fault(model_type)
    broken = crosscheck(fault.apply(TFModel.load(spec)), pt_model, batches)
    assert not broken.passed
    d = broken.first_divergence
    assert (d.hidden_state, d.layer) == (fault.expect.hidden_state, fault.expect.layer), d
    assert d.component == fault.expect.component, d
    assert fault.expect.hint in d.hint, d.hint  # "scaled by 1.1": the uniform scale is named
    earlier = [c for c in broken.comparisons if c.name == f"hidden_states[{d.hidden_state - 1}]"]
    assert earlier and earlier[0].passed  # the layer below still agrees


def test_an_unregistered_model_type_is_served_by_the_generic_family(load_tf_model):
    """DPR's question encoder has no module: layer-level localisation, and weight hints
    by the layer number in PyTorch's parameter names."""
    import transformers

    from tfparity.adapters.hf_tf.loading import build

    config = transformers.DPRConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=1,
    )
    arch = lookup("dpr")
    assert arch.generic and arch.tf_class == "TFDPRQuestionEncoder" and arch.sublayers is None
    model = transformers.TFDPRQuestionEncoder(config)
    build(model)
    tokenizer = load_tf_model("tiny:bert").tokenizer
    tf_model = TFModel.wrap(model, tokenizer=tokenizer, name="dpr")
    pt_model = PTModel.from_tf(model)
    batches = make_batches(tf_model, InputOptions(random=4, seq_len=10, batch_size=2, seed=2))
    clean = crosscheck(tf_model, pt_model, batches)
    assert clean.passed and sum(c.name.startswith("hidden_states[") for c in clean.comparisons) == 3
    kernel = next(v for v in model.weights if "layer_._1/intermediate/dense/kernel" in v.name)
    kernel.assign(kernel.numpy() * 1.1)
    report = crosscheck(tf_model, pt_model, batches)
    d = report.first_divergence
    assert not report.passed and (d.hidden_state, d.layer, d.component) == (2, 1, None), d
    assert "encoder.layer.1.intermediate.dense.weight" in d.hint and "scaled by 1.1" in d.hint


def test_a_model_type_without_a_tf_class_is_refused_clearly():
    with pytest.raises(TfparityError, match="no TensorFlow model for 'qwen2_moe'"):
        lookup("qwen2_moe")  # unregistered, and transformers has no TF class
    with pytest.raises(TfparityError, match="no TensorFlow model for 'llama'.*keras-hub:"):
        TFModel.load("tiny:llama")  # registered for keras-hub only


def test_no_model_type_branching_outside_the_registry():
    root = Path(__file__).resolve().parents[2] / "tfparity"
    branch = re.compile(r"model_type\s*(==|!=|in |not in )")
    offenders = [
        f"{path.relative_to(root)}:{n}"
        for path in root.rglob("*.py")
        if "architectures" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if branch.search(line)
    ]
    assert not offenders, offenders


def test_the_architecture_page_is_generated_from_the_registry():
    """docs/architectures.md is what scripts/architecture_table.py writes today."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    path = root / "scripts" / "architecture_table.py"
    spec = importlib.util.spec_from_file_location("architecture_table", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    page = (root / "docs" / "architectures.md").read_text()
    assert page == script.render(), "stale: run python scripts/architecture_table.py"
    for model_type in tiny_types():
        assert f"`tiny:{model_type}`" in page


PADDING_AWARE = [t for t in tiny_types() if lookup(t).positions is Positions.PADDING_AWARE]


@pytest.mark.parametrize("model_type", PADDING_AWARE)
def test_left_padding_on_padding_aware_positions_is_explained_never_silent(
    model_type, load_tf_model
):
    """Position ids made from input_ids skip padding; from inputs_embeds they cannot.
    With left padding the two paths may legitimately differ: the check must then say
    why (at the embeddings), and with right padding it must pass."""
    tf_model = load_tf_model(f"tiny:{model_type}")
    options = dict(random=4, seq_len=12, batch_size=4, seed=5)
    right = make_batches(tf_model, InputOptions(**options, padding_side="right"))
    assert check_embeds(tf_model, batches=right).passed
    left = make_batches(tf_model, InputOptions(**options, padding_side="left"))
    assert any((b.attention_mask[:, 0] == 0).any() for b in left)  # really left-padded
    report = check_embeds(tf_model, batches=left)
    if not report.passed:
        d = report.first_divergence
        assert "padding-aware position ids" in d.hint, d.hint
