"""Tests for tfparity.adapters.hf_tf.loading through ``TFModel.load(path)``.

Checkpoints are written into temporary directories from the tiny BERT config: a
PyTorch one (safetensors and pickle) and TF ones, then broken in various ways. Every
broken checkpoint must raise TfparityError (exit code 2), never another exception.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.errors import TfparityError
from tfparity.inputs import text_batches

TEXTS = ["hello world", "the quick brown fox jumps over the lazy dog", "why?"]


@pytest.fixture(scope="module")
def pt_checkpoint(tmp_path_factory):
    """A PyTorch BertModel (tiny config, seeded) saved as safetensors with the tiny
    tokenizer, and the same model saved as a pickle. Returns (torch model, dirs)."""
    torch = pytest.importorskip("torch")
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer

    torch.manual_seed(0)
    model = transformers.BertModel(tiny_config("bert")).eval()
    root = tmp_path_factory.mktemp("pt")
    safe, pickle = root / "safetensors", root / "pickle"
    model.save_pretrained(safe, safe_serialization=True)
    tiny_tokenizer().save_pretrained(safe)
    model.save_pretrained(pickle, safe_serialization=False)
    assert (safe / "model.safetensors").is_file()
    assert (pickle / "pytorch_model.bin").is_file()
    assert not (pickle / "model.safetensors").exists()
    return model, {"safetensors": safe, "pickle": pickle}


@pytest.fixture(scope="module")
def batch():
    from tfparity.adapters.sources.tiny import tiny_tokenizer

    (b,) = text_batches(tiny_tokenizer(), TEXTS)
    assert (b.attention_mask == 0).any()  # padded, so masking matters
    return b


def _torch_hidden_states(model, batch) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(batch.input_ids, dtype=torch.long),
            attention_mask=torch.tensor(batch.attention_mask, dtype=torch.long),
            token_type_ids=torch.tensor(batch.token_type_ids, dtype=torch.long),
            output_hidden_states=True,
        )
    return [h.numpy() for h in out.hidden_states] + [out.last_hidden_state.numpy()]


def _tf_hidden_states(model: TFModel, batch) -> list[np.ndarray]:
    trace = model.run(batch)
    return [*trace.hidden_states, trace["last_hidden_state"]]


def _copy(src: Path, dst: Path, *names: str) -> Path:
    dst.mkdir()
    for name in names:
        shutil.copy(src / name, dst / name)
    return dst


def _edit_config(directory: Path, **changes) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


# ---------------------------------------------------------------- good checkpoints


def test_pytorch_safetensors_checkpoint(pt_checkpoint, batch):
    pt_model, dirs = pt_checkpoint
    tf_model = TFModel.load(str(dirs["safetensors"]))
    assert type(tf_model.model).__name__ == "TFBertModel"
    assert tf_model.source.startswith("PyTorch safetensors")
    assert tf_model.notes == []  # every weight came from the checkpoint
    assert tf_model.tokenizer is not None
    assert tf_model.tokenizer("hello world")["input_ids"] == batch.input_ids[0, :5].tolist()
    np.testing.assert_array_equal(
        tf_model.word_embeddings().numpy(),
        pt_model.embeddings.word_embeddings.weight.detach().numpy(),
    )
    tf_states = _tf_hidden_states(tf_model, batch)
    pt_states = _torch_hidden_states(pt_model, batch)
    assert len(tf_states) == len(pt_states) == 4  # embeddings, 2 layers, last
    mask = batch.attention_mask.astype(bool)
    for tf_h, pt_h in zip(tf_states, pt_states, strict=True):
        np.testing.assert_allclose(tf_h[mask], pt_h[mask], atol=1e-4, rtol=0)


@pytest.mark.parametrize("safe", [False, True], ids=["h5", "safetensors"])
def test_tf_checkpoint_roundtrip(load_tf_model, batch, tmp_path, safe):
    original = load_tf_model("tiny:bert")
    original.model.save_pretrained(tmp_path, safe_serialization=safe)
    weights = "model.safetensors" if safe else "tf_model.h5"
    assert (tmp_path / weights).is_file()
    loaded = TFModel.load(str(tmp_path))
    assert loaded.source.startswith("TF weights")
    assert loaded.tokenizer is None  # none was saved
    expected, actual = original.run(batch), loaded.run(batch)
    assert list(actual) == list(expected)
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_sharded_tf_safetensors_checkpoint(load_tf_model, batch, tmp_path):
    original = load_tf_model("tiny:bert")
    original.model.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="50KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert not (tmp_path / "model.safetensors").exists()
    loaded = TFModel.load(str(tmp_path))
    assert loaded.notes == []
    np.testing.assert_array_equal(
        loaded.run(batch)["last_hidden_state"], original.run(batch)["last_hidden_state"]
    )


def test_pickle_checkpoint_needs_allow_pickle(pt_checkpoint, batch):
    pt_model, dirs = pt_checkpoint
    with pytest.raises(TfparityError, match="--allow-pickle") as info:
        TFModel.load(str(dirs["pickle"]))
    assert "pytorch_model.bin" in str(info.value)
    tf_model = TFModel.load(str(dirs["pickle"]), allow_pickle=True)
    assert "weights_only" in tf_model.source
    assert tf_model.tokenizer is None
    np.testing.assert_array_equal(
        tf_model.word_embeddings().numpy(),
        pt_model.embeddings.word_embeddings.weight.detach().numpy(),
    )
    np.testing.assert_allclose(
        tf_model.run(batch)["last_hidden_state"],
        _torch_hidden_states(pt_model, batch)[-1],
        atol=1e-4,
        rtol=0,
    )


# ---------------------------------------------------------------- broken checkpoints


def test_corrupt_safetensors(pt_checkpoint, tmp_path):
    directory = _copy(pt_checkpoint[1]["safetensors"], tmp_path / "m", "config.json")
    (directory / "model.safetensors").write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(TfparityError, match="corrupt") as info:
        TFModel.load(str(directory))
    assert type(info.value) is TfparityError
    assert "model.safetensors" in str(info.value)


def test_truncated_safetensors(pt_checkpoint, tmp_path):
    source = pt_checkpoint[1]["safetensors"]
    directory = _copy(source, tmp_path / "m", "config.json")
    data = (source / "model.safetensors").read_bytes()
    (directory / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(TfparityError, match="model.safetensors") as info:
        TFModel.load(str(directory))
    assert type(info.value) is TfparityError


def test_empty_safetensors_file(pt_checkpoint, tmp_path):
    directory = _copy(pt_checkpoint[1]["safetensors"], tmp_path / "m", "config.json")
    (directory / "model.safetensors").write_bytes(b"")
    with pytest.raises(TfparityError, match="corrupt"):
        TFModel.load(str(directory))


def test_corrupt_tf_h5(pt_checkpoint, tmp_path):
    directory = _copy(pt_checkpoint[1]["safetensors"], tmp_path / "m", "config.json")
    (directory / "tf_model.h5").write_bytes(b"not an hdf5 file" * 64)
    with pytest.raises(TfparityError, match="TF checkpoint .* could not be loaded"):
        TFModel.load(str(directory))


def test_config_without_weights(pt_checkpoint, tmp_path):
    source = pt_checkpoint[1]["safetensors"]
    directory = _copy(source, tmp_path / "m", "config.json", "vocab.txt")
    with pytest.raises(TfparityError, match="no model weights") as info:
        TFModel.load(str(directory))
    assert "model.safetensors" in str(info.value)


def test_config_not_matching_weights(pt_checkpoint, tmp_path):
    directory = tmp_path / "m"
    shutil.copytree(pt_checkpoint[1]["safetensors"], directory)
    _edit_config(directory, hidden_size=64)
    with pytest.raises(TfparityError, match="do not fit the model that config.json describes"):
        TFModel.load(str(directory))


def test_config_with_auto_map_is_refused(pt_checkpoint, tmp_path):
    directory = tmp_path / "m"
    shutil.copytree(pt_checkpoint[1]["safetensors"], directory)
    _edit_config(directory, auto_map={"AutoModel": "modeling_evil.EvilModel"})
    (directory / "modeling_evil.py").write_text("raise SystemExit('remote code ran')\n")
    with pytest.raises(TfparityError, match="remote code") as info:
        TFModel.load(str(directory))
    assert "auto_map" in str(info.value)


def test_config_not_json(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(TfparityError, match="Could not read .*config.json"):
        TFModel.load(str(tmp_path))


def test_config_of_architecture_without_tf_model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(TfparityError, match="no TensorFlow model for 'llama'"):
        TFModel.load(str(tmp_path))


# ---------------------------------------------------------------- tiny models


def _weights_by_name(model: TFModel) -> dict[str, np.ndarray]:
    from tfparity.adapters.sources.tiny import _scope_free_name

    return {_scope_free_name(w.name): w.numpy() for w in model.model.weights}


def test_tiny_models_are_deterministic():
    first, second = TFModel.load("tiny:bert"), TFModel.load("tiny:bert")
    assert first.model is not second.model
    a, b = _weights_by_name(first), _weights_by_name(second)
    assert len(a) > 10
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    # Seeded, not left at TF's initialisers (zero biases, unit LayerNorm scales).
    assert all(np.abs(v).max() > 0 for v in a.values())


def test_tiny_architectures_differ(load_tf_model):
    bert, roberta = load_tf_model("tiny:bert"), load_tf_model("tiny:roberta")
    assert type(roberta.model).__name__ == "TFRobertaModel"
    a, b = bert.word_embeddings().numpy(), roberta.word_embeddings().numpy()
    assert a.shape == b.shape
    assert not np.allclose(a, b)


# config.json as the best-known checkpoints of each family publish it (the fields the
# rules look at, copied from their config.json files).
REAL_CONFIGS = {
    "bert-base-uncased": {
        "model_type": "bert",
        "hidden_size": 768,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "vocab_size": 30522,
    },
    "roberta-base": {
        "model_type": "roberta",
        "hidden_size": 768,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
        "vocab_size": 50265,
    },
    "microsoft/deberta-v3-base": {
        "model_type": "deberta-v2",
        "hidden_size": 768,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "max_relative_positions": -1,
        "position_buckets": 256,
        "position_biased_input": False,
        "pos_att_type": ["p2c", "c2p"],
        "relative_attention": True,
        "type_vocab_size": 0,
        "vocab_size": 128100,
    },
    "microsoft/deberta-base": {
        "model_type": "deberta",
        "hidden_size": 768,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "max_relative_positions": -1,
        "position_biased_input": False,
        "pos_att_type": "c2p|p2c",
        "relative_attention": True,
        "type_vocab_size": 0,
        "vocab_size": 50265,
    },
    "gpt2": {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_ctx": 1024},
    "t5-small": {"model_type": "t5", "d_model": 512, "num_heads": 8, "num_layers": 6},
    "distilbert-base-uncased": {"model_type": "distilbert", "dim": 768, "n_heads": 12},
}


def _config_dir(tmp_path: Path, name: str, data: dict) -> Path:
    directory = tmp_path / name.replace("/", "--")
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(data))
    return directory


@pytest.mark.parametrize("name", sorted(REAL_CONFIGS))
def test_real_checkpoint_configs_are_accepted(tmp_path, name):
    from tfparity.adapters.sources.checkpoint_files import read_config

    config = read_config(_config_dir(tmp_path, name, REAL_CONFIGS[name]))
    assert config.model_type == REAL_CONFIGS[name]["model_type"]


def test_every_registered_architecture_default_config_is_accepted(tmp_path):
    import transformers

    from tfparity.adapters.sources.checkpoint_files import read_config
    from tfparity.architectures import registry

    for model_type in sorted(registry()):
        data = transformers.CONFIG_MAPPING[model_type]().to_dict()  # gpt-sw3's says gpt2
        config = read_config(_config_dir(tmp_path, model_type, data))
        assert config.model_type == data["model_type"]


@pytest.mark.parametrize(
    "change, named",
    [
        ({"type_vocab_size": -1}, '"type_vocab_size" is -1; it must be a whole number >= 0'),
        ({"num_hidden_layers": 0}, '"num_hidden_layers" is 0; it must be a whole number >= 1'),
    ],
)
def test_configs_transformers_refuses_are_refused_naming_the_field(tmp_path, change, named):
    from tfparity.adapters.sources.checkpoint_files import read_config

    data = {**REAL_CONFIGS["microsoft/deberta-v3-base"], **change}
    with pytest.raises(TfparityError, match="config.json") as info:
        read_config(_config_dir(tmp_path, "bad", data))
    assert named in str(info.value)


def test_a_deberta_v3_shaped_checkpoint_is_checked(tmp_path, capsys):
    """type_vocab_size 0, as every real DeBERTa-v2/v3 checkpoint has: checked, not refused."""
    torch = pytest.importorskip("torch")
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer
    from tfparity.cli import main

    torch.manual_seed(0)
    config = tiny_config("deberta-v2")
    assert config.type_vocab_size == 0
    transformers.DebertaV2Model(config).save_pretrained(tmp_path / "m", safe_serialization=True)
    tiny_tokenizer().save_pretrained(tmp_path / "m")
    assert json.loads((tmp_path / "m" / "config.json").read_text())["type_vocab_size"] == 0
    assert main(["check", str(tmp_path / "m"), "--random", "2", "--seq-len", "8"]) == 0
    assert "PASS crosscheck" in capsys.readouterr().out


def test_heads_that_do_not_divide_the_hidden_size_get_transformers_reason(tmp_path, capsys):
    from tfparity.cli import main

    directory = tmp_path / "m"
    shutil.copytree(_tiny_bert_checkpoint(tmp_path), directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "num_attention_heads": 5}))
    assert main(["check", str(directory), "--no-pt"]) == 2
    err = capsys.readouterr().err
    assert "config.json" in err and "not a multiple of the number of attention heads" in err
    assert "please report" not in err and "Traceback" not in err


def _tiny_bert_checkpoint(tmp_path: Path) -> Path:
    torch = pytest.importorskip("torch")
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer

    torch.manual_seed(0)
    directory = tmp_path / "tiny-bert"
    transformers.BertModel(tiny_config("bert")).save_pretrained(directory, safe_serialization=True)
    tiny_tokenizer().save_pretrained(directory)
    return directory


def test_a_head_whose_optional_package_is_missing_is_a_usage_error_naming_it(capsys):
    import importlib.util

    from tfparity.cli import main

    if importlib.util.find_spec("tensorflow_probability") is not None:
        pytest.skip("tensorflow_probability is installed: TAPAS's TF heads can run")
    argv = ["crosscheck", "tiny:tapas/question-answering", "--random", "2", "--no-reload"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "TFTapasForQuestionAnswering cannot run here" in err
    assert "tensorflow_probability" in err and "please report it" not in err
