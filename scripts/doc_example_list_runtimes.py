"""The examples of the pages on quantised generation, Keras backends, LiteRT, ONNX,
runtimes, exported models and CI, in page order: the rest of EXAMPLES in
scripts/doc_examples.py."""

from __future__ import annotations

from doc_example_type import Example
from doc_excerpts import (
    assertion_message,
    distribution_and_verdict,
    divergence_and_hint,
    export_verdicts,
    quantised_generation,
    verdict_and_mask_notes,
)
from doc_runs import pytest_failure, runtimes_broken, runtimes_onnx_broken

RUNTIME_EXAMPLES: tuple[Example, ...] = (
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
        keep=quantised_generation,
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
        keep=distribution_and_verdict,
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
        run=runtimes_broken,
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
        run=runtimes_onnx_broken,
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
        keep=divergence_and_hint,
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
        keep=divergence_and_hint,
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
        keep=divergence_and_hint,
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
        keep=divergence_and_hint,
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
        keep=verdict_and_mask_notes,
    ),
    Example(
        "export-minilm",
        "docs/exported-models.md",
        0,
        ("crosscheck", "minilm-export", "--source", "minilm"),
        setup=("export-minilm",),
        keep=export_verdicts,
        minilm=True,
        tested=False,
        why_untested="writing the MiniLM SavedModel takes about 40 s before the run",
    ),
    Example(
        "pytest-failure-message",
        "docs/ci-and-pytest.md",
        1,
        run=pytest_failure,
        keep=assertion_message,
    ),
)
