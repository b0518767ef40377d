"""``tfparity generate`` on an ONNX causal LM with its KV cache (tiny GPT-2 exported once
per session by ``export_with_cache``, conftest.py): the clean file's greedy tokens agree
with PyTorch's and its cached steps with the graph's recomputation; the file with one
weight scaled by 1.05 fails, localised to that layer; one with a layer's present key
and value swapped fails the cache against the recomputation alone; a graph without
cache inputs is exit 2 naming what it lacks. The export costs about 20 s: slow (it runs in CI)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("torch")

from tfparity import cli  # noqa: E402

pytestmark = pytest.mark.slow
SCALED = "h.1.mlp.c_fc.weight"  # conftest.py's gpt2_cached scales it
TEXTS = ["--text", "The quick brown fox", "--text", "Hello world."]
RANDOM = ["--random", "2", "--seq-len", "5"]  # a checkpoint directory has no tokenizer


def _generate(capsys, tmp_path, path, *args):
    report = tmp_path / "report.json"
    code = cli.main(["generate", str(path), *args, "--json", str(report)])
    out, err = capsys.readouterr()
    return code, out + err, json.loads(report.read_text()) if report.exists() else None


def test_a_cached_export_generates_as_pytorch_on_its_cache(gpt2_cached, capsys, tmp_path):
    code, out, report = _generate(
        capsys, tmp_path, gpt2_cached["clean"], "--pt", "tiny:gpt2", "--new-tokens", "6", *TEXTS
    )
    assert code == 0, out
    d = report["details"]
    assert d["compares"].startswith("ONNX Runtime ") and "ExecutionProvider" in d["compares"]
    assert "graph's KV cache" in d["decoding"] and d["kv_cache"] == "yes"
    assert "token ids" in d["embeds_start"]  # the graph takes no inputs_embeds
    for row in d["generation"]:
        assert row["tokens_agreed"] == row["new_tokens"] == 6
        assert row["tf_tokens"] == row["pt_tokens"]
        assert not row["cache_failures"] and not row["defects"]
    names = {c["name"] for c in report["comparisons"]}
    assert names == {f"prompt {i}: {k}" for i in (0, 1) for k in ("tokens", "cache")}
    assert all(c["passed"] for c in report["comparisons"])


def test_a_cached_export_with_c_fc_scaled_fails_localised_to_layer_1(gpt2_cached, capsys, tmp_path):
    code, out, report = _generate(
        capsys, tmp_path, gpt2_cached["scaled"], "--pt", gpt2_cached["ckpt"], "--new-tokens", "6",
        *RANDOM,
    )  # fmt: skip
    assert code == 1, out
    failing = {c["name"].split(": ")[1] for c in report["comparisons"] if not c["passed"]}
    assert failing == {"tokens"}  # the weight is off; the cache agrees with the graph
    d = report["first_divergence"]  # the teacher-forced pass, read inside the graph
    assert (d["layer"], d["component"]) == (1, "intermediate"), d
    assert "teacher-forced sequence" in d["hint"] and SCALED in d["hint"], d["hint"]
    assert f"crosscheck {gpt2_cached['scaled']} --pt {gpt2_cached['ckpt']}" in d["hint"]


def test_a_cache_wired_wrong_fails_against_the_recomputation(gpt2_cached, capsys, tmp_path):
    # layer 1's present key and value swapped: the prefill and the recomputation are
    # untouched (they run on an empty past), every later step reads the wrong tensors
    swapped = _swapped(gpt2_cached["clean"], tmp_path / "swapped.onnx", "present.1")
    code, out, report = _generate(
        capsys, tmp_path, swapped, "--pt", "tiny:gpt2", "--new-tokens", "4", *TEXTS[:2]
    )
    assert code == 1, out
    (row,) = report["details"]["generation"]
    assert row["cache_failures"] == [1, 2, 3] and not row["defects"]
    failing = [c["name"] for c in report["comparisons"] if not c["passed"]]
    assert failing == ["prompt 0: cache"]


def _swapped(path, out, prefix):
    """A copy of the graph at ``path`` whose outputs ``{prefix}.key`` and ``.value``
    trade places (their producing nodes' outputs renamed)."""
    import onnx

    model = onnx.load(path)
    names = {f"{prefix}.key": f"{prefix}.value", f"{prefix}.value": f"{prefix}.key"}
    for node in model.graph.node:
        node.output[:] = [names.get(o, o) for o in node.output]
        node.input[:] = [names.get(i, i) for i in node.input]
    onnx.save_model(model, out)
    return out


def test_the_api_generates_on_an_onnx_cache(gpt2_cached):
    from tfparity.api import generate

    report = generate(
        str(gpt2_cached["clean"]), pt="tiny:gpt2", new_tokens=3, texts=["Hello world."]
    )
    assert report.passed
    assert report.details["generation"][0]["tokens_agreed"] == 3


def test_a_graph_without_cache_inputs_is_refused_naming_them(gpt2_cached, capsys, tmp_path):
    code, err, _ = _generate(capsys, tmp_path, gpt2_cached["plain"], "--pt", "tiny:gpt2", *TEXTS)
    assert code == 2, err
    assert "no past_key_values.{i}.key / .value inputs" in err
    assert "present.{i}.key / .value outputs" in err
    assert "export_with_cache" in err and "Traceback" not in err
