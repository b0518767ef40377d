"""Examples of scripts/doc_examples.py that are a Python function of the scratch
directory giving (exit code, output) rather than a ``tfparity`` command line."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from doc_example_type import ROOT, in_dir


def cache_fault(work: Path) -> tuple[int, str]:
    """`tfparity.generate` on the tiny GPT-2 whose cached steps' positions are shifted."""
    from tfparity import generate
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.report.generation import render_generation
    from tfparity.testing import CACHE_FAULTS

    spec = "tiny:gpt2/causal-lm"
    port = CACHE_FAULTS[0].apply(TFModel.load(spec))
    report = generate(port, pt=spec, new_tokens=8, texts=["Hello world."])
    return (0 if report.passed else 1), render_generation(report)


def t5_decoder_fault(work: Path) -> tuple[int, str]:
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


def t5_crosscheck_decoder_fault(work: Path) -> tuple[int, str]:
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


def frozen_norm(frozen: tuple[str, ...]) -> Callable[[Path], tuple[int, str]]:
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


def embeds_fn_float16(work: Path) -> tuple[int, str]:
    """`check_embeds` on minilm, fed its own word embeddings rounded through float16."""
    import numpy as np

    from tfparity import check_embeds, load_model, render

    model = load_model("minilm")
    word = model.word_matrix()
    report = check_embeds(model, embeds_fn=lambda batch: word[batch.input_ids].astype(np.float16))
    return (0 if report.passed else 1), render(report)


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


def pytest_failure(work: Path) -> tuple[int, str]:
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


def own_model(work: Path) -> tuple[int, str]:
    """tfparity/examples/keras_bert.py's main(): a hand-written Keras 3 BERT, cross-checked
    as ported (PASS), then with one FFN kernel of layer 1 scaled (FAIL, localised)."""
    from tfparity.examples import keras_bert

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        keras_bert.main()
    return 0, out.getvalue()


def own_head(work: Path) -> tuple[int, str]:
    """tfparity/examples/own_head.py's main(): a head model of one's own on both sides,
    cross-checked as built (PASS), then with the Keras classifier's kernel scaled (FAIL)."""
    from tfparity.examples import own_head

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        own_head.main()
    return 0, out.getvalue()


def runtimes_broken(work: Path) -> tuple[int, str]:
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
        with in_dir(work), contextlib.redirect_stdout(out):
            code = cli.main(["runtimes", "bert.tflite", "--threads", "1,2"])
    finally:
        KERNEL_SETS["litert"] = litert
    return code, "tfparity runtimes bert.tflite --threads 1,2\n\n" + out.getvalue()


def runtimes_onnx_broken(work: Path) -> tuple[int, str]:
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
        with in_dir(work), contextlib.redirect_stdout(out):
            code = cli.main(["runtimes", "bert.onnx", "--threads", "1,2"])
    finally:
        KERNEL_SETS["onnx"] = onnx
    return code, "tfparity runtimes bert.onnx --threads 1,2\n\n" + out.getvalue()
