"""A fine-tuned head judged by what it means: the port's label maps and tokenizer
against the reference's (tfparity/checks/artefacts.py), on port directories made the
way users make them (save_pretrained)."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest

from tfparity.checks.crosscheck.artefacts import is_default, label_findings
from tfparity.cli import main

LABELS = {0: "NEGATIVE", 1: "POSITIVE"}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """A PyTorch sentiment head (``ref``) and its TF port (``port``), each saved by
    save_pretrained with the tiny tokenizer; and copies of the port with the label maps
    swapped, with default label names, with an uncased vocabulary told not to lower
    case, and with three labels."""
    torch = pytest.importorskip("torch")
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer

    root = tmp_path_factory.mktemp("heads")
    config = tiny_config("bert")
    config.id2label, config.label2id = LABELS, {v: k for k, v in LABELS.items()}
    torch.manual_seed(0)
    ref = transformers.BertForSequenceClassification(config)
    ref.save_pretrained(root / "ref", safe_serialization=True)
    tiny_tokenizer().save_pretrained(root / "ref")
    port = transformers.TFBertForSequenceClassification.from_pretrained(root / "ref", from_pt=True)
    port.save_pretrained(root / "port")
    tiny_tokenizer().save_pretrained(root / "port")
    found = {name: str(root / name) for name in ("ref", "port")}
    swapped = {0: "POSITIVE", 1: "NEGATIVE"}
    found["swapped"] = _edited(root, "swapped", _config(swapped))
    found["default"] = _edited(root, "default", _config({0: "LABEL_0", 1: "LABEL_1"}))
    found["cased"] = _edited(root, "cased", _lower_case(False))
    config.num_labels = 3  # the same body under a classifier of three labels
    three = transformers.TFBertForSequenceClassification(config)
    three(three.dummy_inputs)
    three.bert.set_weights(port.bert.get_weights())
    three.save_pretrained(root / "three")
    tiny_tokenizer().save_pretrained(root / "three")
    found["three"] = str(root / "three")
    return found


def _edited(root, name, edit) -> str:
    shutil.copytree(root / "port", root / name)
    edit(root / name)
    return str(root / name)


def _config(id2label):
    def edit(directory):
        path = directory / "config.json"
        config = json.loads(path.read_text())
        config["id2label"] = {str(k): v for k, v in id2label.items()}
        config["label2id"] = {v: k for k, v in id2label.items()}
        path.write_text(json.dumps(config))

    return edit


def _lower_case(value):
    def edit(directory):
        path = directory / "tokenizer_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "do_lower_case": value}))

    return edit


def _run(argv, capsys, tmp_path):
    out = tmp_path / "r.json"
    code = main([*argv, "--json", str(out)])
    captured = capsys.readouterr()
    text = captured.out
    assert code != 2, captured.err
    data = json.loads(out.read_text())
    return code, text, data.get("reports", [data])[0]


def _verdict(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(("PASS ", "FAIL ")))


def test_the_same_labels_and_tokenizer_pass_and_the_header_names_the_tokenizer(
    dirs, capsys, tmp_path
):
    code, text, report = _run(
        ["crosscheck", "--tf", dirs["port"], "--pt", dirs["ref"]], capsys, tmp_path
    )
    assert code == 0, text
    assert _verdict(text).startswith("PASS crosscheck: ")
    assert f"  tokenizer: {dirs['port']} (BertTokenizerFast)" in text.splitlines()
    assert f"  reference_tokenizer: {dirs['ref']} (BertTokenizerFast)" in text.splitlines()
    assert "  labels: 2 (NEGATIVE, POSITIVE), the same" in text.splitlines()
    assert report["details"]["tokenizer"] == f"{dirs['port']} (BertTokenizerFast)"
    assert not [c for c in report["comparisons"] if c["name"].startswith(("config:", "tokenizer:"))]


def test_swapped_label_maps_fail_naming_the_swap(dirs, capsys, tmp_path):
    code, text, report = _run(
        ["crosscheck", "--tf", dirs["swapped"], "--pt", dirs["ref"]], capsys, tmp_path
    )
    assert code == 1, text
    verdict = _verdict(text)
    assert verdict.startswith(
        "FAIL crosscheck: label maps differ: id 0 is 'POSITIVE' in TF, 'NEGATIVE' in "
        "PyTorch (swapped with id 1); 0 of "
    ), verdict
    assert "label agreement (logits): 5/5" in text  # the numbers alone agree
    assert report["first_divergence"] is None
    failed = [c for c in report["comparisons"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["config:id2label"]
    assert (
        "id 1 is 'NEGATIVE' in TF, 'POSITIVE' in PyTorch (swapped with id 0)"
        in failed[0]["problem"]
    )


def test_default_label_names_against_named_ones_are_a_note(dirs, capsys, tmp_path):
    code, text, _ = _run(
        ["crosscheck", "--tf", dirs["default"], "--pt", dirs["ref"]], capsys, tmp_path
    )
    assert code == 0, text
    assert (
        "note: Label maps: TF's config has the default names (LABEL_0, ...), PyTorch's "
        "names them (NEGATIVE, POSITIVE)" in text
    )


def test_num_labels_that_differ_are_named_in_the_verdict_and_the_hint(dirs, capsys, tmp_path):
    code, text, report = _run(
        ["crosscheck", "--tf", dirs["three"], "--pt", dirs["ref"]], capsys, tmp_path
    )
    assert code == 1, text
    assert _verdict(text).startswith("FAIL crosscheck: num_labels differ: 3 in TF, 2 in PyTorch"), (
        text
    )
    assert report["first_divergence"]["hint"].startswith("num_labels differ: 3 in TF, 2 in PyTorch")


def test_a_tokenizer_that_differs_fails_naming_the_first_text(dirs, capsys, tmp_path):
    argv = [
        "crosscheck",
        "--tf",
        dirs["cased"],
        "--pt",
        dirs["ref"],
        "--text",
        "why not",
        "--text",
        "Hello World.",
    ]
    code, text, report = _run(argv, capsys, tmp_path)
    assert code == 1, text
    assert _verdict(text).startswith(
        "FAIL crosscheck: the tokenizers differ on 1 of 2 texts; 0 of "
    ), text
    failed = [c for c in report["comparisons"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["tokenizer:input_ids"]
    problem = failed[0]["problem"]
    assert "first, text 2 ('Hello World.'): \"[CLS] [UNK] [UNK] . [SEP]\" by " in problem, problem
    assert '"[CLS] hell ##o world . [SEP]" by ' in problem, problem
    assert report["details"]["tokenizer"] == f"{dirs['cased']} (BertTokenizerFast)"


def test_random_ids_name_no_tokenizer(dirs, capsys, tmp_path):
    argv = [
        "crosscheck",
        "--tf",
        dirs["port"],
        "--pt",
        dirs["ref"],
        "--random",
        "2",
        "--seq-len",
        "8",
    ]
    code, text, report = _run(argv, capsys, tmp_path)
    assert code == 0, text
    assert "tokenizer" not in report["details"]


def test_label_maps_compare_by_id_whatever_the_key_type():
    named = SimpleNamespace(id2label=LABELS, label2id={"NEGATIVE": 0, "POSITIVE": 1})
    as_json = SimpleNamespace(
        id2label={"0": "NEGATIVE", "1": "POSITIVE"}, label2id={"NEGATIVE": "0", "POSITIVE": "1"}
    )
    assert label_findings(named, as_json).failures == []
    assert is_default({0: "LABEL_0", 1: "LABEL_1"}) and not is_default({0: "LABEL_1", 1: "LABEL_0"})
    rotated = SimpleNamespace(id2label={0: "B", 1: "C", 2: "A"})
    found = label_findings(rotated, SimpleNamespace(id2label={0: "A", 1: "B", 2: "C"})).failures
    assert [c.name for c in found] == ["config:id2label"]
    assert found[0].problem.startswith(
        "label maps differ: id 0 is 'B' in TF, 'A' in PyTorch ('B' is id 1 in PyTorch)"
    )
    inverted = SimpleNamespace(id2label=LABELS, label2id={"NEGATIVE": 1, "POSITIVE": 0})
    found = label_findings(inverted, named).failures
    assert [c.name for c in found] == ["config:label2id"]
    assert "'NEGATIVE' is 1 in TF, 0 in PyTorch" in found[0].problem
    assert label_findings(SimpleNamespace(), named).failures == []  # a stored config without maps


THREE = {0: "NEGATIVE", 1: "NEUTRAL", 2: "POSITIVE"}
ORDER = [2, 0, 1]  # the permuted port's logit i is the reference's logit ORDER[i]


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    """Three-label sentiment and QA references (PyTorch, save_pretrained) with their TF
    ports made by from_pt, and copies of the ports whose head rows are reordered: the
    classes in ORDER, QA's start and end swapped (a port's converter that read the
    kernel's columns in another order)."""
    torch = pytest.importorskip("torch")
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer

    root = tmp_path_factory.mktemp("permuted")
    named = tiny_config("bert")
    named.id2label, named.label2id = THREE, {v: k for k, v in THREE.items()}
    found = {}
    for name, head in (("cls", "SequenceClassification"), ("qa", "QuestionAnswering")):
        config = named if name == "cls" else tiny_config("bert")  # QA's two rows
        torch.manual_seed(0)
        ref = getattr(transformers, f"BertFor{head}")(config)
        ref.save_pretrained(root / f"{name}-ref", safe_serialization=True)
        tiny_tokenizer().save_pretrained(root / f"{name}-ref")
        port = getattr(transformers, f"TFBertFor{head}").from_pretrained(
            root / f"{name}-ref", from_pt=True
        )
        port.save_pretrained(root / f"{name}-port")
        order = ORDER if name == "cls" else [1, 0]
        layer = port.classifier if name == "cls" else port.qa_outputs
        kernel, bias = layer.get_weights()
        layer.set_weights([kernel[:, order], bias[order]])
        port.save_pretrained(root / f"{name}-permuted")
        for kind in ("port", "permuted"):
            tiny_tokenizer().save_pretrained(root / f"{name}-{kind}")
        found.update(
            {f"{name}-{k}": str(root / f"{name}-{k}") for k in ("ref", "port", "permuted")}
        )
    return found


@pytest.mark.parametrize("name", ["cls", "qa"])
def test_a_clean_head_port_passes(heads, name, capsys, tmp_path):
    argv = ["crosscheck", "--tf", heads[f"{name}-port"], "--pt", heads[f"{name}-ref"]]
    code, text, report = _run(argv, capsys, tmp_path)
    assert code == 0, text
    assert report["first_divergence"] is None


def test_classes_permuted_in_the_head_are_named_with_their_labels(heads, capsys, tmp_path):
    argv = ["crosscheck", "--tf", heads["cls-permuted"], "--pt", heads["cls-ref"]]
    code, text, report = _run(argv, capsys, tmp_path)
    assert code == 1, text
    hint = report["first_divergence"]["hint"]
    assert report["first_divergence"]["layer"] == "head"
    assert hint.startswith(
        "classes permuted: TF's logits 0, 1, 2 are PyTorch's 2, 0, 1 (TF's 'NEGATIVE' is "
        "PyTorch's 'POSITIVE', TF's 'NEUTRAL' is PyTorch's 'NEGATIVE', TF's 'POSITIVE' is "
        "PyTorch's 'NEUTRAL')"
    ), hint
    assert "weight classifier.weight is PyTorch's with its rows reordered" in hint, hint
    assert f"hint: {hint}" in text


def test_start_and_end_swapped_in_a_qa_head_are_named(heads, capsys, tmp_path):
    argv = ["crosscheck", "--tf", heads["qa-permuted"], "--pt", heads["qa-ref"]]
    code, text, report = _run(argv, capsys, tmp_path)
    assert code == 1, text
    hint = report["first_divergence"]["hint"]
    assert hint.startswith("start and end logits swapped: TF's start logits are PyTorch's end"), (
        hint
    )
    failed = {c["name"] for c in report["comparisons"] if not c["passed"]}
    assert failed == {"start_logits", "end_logits"}


def test_classes_permuted_are_named_from_the_logits_against_golden_outputs(heads, capsys, tmp_path):
    """Stored outputs hold no weights: the permutation is read from the logits' columns."""
    golden = tmp_path / "cls.npz"
    argv = ["crosscheck", "--tf", heads["cls-port"], "--pt", heads["cls-ref"]]
    assert main([*argv, "--save-outputs", str(golden)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    for port, expected in (("cls-port", 0), ("cls-permuted", 1)):
        argv = ["crosscheck", heads[port], "--load-outputs", str(golden)]
        code, text, report = _run(argv, capsys, tmp_path)
        assert code == expected, text
    hint = report["first_divergence"]["hint"]
    assert hint.startswith("classes permuted: TF's logits 0, 1, 2 are PyTorch's 2, 0, 1"), hint
    assert "(from the logits)" in hint, hint


def test_num_labels_that_differ_are_named_against_golden_outputs(dirs, capsys, tmp_path):
    """The stored config holds the reference's label maps: a port of another fine-tuning
    replayed against them fails on num_labels, named first; the port itself passes."""
    golden = tmp_path / "ref.npz"
    argv = ["crosscheck", "--tf", dirs["port"], "--pt", dirs["ref"]]
    assert main([*argv, "--save-outputs", str(golden)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    code, text, _ = _run(
        ["crosscheck", dirs["port"], "--load-outputs", str(golden)], capsys, tmp_path
    )
    assert code == 0, text
    argv = ["crosscheck", dirs["three"], "--load-outputs", str(golden)]
    code, text, report = _run(argv, capsys, tmp_path)
    assert code == 1, text
    assert _verdict(text).startswith("FAIL crosscheck: num_labels differ: 3 in TF, 2 in PyTorch"), (
        text
    )
    assert report["first_divergence"]["hint"].startswith("num_labels differ: 3 in TF, 2 in PyTorch")
    hint = report["first_divergence"]["hint"]
    assert "config agrees" not in hint, hint  # it does not: it names num_labels
    assert "The config disagrees here (num_labels): the heads differ in size" in hint, hint
