"""``generate keras-hub:<SPEC> --backend jax|torch``: a keras-hub causal LM's task
generates greedily in a worker process on another Keras backend, against HF PyTorch's
generate as on TensorFlow.

One worker for the module: keras-hub:tiny:gpt2/causal-lm converted once and run on
torch (JAX decodes eagerly step by step, slower; test_remote_side.py runs JAX), judged
against its own checkpoint (PASS: the same tokens, the cache consistent) and
against a copy of that checkpoint with layer 1's MLP output projection changed (FAIL:
the first divergent step named, the teacher-forced cross-check localising the defect
to layer 1). The gradients check runs in the same worker (the head's loss; the same
two checkpoints). The refusals (exit 2) load nothing, or reuse the worker.
"""

from __future__ import annotations

import shutil

import pytest

from tfparity import api, cli
from tfparity.errors import TfparityError
from tfparity.orchestration import load_model

SPEC = "keras-hub:tiny:gpt2/causal-lm"
NEW_TOKENS = 4
PROMPTS = ["the quick brown fox", "parity of two models"]


@pytest.fixture(scope="module")
def on_torch():
    side = load_model(SPEC, backend="torch")
    yield side
    side.close()


@pytest.fixture(scope="module")
def changed_checkpoint(tmp_path_factory):
    """A copy of tiny:gpt2's checkpoint with layer 1's MLP output projection scaled: the
    port (the original) then differs from it from layer 1 on, by far more than float32
    noise, so greedy tokens part too."""
    from safetensors.numpy import load_file, save_file

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir

    port = tmp_path_factory.mktemp("changed") / "gpt2"
    shutil.copytree(checkpoint_dir("gpt2"), port)
    weights = load_file(str(port / "model.safetensors"))
    weights["transformer.h.1.mlp.c_proj.weight"] *= 40.0
    save_file(weights, str(port / "model.safetensors"), metadata={"format": "pt"})
    return str(port)


def test_a_clean_causal_lm_on_torch_generates_hf_pytorch_tokens(on_torch):
    report = api.generate(on_torch, pt="tiny:gpt2/causal-lm", new_tokens=NEW_TOKENS, texts=PROMPTS)
    assert report.passed, [c.name for c in report.failures]
    assert report.details["compares"].startswith("Keras 3 on torch generate (actual)")
    assert any("keras-hub on the torch backend" in n for n in report.notes)
    assert report.details["kv_cache"] == "yes"
    cache = [c for c in report.comparisons if "cache" in c.name]
    assert cache and all(c.passed for c in cache)  # the worker's cached steps checked


def test_a_changed_weight_fails_on_torch_naming_the_step_and_layer(on_torch, changed_checkpoint):
    report = api.generate(on_torch, pt=changed_checkpoint, new_tokens=NEW_TOKENS, texts=PROMPTS)
    assert not report.passed
    assert {c.name for c in report.failures} == {"prompt 0: tokens", "prompt 1: tokens"}
    assert all(c.passed for c in report.comparisons if "cache" in c.name)  # not the cache
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (2, 1, None)  # the layer, not below
    assert "prompt 0, first divergent step 0" in d.hint
    assert "h.1.mlp.c_proj.weight" in d.hint  # the weight, named
    assert f"crosscheck {SPEC} --backend torch`" in d.hint  # advice that runs as given


def test_crosscheck_of_the_task_on_torch_compares_its_logits(on_torch):
    """The task is carried whole: its head's logits come back with the hidden states."""
    (report,) = api.crosscheck(tf=on_torch, pt="tiny:gpt2/causal-lm")
    assert report.passed, [c.name for c in report.failures]
    assert {"hidden_states[2]", "logits"} <= {c.name for c in report.comparisons}
    assert on_torch.side_kind == "a keras-hub CausalLM task on the torch backend"


def test_gradients_of_the_task_on_torch_pass_through_its_heads_loss(on_torch):
    """The same worker differentiates: the scalar is the head's loss on seeded labels,
    and GPT-2's fused c_attn (query, key and value in Keras) gets its parts summed."""
    (report,) = api.gradients(on_torch, pt="tiny:gpt2/causal-lm")
    assert report.passed, [c.name for c in report.failures]
    assert report.details["compares"].startswith("Keras 3 on torch (actual)")
    assert report.details["scalar"].startswith("the head's loss on seeded labels")
    assert "grad:h.0.attn.c_attn.weight" in {c.name for c in report.comparisons}


def test_gradients_of_a_changed_layer_fail_on_torch_localised(on_torch, changed_checkpoint):
    (report,) = api.gradients(on_torch, pt=changed_checkpoint)
    assert not report.passed
    assert report.first_divergence.layer == 1


def test_the_worker_refuses_the_embeds_start_by_name(on_torch):
    generator = on_torch.generator()
    assert "token ids only" in generator.embeds_refusal
    with pytest.raises(TfparityError, match="torch backend"):
        generator.generate_from_embeds(None, 1)


def test_check_still_refuses_backend(capsys):
    assert cli.main(["check", "keras-hub:tiny:gpt2", "--backend", "jax"]) == 2
    err = capsys.readouterr().err
    assert "built for `tfparity crosscheck`, `tfparity generate` and `tfparity gradients`" in err
    assert "Traceback" not in err


def test_quantize_with_backend_exits_2_before_loading(capsys):
    argv = ["generate", SPEC, "--backend", "jax", "--quantize", "int8"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "not quantised: drop one of the two" in err and "Traceback" not in err


def test_backend_on_a_hugging_face_tf_model_exits_2(capsys):
    assert cli.main(["generate", "tiny:gpt2", "--backend", "torch"]) == 2
    assert "--backend torch runs a keras-hub model" in capsys.readouterr().err
