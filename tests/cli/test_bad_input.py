"""Every foreseeable bad input to the CLI is refused clearly (issue 12).

Each case runs in-process through ``cli.main`` (what ``python -m tfparity`` calls) and
must exit 2 with a message on stderr that names the offending input, no traceback and
not the "please report it" catch-all. Cases that need a model use tiny ones; most are
refused before any model loads. The API's refusals: tests/test_api_bad_arguments.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tfparity import cli

CATCH_ALL = "please report it"


# ----------------------------------------------------------------------------- files


def _sweep_dir(path: Path, lines: list[bytes], *, items: int = 4, shard: str = "0/1") -> Path:
    """A hand-made sweep output: run.json and results.jsonl with ``lines``."""
    path.mkdir(parents=True)
    manifest = {
        "model": "tiny:bert",
        "checks": ["embeds"],
        "corpus": {"path": "c.txt", "format": "txt", "items": items, "sha256": "x"},
        "corpus_sha256": "x",
        "shard": shard,
        "options": {},
    }
    (path / "run.json").write_text(json.dumps(manifest))
    (path / "results.jsonl").write_bytes(b"".join(lines))
    return path


def _line(index: int) -> bytes:
    return json.dumps({"index": index, "id": str(index), "passed": True, "checks": {}}).encode() + (
        b"\n"
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("bad")
    f: dict[str, Path] = {}

    def put(name: str, data: bytes) -> Path:
        f[name] = d / name
        f[name].write_bytes(data)
        return f[name]

    put("binary.txt", b"\xff\xfe\x00\x81binary\n")
    put("latin1.txt", b"fine line\ncaf\xe9\n")
    put("surrogate.jsonl", b'{"text": "ok"}\n{"text": "bad \\ud800 text"}\n')
    put("notext.jsonl", b'{"text": "ok"}\n{"id": 3}\n')
    put("blank.txt", b"\n  \n")
    put("corpus3.txt", b"one\ntwo\nthree\n")
    put("a_file", b"x")
    put("not_a.tflite", b"not a flatbuffer")
    for name, array in {
        "ids.npy": np.array([[5, 6, 7, 8]], np.int64),
        "big_ids.npy": np.array([[5, 6, 2**32 + 5, 8]], np.int64),
        "neg_ids.npy": np.array([[5, -1, 7, 8]], np.int64),
        "float_ids.npy": np.array([[5.5, 6, 7, 8]]),
        "inf_ids.npy": np.array([[np.inf, 6, 7, 8]]),
        "nan_ids.npy": np.array([[np.nan, 6, 7, 8]]),
        "bool_ids.npy": np.array([[True, False, True, True]]),
        "empty.npy": np.zeros((0, 4), np.int32),
        "embeds.npy": np.random.default_rng(0).normal(size=(1, 4, 32)).astype(np.float32),
        "int_embeds.npy": np.ones((1, 4, 32), np.int32),
        "nan_embeds.npy": np.full((1, 4, 32), np.nan, np.float32),
        "inf_embeds.npy": np.full((1, 4, 32), np.inf, np.float32),
        "mask0.npy": np.zeros((1, 4), np.int32),
        "mask2.npy": np.full((1, 4), 2, np.int32),
        "mask_short.npy": np.ones((1, 3), np.int32),
    }.items():
        f[name] = d / name
        np.save(f[name], array)
    f["ids.npz"] = d / "ids.npz"
    np.savez(f["ids.npz"], ids=np.array([[5, 6, 7, 8]]))
    for name, text in {
        "cfg_list": "[1, 2]",
        "cfg_no_type": '{"hidden_size": 32}',
        "cfg_bad_type": '{"model_type": "not-a-model"}',
        "cfg_str_size": '{"model_type": "bert", "hidden_size": "big"}',
        "cfg_neg_size": '{"model_type": "bert", "num_hidden_layers": -2}',
        "cfg_not_json": '{"model_type": "bert",',
    }.items():
        (d / name).mkdir()
        (d / name / "config.json").write_text(text)
        (d / name / "model.safetensors").write_bytes(b"")
        f[name] = d / name
    # a bert directory (named so that a guess from the name would succeed) whose
    # tokenizer asks for custom code
    custom = d / "bert-custom-tok"
    custom.mkdir()
    from tfparity.adapters.hf_tf.tf_model import TFModel

    TFModel.load("tiny:bert").model.save_pretrained(str(custom))
    (custom / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    (custom / "tokenizer_config.json").write_text(
        json.dumps({"auto_map": {"AutoTokenizer": ["tok.MyTok", None]}})
    )
    f["custom_tok"] = custom
    # sweep outputs for merge
    f["sw_torn"] = _sweep_dir(d / "sw_torn", [_line(0), b'{"index": 1, "pas'])
    f["sw_foreign"] = _sweep_dir(d / "sw_foreign", [_line(0), b"hello world\n"])
    f["sw_outside"] = _sweep_dir(d / "sw_outside", [_line(0), _line(99)])
    f["sw_repeat"] = _sweep_dir(d / "sw_repeat", [_line(0), _line(1), _line(0)])
    f["sw_boolidx"] = _sweep_dir(d / "sw_boolidx", [b'{"index": true}\n'])
    f["sw_s0"] = _sweep_dir(d / "sw_s0", [_line(0), _line(1)], shard="0/2")
    f["sw_s1"] = _sweep_dir(d / "sw_s1", [_line(1), _line(3)], shard="1/2")
    f["sw_ok"] = _sweep_dir(d / "sw_ok", [_line(0)])
    f["sw_ok2"] = _sweep_dir(d / "sw_ok2", [_line(1)], shard="1/2")
    preset = d / "preset"  # what save_to_preset writes first: enough to be named a preset
    preset.mkdir()
    (preset / "metadata.json").write_text("{}")
    f["preset"] = preset
    f["dir"] = d
    return {k: str(v) for k, v in f.items()}


# ----------------------------------------------------------------------------- CLI

# (id, argv with {file} placeholders, fragments the message must hold)
CLI_CASES = [
    # 1. tolerances
    ("check-atol-nan", "check tiny:bert --no-pt --atol nan", ["--atol", "nan"]),
    ("check-rtol-nan", "check tiny:bert --no-pt --rtol nan", ["--rtol", "nan"]),
    ("check-atol-inf", "check tiny:bert --no-pt --atol inf", ["--atol", "inf"]),
    ("check-atol-neg", "check tiny:bert --no-pt --atol -1", ["--atol", "-1"]),
    ("check-rtol-word", "check tiny:bert --no-pt --rtol small", ["--rtol", "small"]),
    ("crosscheck-atol-nan", "crosscheck tiny:bert --atol nan", ["--atol", "nan"]),
    ("modes-rtol-inf", "modes tiny:bert --rtol inf", ["--rtol", "inf"]),
    ("positions-atol-nan", "positions tiny:bert --atol nan", ["--atol", "nan"]),
    (
        "diagnose-atol-neg",
        "diagnose tiny:bert --ids {ids.npy} --embeds {embeds.npy} --atol -0.5",
        ["--atol", "-0.5"],
    ),
    ("sweep-atol-nan", "sweep tiny:bert --atol nan --out {dir}/s1", ["--atol", "nan"]),
    ("sweep-rtol-neg", "sweep tiny:bert --rtol=-1e-3 --out {dir}/s2", ["--rtol", "-1e-3"]),
    # 2. nothing compared
    ("modes-tf32-on-cpu", "modes tiny:bert --devices cpu --modes tf32", ["tf32", "nothing"]),
    ("modes-only-reference", "modes tiny:bert --devices cpu --modes eager", ["eager", "nothing"]),
    ("modes-comma", "modes tiny:bert --modes ,", ["--modes", "no mode"]),
    (
        "diagnose-mask-zeros",
        "diagnose tiny:bert --ids {ids.npy} --embeds {embeds.npy} --attention-mask {mask0.npy}",
        ["attention_mask", "every token"],
    ),
    (
        "diagnose-mask-twos",
        "diagnose tiny:bert --ids {ids.npy} --embeds {embeds.npy} --attention-mask {mask2.npy}",
        ["attention_mask", "0", "1"],
    ),
    (
        "diagnose-mask-shape",
        "diagnose tiny:bert --ids {ids.npy} --embeds {embeds.npy} "
        "--attention-mask {mask_short.npy}",
        ["--attention-mask", "shape"],
    ),
    (
        "sweep-empty-shard",
        "sweep tiny:bert --texts {corpus3.txt} --shard 5/8 --out {dir}/s3",
        ["Shard 5/8", "no item"],
    ),
    (
        "sweep-blank-corpus",
        "sweep tiny:bert --texts {blank.txt} --out {dir}/s4",
        ["blank.txt", "no text"],
    ),
    # 3. NaN/Inf in the user's tensor
    (
        "diagnose-nan-embeds",
        "diagnose tiny:bert --ids {ids.npy} --embeds {nan_embeds.npy}",
        ["--embeds", "NaN"],
    ),
    (
        "diagnose-inf-embeds",
        "diagnose tiny:bert --ids {ids.npy} --embeds {inf_embeds.npy}",
        ["--embeds", "Inf"],
    ),
    # 4. ids range-checked before any cast
    (
        "diagnose-ids-2**32+5",
        "diagnose tiny:bert --ids {big_ids.npy} --embeds {embeds.npy}",
        ["--ids", "4294967301"],
    ),
    (
        "diagnose-ids-negative",
        "diagnose tiny:bert --ids {neg_ids.npy} --embeds {embeds.npy}",
        ["input_ids", "-1"],
    ),
    (
        "diagnose-ids-float",
        "diagnose tiny:bert --ids {float_ids.npy} --embeds {embeds.npy}",
        ["--ids", "5.5"],
    ),
    (
        "diagnose-ids-inf",
        "diagnose tiny:bert --ids {inf_ids.npy} --embeds {embeds.npy}",
        ["--ids", "inf"],
    ),
    (
        "diagnose-ids-nan",
        "diagnose tiny:bert --ids {nan_ids.npy} --embeds {embeds.npy}",
        ["--ids", "nan"],
    ),
    (
        "diagnose-ids-bool",
        "diagnose tiny:bert --ids {bool_ids.npy} --embeds {embeds.npy}",
        ["--ids", "bool"],
    ),
    # 5. foreseeable input never reaches the catch-all
    ("check-texts-binary", "check tiny:bert --no-pt --texts {binary.txt}", ["binary.txt", "UTF-8"]),
    (
        "check-texts-latin1",
        "check tiny:bert --no-pt --texts {latin1.txt}",
        ["latin1.txt", "line 2"],
    ),
    ("check-texts-missing", "check tiny:bert --no-pt --texts {dir}/nope.txt", ["nope.txt"]),
    (
        "sweep-binary",
        "sweep tiny:bert --texts {binary.txt} --out {dir}/s5",
        ["binary.txt", "line 1"],
    ),
    (
        "sweep-latin1",
        "sweep tiny:bert --texts {latin1.txt} --out {dir}/s6",
        ["latin1.txt", "line 2"],
    ),
    (
        "sweep-jsonl-surrogate",
        "sweep tiny:bert --texts {surrogate.jsonl} --out {dir}/s7",
        ["surrogate.jsonl", "line 2", "Unicode"],
    ),
    (
        "sweep-jsonl-no-text",
        "sweep tiny:bert --texts {notext.jsonl} --out {dir}/s8",
        ["notext.jsonl", "line 2", "text"],
    ),
    ("check-seed-negative", "check tiny:bert --no-pt --random 2 --seed -1", ["--seed", "-1"]),
    ("sweep-seed-negative", "sweep tiny:bert --seed -3 --out {dir}/s9", ["--seed", "-3"]),
    (
        "diagnose-npz-ids",
        "diagnose tiny:bert --ids {ids.npz} --embeds {embeds.npy}",
        ["--ids", ".npz"],
    ),
    (
        "diagnose-empty-ids",
        "diagnose tiny:bert --ids {empty.npy} --embeds {embeds.npy}",
        ["--ids", "empty"],
    ),
    (
        "diagnose-int-embeds",
        "diagnose tiny:bert --ids {ids.npy} --embeds {int_embeds.npy}",
        ["--embeds", "int32"],
    ),
    (
        "diagnose-missing-file",
        "diagnose tiny:bert --ids {dir}/none.npy --embeds {embeds.npy}",
        ["--ids", "none.npy"],
    ),
    (
        "diagnose-text-as-npy",
        "diagnose tiny:bert --ids {binary.txt} --embeds {embeds.npy}",
        ["--ids", "binary.txt"],
    ),
    ("sweep-out-is-file", "sweep tiny:bert --out {a_file}", ["--out", "a_file"]),
    ("merge-out-is-file", "merge {sw_ok} --out {a_file}", ["--out", "a_file"]),
    (
        "crosscheck-tf-pt-arch",
        "crosscheck --tf tiny:bert --pt tiny:gpt2 --random 2 --seq-len 8",
        ["bert", "gpt2", "Point --pt (or --load-outputs) at the bert checkpoint"],
    ),
    # 10. an argument given but unusable: what is wrong with it, not "give --X"
    ("crosscheck-only-tf", "crosscheck --tf tiny:bert", ["--tf tiny:bert", "add --pt"]),
    ("crosscheck-only-pt", "crosscheck tiny:bert --pt tiny:bert", ["--pt tiny:bert", "Add --tf"]),
    (
        "crosscheck-pt-preset",
        "crosscheck --tf tiny:bert --pt keras-hub:{preset} --random 2 --seq-len 8",
        ["--pt keras-hub:", "keras-hub preset", "Give --pt (pt=) the Hugging Face checkpoint"],
    ),
    (
        "check-custom-tokenizer",
        "check {custom_tok} --no-pt",
        ["tokenizer_config.json", "auto_map", "remote code"],
    ),
    ("check-config-list", "check {cfg_list} --no-pt", ["config.json", "list"]),
    ("check-config-no-type", "check {cfg_no_type} --no-pt", ["config.json", "model_type"]),
    ("check-config-unknown-type", "check {cfg_bad_type} --no-pt", ["config.json", "not-a-model"]),
    ("check-config-str-size", "check {cfg_str_size} --no-pt", ["hidden_size", "big"]),
    ("check-config-neg-size", "check {cfg_neg_size} --no-pt", ["num_hidden_layers", "-2"]),
    ("check-config-not-json", "check {cfg_not_json} --no-pt", ["config.json"]),
    ("check-unknown-tiny", "check tiny:nonesuch --no-pt", ["nonesuch"]),
    # 8. merge validates like --resume
    ("merge-torn-line", "merge {sw_torn} --out {dir}/m1", ["sw_torn", "line 2", "--resume"]),
    ("merge-foreign-line", "merge {sw_foreign} --out {dir}/m2", ["sw_foreign", "line 2"]),
    ("merge-index-outside", "merge {sw_outside} --out {dir}/m3", ["sw_outside", "line 2", "99"]),
    ("merge-repeated-index", "merge {sw_repeat} --out {dir}/m4", ["sw_repeat", "line 3", "item 0"]),
    ("merge-bool-index", "merge {sw_boolidx} --out {dir}/m5", ["sw_boolidx", "line 1"]),
    (
        "merge-index-wrong-shard",
        "merge {sw_s0} {sw_s1} --out {dir}/m6",
        ["sw_s0", "line 2", "shard 0/2"],
    ),
    ("merge-not-a-dir", "merge {a_file} --out {dir}/m7", ["a_file"]),
    (
        "sweep-resume-overwrite",
        "sweep tiny:bert --resume --overwrite --out {dir}/s10",
        ["--resume", "--overwrite"],
    ),
    # 9. small ones
    ("check-json-no-dir", "check tiny:bert --no-pt --json {dir}/nope/r.json", ["--json", "nope"]),
    ("crosscheck-html-dir", "crosscheck tiny:bert --html {dir}", ["--html", "is a directory"]),
    ("check-save-no-dir", "check tiny:bert --save-outputs {dir}/no/g.npz", ["--save-outputs"]),
    ("check-device-empty", "check tiny:bert --no-pt --device=", ["--device", "empty"]),
    ("crosscheck-device-blank", "crosscheck tiny:bert --device= ", ["--device", "empty"]),
    ("modes-devices-empty", "modes tiny:bert --devices=", ["--devices", "empty"]),
    ("embeddings-noise-nan", "embeddings tiny:bert --noise-scales nan", ["--noise-scales", "nan"]),
    (
        "embeddings-noise-inf",
        "embeddings tiny:bert --noise-scales 1,inf",
        ["--noise-scales", "inf"],
    ),
    ("embeddings-noise-neg", "embeddings tiny:bert --noise-scales -1", ["--noise-scales", "-1"]),
    ("embeddings-noise-empty", "embeddings tiny:bert --noise-scales ,", ["--noise-scales"]),
    ("check-random-zero", "check tiny:bert --no-pt --random 0", ["--random", "0"]),
    (
        "check-batch-size-zero",
        "check tiny:bert --no-pt --random 2 --batch-size 0",
        ["--batch-size", "0"],
    ),
    ("positions-permutations-zero", "positions tiny:bert --permutations 0", ["--permutations"]),
    ("sweep-shard-bad", "sweep tiny:bert --shard 3/2 --out {dir}/s11", ["--shard", "3/2"]),
    # a percentage given as a share: refused, its share suggested, as --budget does
    (
        "crosscheck-kl-budget-percent",
        "crosscheck tiny:gpt2/causal-lm --kl-budget same_top1=95",
        ["same_top1=95", "a share, at most 1", "95 -> 0.95"],
    ),
    ("generate-kl-budget-percent", "generate tiny:gpt2 --kl-budget same_top1=95", ["95 -> 0.95"]),
    (
        "sweep-kl-budget-percent",
        "sweep tiny:gpt2 --kl-budget same_top1=95 --out {dir}/s12",
        ["95 -> 0.95"],
    ),
    (
        "crosscheck-budget-percent",
        "crosscheck tiny:bert --budget agreement=95",
        ["agreement=95", "a share, at most 1", "95 -> 0.95"],
    ),
]


def _argv(template: str, files: dict[str, str]) -> list[str]:
    return [re.sub(r"\{([^}]+)\}", lambda m: files[m.group(1)], part) for part in template.split()]


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "template,fragments", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES]
)
def test_cli_refuses_bad_input(template, fragments, files, capsys):
    code, out, err = run_cli(_argv(template, files), capsys)
    lines = [line for line in err.splitlines() if line.startswith("tfparity: error:")]
    assert code == 2, (code, out[-2000:], err[-2000:])
    assert len(lines) == 1, err
    message = lines[0]
    assert "Traceback" not in out + err
    assert CATCH_ALL not in err, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize("command", ["gradients", "generate"])
def test_an_export_takes_its_config_from_the_pt_given(command, files, capsys):
    """gradients and generate read an export's config and tokenizer from --pt, as
    crosscheck does: the refusal used to ask for the --pt just given."""
    given = run_cli([command, files["not_a.tflite"], "--pt", "tiny:bert"], capsys)
    assert given[0] == 2 and "not_a.tflite is not a LiteRT flatbuffer" in given[2]
    assert CATCH_ALL not in given[2]
    assert "no Hugging Face config" not in given[2] and "--pt MODEL" not in given[2]
    alone = run_cli([command, files["not_a.tflite"]], capsys)
    assert alone[0] == 2 and "no Hugging Face config" in alone[2] and "--pt MODEL" in alone[2]


def test_enough_cases():
    assert len(CLI_CASES) >= 40  # with the API's 20 (tests/test_api_bad_arguments.py): 60


# ----------------------------------------------------------------------------- behaviour


def test_an_unwritable_output_is_refused_before_the_run(files, capsys):
    code, out, err = run_cli(_argv("check tiny:bert --json {dir}/nope/r.json", files), capsys)
    assert code == 2 and "does not exist" in err
    assert "PASS" not in out and "tfparity embeds" not in out  # nothing ran


@pytest.mark.parametrize("command", ["check", "positions", "embeddings"])
def test_json_dash_writes_the_report_to_stdout(command, capsys):
    extra = ["--no-pt"] if command == "check" else []
    code, out, err = run_cli(
        [command, "tiny:bert", "--random", "2", "--seq-len", "8", "--json", "-", *extra], capsys
    )
    assert code == 0, err
    data = json.loads(out)  # stdout is the JSON alone; the text report went to stderr
    assert data["model"] == "tiny:bert" and data["passed"] is True
    assert "PASS" in err
    assert not Path("-").exists()


def test_golden_outputs_of_another_model_are_refused(tmp_path, capsys):
    golden = str(tmp_path / "bert.npz")
    common = ["--random", "2", "--seq-len", "8"]
    assert run_cli(["check", "tiny:bert", "--save-outputs", golden, *common], capsys)[0] == 0
    code, _, err = run_cli(["check", "tiny:distilbert", "--load-outputs", golden, *common], capsys)
    assert code == 2, err
    assert "bert" in err and "distilbert" in err and CATCH_ALL not in err


def test_sweep_interrupted_exits_1_and_keeps_its_items(tmp_path, capsys, monkeypatch):
    """The help says exit 1 when the run stopped early; Ctrl-C used to give 2."""
    from tfparity.sweep import runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_sweep", interrupted)
    monkeypatch.setattr("tfparity.sweep.run_sweep", interrupted)
    code, _, err = run_cli(["sweep", "tiny:bert", "--out", str(tmp_path / "s")], capsys)
    assert code == 1 and "--resume" in err


def test_skipped_items_are_not_listed_as_failed():
    from tfparity.report.sweep import render_summary

    skipped = {"index": 3, "id": "3", "text": "long", "passed": None, "max_abs_diff": {}}
    failed = {"index": 4, "id": "4", "text": "bad", "passed": False, "max_abs_diff": {"e": 1.0}}
    summary = {
        "model": "m",
        "corpus": {"path": "c", "items": 2},
        "items": 2,
        "passed": 0,
        "failed": 1,
        "skipped": 1,
        "complete": True,
        "per_check": {},
        "run": {},
        "worst_items": [failed, skipped],
    }
    text = render_summary(summary, "out")
    listed = text.split("failed items (worst first):")[1].split("note:")[0]
    assert "#4" in listed and "#3" not in listed


def test_merge_of_valid_shards_still_works(files, tmp_path, capsys):
    code, out, err = run_cli(
        ["merge", files["sw_s0"].replace("sw_s0", "sw_ok"), "--out", str(tmp_path / "m")], capsys
    )
    assert code in (0, 1) and "error" not in err, err
