"""The setups of scripts/doc_examples.py (files some examples read, made once per
scratch directory) and SETUPS, the registry naming them."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path

from doc_example_type import run_script
from doc_setups_exports import (
    keras_backends,
    keras_backends_mixed,
    keras_hub_exports,
    litert_file,
    litert_mlm,
    onnx_files,
    onnx_gpt2,
    onnx_int8,
    saved_model_export,
)


def task_heads(work: Path) -> None:
    """A seeded tiny BertForSequenceClassification saved by PyTorch (``seqcls``), and its
    TF port saved by save_pretrained with the classifier bias off by 0.01."""
    import torch
    import transformers

    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer

    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(tiny_config("bert"))
    model.save_pretrained(work / "seqcls", safe_serialization=True)
    tiny_tokenizer().save_pretrained(work / "seqcls")
    port = TFModel.load(str(work / "seqcls"))
    (bias,) = [v for v in port.model.weights if "classifier/bias" in v.name]
    bias.assign(bias + 0.01)
    port.model.save_pretrained(work / "seqcls-tf-badhead")
    port.tokenizer.save_pretrained(work / "seqcls-tf-badhead")


def untied_mlm(work: Path) -> None:
    """A seeded tiny BertForMaskedLM whose config unties its decoder (a decoder matrix
    of its own), saved by PyTorch (``bert-mlm-untied``)."""
    import torch
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer

    torch.manual_seed(0)
    config = tiny_config("bert")
    config.tie_word_embeddings = False
    config.architectures = ["BertForMaskedLM"]
    transformers.BertForMaskedLM(config).save_pretrained(work / "bert-mlm-untied")
    tiny_tokenizer().save_pretrained(work / "bert-mlm-untied")


def labelled_ports(work: Path) -> None:
    """A seeded tiny BertForSequenceClassification labelled NEGATIVE/POSITIVE, saved by
    PyTorch (``sentiment``), and two TF ports of it saved by save_pretrained: one with
    the label maps swapped in config.json (``sentiment-tf-swapped``), one whose
    tokenizer_config.json turns lower-casing off (``sentiment-tf-cased``)."""
    import json

    import torch
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer

    config = tiny_config("bert")
    config.id2label, config.label2id = (
        {0: "NEGATIVE", 1: "POSITIVE"},
        {"NEGATIVE": 0, "POSITIVE": 1},
    )
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(config).save_pretrained(
        work / "sentiment", safe_serialization=True
    )
    tiny_tokenizer().save_pretrained(work / "sentiment")
    port = transformers.TFBertForSequenceClassification.from_pretrained(
        work / "sentiment", from_pt=True
    )
    edits = {
        "sentiment-tf-swapped": (
            "config.json",
            {
                "id2label": {"0": "POSITIVE", "1": "NEGATIVE"},
                "label2id": {"POSITIVE": 0, "NEGATIVE": 1},
            },
        ),
        "sentiment-tf-cased": ("tokenizer_config.json", {"do_lower_case": False}),
    }
    for name, (file, changes) in edits.items():
        port.save_pretrained(work / name)
        tiny_tokenizer().save_pretrained(work / name)
        path = work / name / file
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def gpt2_ffn_port(work: Path) -> None:
    """The tiny GPT-2 causal LM with layer 1's MLP up-projection scaled by 1.5, saved."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import perturb_ffn

    port = TFModel.load("tiny:gpt2/causal-lm")
    perturb_ffn(port, 1, 1.5)
    port.model.save_pretrained(work / "gpt2-ffn")
    port.tokenizer.save_pretrained(work / "gpt2-ffn")


def prompts(work: Path) -> None:
    """Four short prompts, one per line: a corpus for ``sweep --generate``."""
    lines = (
        "The quick brown fox",
        "Hello world.",
        "Numerical parity means that two implementations",
        "A sweep decodes every line of its corpus",
    )
    (work / "prompts.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def prompts5(work: Path) -> None:
    """The four prompts and a fifth: a bootstrap verdict needs 5 items (MIN_ITEMS)."""
    prompts(work)
    lines = (work / "prompts.txt").read_text(encoding="utf-8").splitlines()
    lines.append("Five items give the bootstrap an interval")
    (work / "prompts5.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


# The mistakes scripts/make_diagnose_example.py writes besides hidden_states[0].
DIAGNOSE_CASES = ("last-hidden-state", "pair-without-types", "permuted", "left-padded", "float16")


def diagnose_argv(case: str) -> tuple[str, ...]:
    """``tfparity diagnose minilm`` on the files of ``case`` (no types for the pair)."""
    folder = f"diag-{case}"
    argv = ("diagnose", "minilm", "--ids", f"{folder}/ids.npy", "--embeds", f"{folder}/embeds.npy")
    argv += ("--attention-mask", f"{folder}/mask.npy")
    return (
        argv if case == "pair-without-types" else (*argv, "--token-type-ids", f"{folder}/types.npy")
    )


def golden_bert(work: Path) -> None:
    """PyTorch's outputs for tiny:bert/masked-lm on the default sentences, saved
    (``golden-bert.npz``) as ``--save-outputs`` saves them, its report dropped."""
    from tfparity.cli import main

    argv = ["crosscheck", "tiny:bert/masked-lm", "--no-reload"]
    with contextlib.redirect_stdout(io.StringIO()):
        main([*argv, "--save-outputs", str(work / "golden-bert.npz")])


SETUPS: dict[str, Callable[[Path], None]] = {
    "keras-hub-exports": keras_hub_exports,
    "gpt2-ffn": gpt2_ffn_port,
    "prompts": prompts,
    "prompts5": prompts5,
    "export-minilm": lambda work: saved_model_export("minilm", work / "minilm-export"),
    "export-tiny-faulty": lambda work: saved_model_export(
        "tiny:bert", work / "faulty-export", fault=True
    ),
    "export-tiny-no-mask": lambda work: saved_model_export(
        "tiny:bert", work / "ids-only", mask=False
    ),
    "port_bias": lambda work: run_script("make_broken_port", str(work / "port_bias")),
    "port_gelu": lambda work: run_script(
        "make_broken_port", str(work / "port_gelu"), "--fault", "gelu-new"
    ),
    "diag": lambda work: run_script("make_diagnose_example", "minilm", str(work / "diag")),
    "diag-correct": lambda work: run_script(
        "make_diagnose_example", "minilm", str(work / "diag-correct"), "--correct"
    ),
    **{
        f"diag-{case}": (
            lambda work, case=case: run_script(
                "make_diagnose_example", "minilm", str(work / f"diag-{case}"), "--case", case
            )
        )
        for case in DIAGNOSE_CASES
    },
    "task-heads": task_heads,
    "untied-mlm": untied_mlm,
    "labelled-ports": labelled_ports,
    "litert-int8": lambda work: litert_file(work / "int8.tflite", "dynamic-range int8"),
    "litert-fault": lambda work: litert_file(work / "fault.tflite", "fp32", fault=True),
    "litert-mlm": lambda work: litert_mlm(work),
    "litert-fp32": lambda work: litert_file(work / "bert.tflite", "fp32"),
    "onnx": lambda work: onnx_files(work),
    "onnx-int8": lambda work: onnx_int8(work),
    "onnx-gpt2": lambda work: onnx_gpt2(work),
    "keras-backends": lambda work: keras_backends(work),
    "golden-bert": lambda work: golden_bert(work),
    "keras-backends-mixed": lambda work: keras_backends_mixed(work),
}
