"""Tests for the ``tfparity`` command (tfparity/cli.py).

Most run in-process through ``cli.main`` (what ``python -m tfparity`` calls), with
stdout and stderr captured: a real process costs a TensorFlow start-up (5-7 s here).
A few stay real processes because the process is what they test: ``--help`` without
importing the frameworks, exit 0 with TensorFlow's start-up noise silenced
(``check tiny:bert --json``), and exit 2 with one paragraph on stderr after TensorFlow
was imported (a too-long text).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import tfparity
from tfparity import cli

LONG_TEXT = "the quick brown fox jumps over the lazy dog " * 12  # > 64 tiny tokens
COMPARISON_FIELDS = {
    "name",
    "max_abs_diff",
    "max_rel_diff",
    "mismatched",
    "total",
    "atol",
    "rtol",
    "passed",
}


def tfparity_cli(*args: str, cwd: Path, python_flags: tuple[str, ...] = ()):
    return subprocess.run(
        [sys.executable, *python_flags, "-m", "tfparity", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture
def tfparity_in_process(tmp_path, monkeypatch, capsys):
    """``tfparity_in_process(*args)``: ``cli.main(args)`` in this process, in ``tmp_path``,
    with the result shaped as ``subprocess.run``'s (returncode, stdout, stderr); no TF
    start-up per call. ``--debug`` sets TFPARITY_DEBUG, which is undone afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TFPARITY_DEBUG", "0")

    def run(*args: str) -> SimpleNamespace:
        code = cli.main(list(args))
        captured = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=captured.out, stderr=captured.err)

    return run


def assert_usage_error(result, *fragments: str) -> str:
    """Exit 2, one paragraph on stderr starting 'tfparity: error:', no traceback."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    err = result.stderr.strip()
    assert err.startswith("tfparity: error:"), err
    assert "\n\n" not in err
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in err, err
    return err


# ---------------------------------------------------------------- help (no TF)


def test_help_exits_0_and_lists_check(tmp_path):
    result = tfparity_cli("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: tfparity")
    assert "check" in result.stdout
    assert "Exit codes: 0" in result.stdout
    assert result.stderr == ""


def test_check_help_lists_options_without_importing_frameworks(tmp_path):
    result = tfparity_cli("check", "--help", cwd=tmp_path, python_flags=("-X", "importtime"))
    assert result.returncode == 0, result.stderr
    for option in (
        "--text",
        "--texts",
        "--random",
        "--seq-len",
        "--batch-size",
        "--seed",
        "--padding-side",
        "--truncate",
        "--json",
        "--allow-pickle",
    ):
        assert re.search(rf"(^|[\s\[,]){re.escape(option)}\b", result.stdout), option
    # -X importtime writes one line per imported module to stderr.
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "tfparity.cli" in imported  # the trace is there
    for heavy in ("tensorflow", "torch", "transformers", "tf_keras"):
        assert heavy not in imported, f"--help imported {heavy}"


def test_model_help_lists_every_tiny_type_and_the_head_spelling():
    """MODEL's help takes the tiny types and heads from the registry: every one is
    named, whole (no name broken at a hyphen), in each command that takes a MODEL."""
    import argparse

    from tfparity.architectures import tiny_types, torch_only_tiny_types
    from tfparity.architectures.heads import UNSUPPORTED, Head

    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    heads = [h.value for h in Head if h is not Head.BASE and h not in UNSUPPORTED]
    assert len(tiny_types()) >= 32 and "deberta-v2" in tiny_types()
    for name in ("check", "crosscheck", "embeddings", "positions"):
        text = sub.choices[name].format_help()
        words = set(re.findall(r"[\w.:<>/-]+", text))
        missing = [t for t in (*tiny_types(), *torch_only_tiny_types(), *heads) if t not in words]
        assert missing == [], f"`tfparity {name} --help` lacks {missing}"
        assert "tiny:<model_type>/<head>" in words and "keras-hub:tiny:<model_type>" in words


def test_build_parser_does_not_import_tensorflow():
    code = (
        "import sys, tfparity.cli; tfparity.cli.build_parser(); "
        "assert 'tensorflow' not in sys.modules, 'tensorflow'; "
        "assert 'torch' not in sys.modules, 'torch'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_no_command_prints_help_and_exits_2(tmp_path):
    result = tfparity_cli(cwd=tmp_path)
    assert result.returncode == 2
    assert "usage: tfparity" in result.stdout


# ---------------------------------------------------------------- bad specs (in-process)


def test_missing_model_exits_2(tfparity_in_process):
    err = assert_usage_error(tfparity_in_process("check", "does-not-exist"))
    assert "does-not-exist" in err
    assert "local Hugging Face cache" in err


def test_bad_spec_forms_exit_2(tfparity_in_process):
    run = tfparity_in_process
    assert_usage_error(run("check", "tiny:nope"), "tiny:nope", "tiny:bert")
    assert_usage_error(run("check", "./nope"), "./nope", "no such directory")


def test_debug_shows_traceback_and_keeps_exit_code_2(tfparity_in_process):
    result = tfparity_in_process("--debug", "check", "./nope")
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert "TfparityError" in result.stderr
    assert "./nope" in result.stderr


# ---------------------------------------------------------------- real runs (TF)


def test_check_tiny_bert_passes_with_json(tmp_path):
    report_path = tmp_path / "report.json"
    result = tfparity_cli("check", "tiny:bert", "--no-pt", "--json", str(report_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("tfparity embeds · tiny:bert")
    assert re.search(r"^PASS embeds: 5 tensors compared", out, re.M), out
    assert "FAIL" not in out
    assert re.search(
        r"^tensor\s+max abs diff\s+mean abs diff\s+mismatched\s+cosine\s+verdict$", out, re.M
    ), out
    for name in ("hidden_states[0]", "hidden_states[2]", "last_hidden_state", "pooler_output"):
        assert re.search(rf"^{re.escape(name)}\s+0\s+0\s+0/\d+\s+1\.000000\s+ok$", out, re.M), name
    assert "sequences: 5" in out  # the five built-in sentences
    assert result.stderr == ""  # TensorFlow's start-up noise is silenced

    report = json.loads(report_path.read_text())
    assert report["tfparity_version"] == tfparity.__version__
    assert report["check"] == "embeds"
    assert report["model"] == "tiny:bert"
    assert report["passed"] is True
    assert report["first_divergence"] is None
    names = [c["name"] for c in report["comparisons"]]
    assert names == [
        "hidden_states[0]",
        "hidden_states[1]",
        "hidden_states[2]",
        "last_hidden_state",
        "pooler_output",
    ]
    for c in report["comparisons"]:
        assert COMPARISON_FIELDS <= c.keys(), c.keys()
        assert c["passed"] is True
        assert c["max_abs_diff"] == 0.0 and c["max_rel_diff"] == 0.0
        assert c["mismatched"] == 0
        assert c["total"] > 0
        assert (c["atol"], c["rtol"]) == (1e-05, 1.3e-06)  # float32 defaults
    by_name = {c["name"]: c for c in report["comparisons"]}
    assert by_name["last_hidden_state"]["total"] % 32 == 0  # hidden size 32
    assert by_name["pooler_output"]["total"] == 5 * 32


def test_check_runs_the_crosscheck_too_when_torch_is_installed(tmp_path, tfparity_in_process):
    report_path = tmp_path / "report.json"
    result = tfparity_in_process("check", "tiny:bert", "--random", "4", "--json", str(report_path))
    assert result.returncode == 0, result.stderr
    assert re.search(r"^PASS embeds: 5 tensors compared", result.stdout, re.M)
    assert re.search(r"^PASS crosscheck: 5 tensors compared", result.stdout, re.M)
    assert "TF rmse/fp64" in result.stdout  # the per-layer table
    report = json.loads(report_path.read_text())
    assert report["check"] == "embeds+crosscheck" and report["passed"] is True
    assert [r["check"] for r in report["reports"]] == ["embeds", "crosscheck"]
    assert all(c["judge"] == "referee" for c in report["reports"][1]["comparisons"])


def test_roberta_left_padding_fails_with_position_hint(tmp_path, tfparity_in_process):
    report_path = tmp_path / "report.json"
    result = tfparity_in_process(
        "check", "tiny:roberta", "--no-pt", "--padding-side", "left", "--json", str(report_path)
    )
    assert result.returncode == 1, (result.stdout, result.stderr)
    out = result.stdout
    assert re.search(r"^FAIL embeds: \d+ of \d+ tensors differ", out, re.M), out
    assert "PASS" not in out
    assert "padding_side: left" in out
    hint = next(line for line in out.splitlines() if line.startswith("hint:"))
    assert "position ids" in hint and "left padding" in hint
    assert "first divergence: hidden_states[0]" in out
    assert "Traceback" not in result.stderr

    report = json.loads(report_path.read_text())
    assert report["passed"] is False
    assert report["model"] == "tiny:roberta"
    assert report["first_divergence"]["hidden_state"] == 0
    assert report["first_divergence"]["layer"] == "embeddings"
    assert report["first_divergence"]["component"] == "embeddings"
    assert "position ids" in report["first_divergence"]["hint"]
    failing = {c["name"] for c in report["comparisons"] if not c["passed"]}
    assert "hidden_states[0]" in failing and "last_hidden_state" in failing


def test_too_long_text_exits_2(tfparity_in_process):
    result = tfparity_in_process("check", "tiny:bert", "--text", "hello", "--text", LONG_TEXT)
    err = assert_usage_error(result, "Text 2 is", "--truncate", "64")
    assert result.stdout == ""
    assert len(err.splitlines()) == 1


# ---------------------------------------------------------------- input errors (in-process)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--text", ""], ["Text 1 is empty"]),
        (["--text", "ok", "--text", "  "], ["Text 2 is empty"]),
        (["--text", "x", "--random", "3"], ["--random", "not both"]),
        (["--texts", "missing.txt"], ["Cannot read the texts file missing.txt"]),
        (["--random", "2", "--seq-len", "65"], ["--seq-len 65", "64 positions"]),
    ],
    ids=["empty-text", "blank-second-text", "text-and-random", "missing-texts", "seq-len"],
)
def test_input_errors_exit_2(args, fragments, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = cli.main(["check", "tiny:bert", *args])
    captured = capsys.readouterr()
    assert code == 2
    err = captured.err.strip()
    assert err.startswith("tfparity: error:")
    assert len(err.splitlines()) == 1
    for fragment in fragments:
        assert fragment in err, err
    assert "PASS" not in captured.out and "FAIL" not in captured.out


def test_texts_file_and_random_run_in_process(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "texts.txt").write_text("hello world\n\nwhy?\n")
    assert cli.main(["check", "tiny:bert", "--texts", "texts.txt"]) == 0
    out = capsys.readouterr().out
    assert "sequences: 2" in out and re.search(r"^PASS embeds:", out, re.M)
    code = cli.main(["check", "tiny:bert", "--random", "3", "--seq-len", "8", "--batch-size", "2"])
    out = capsys.readouterr().out
    assert code == 0
    assert "batches: 2" in out and "sequences: 3" in out


def test_too_long_text_with_truncate_passes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["check", "tiny:bert", "--text", "hello", "--text", LONG_TEXT, "--truncate"]
    code = cli.main([*args, "--json", "r.json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = captured.out
    assert "sequences: 2" in out
    # the report says what was cut: which text, from how many tokens
    note = re.compile(
        r"^note: --truncate cut 1 of 2 texts to 64 tokens \(the model's 64 positions\): "
        r"text 2 \((\d+) tokens\)\.$",
        re.M,
    )
    assert len(note.findall(out)) == 2  # the embeds and the cross-check reports
    full = int(note.search(out).group(1))
    assert full > 64
    for report in json.loads((tmp_path / "r.json").read_text())["reports"]:
        assert report["details"]["truncated"] == [{"text": 2, "tokens": full, "kept": 64}]
    assert re.search(r"^PASS embeds:", out, re.M)
    # The long text is cut to the model's 64 positions; "hello" adds a few tokens.
    tokens = int(re.search(r"^  tokens: (\d+)$", out, re.M).group(1))
    assert 64 + 3 <= tokens <= 64 + 6
    row = re.search(r"^last_hidden_state\s+\S+\s+\S+\s+0/(\d+)\s", out, re.M)
    assert row and int(row.group(1)) == tokens * 32  # compared over real tokens only


def test_check_without_torch_says_the_crosscheck_did_not_run(monkeypatch, capsys):
    import tfparity.adapters.runtime.imports as runtime

    monkeypatch.setattr(runtime, "torch_available", lambda: False)
    assert cli.main(["check", "tiny:bert", "--random", "2"]) == 0
    out = capsys.readouterr().out
    assert "PASS embeds" in out
    assert "PyTorch is not installed, so the cross-check did not run" in out
    assert "crosscheck ·" not in out


# ---------------------------------------------------------------- execution choice


def test_check_chooses_graph_from_eight_batches_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["check", "tiny:bert", "--random", "8", "--seq-len", "8", "--batch-size", "1"]
    assert cli.main([*args, "--json", "r.json"]) == 0
    reports = json.loads((tmp_path / "r.json").read_text())["reports"]
    assert [r["details"]["execution"] for r in reports] == ["graph", "graph"]
    assert all("auto" in r["details"]["execution_chosen"] for r in reports)
    assert cli.main([*args, "--eager", "--json", "e.json"]) == 0
    reports = json.loads((tmp_path / "e.json").read_text())["reports"]
    assert [r["details"]["execution"] for r in reports] == ["eager", "eager"]
    assert not any("execution_chosen" in r["details"] for r in reports)
    capsys.readouterr()


def test_eager_graph_and_xla_are_exclusive(tmp_path):
    result = tfparity_cli("check", "tiny:bert", "--eager", "--xla", cwd=tmp_path)
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr


def test_crosscheck_in_bf16_passes_and_golden_outputs_refuse_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["crosscheck", "tiny:bert", "--random", "3", "--seq-len", "8", "--no-reload"]
    assert cli.main([*args, "--precision", "bf16", "--json", "r.json"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())  # one report: at the top level
    assert report["details"]["precision"] == "bf16" and report["passed"]
    capsys.readouterr()
    code = cli.main([*args, "--precision", "fp16", "--save-outputs", "g.npz"])
    err = capsys.readouterr().err
    assert code == 2 and "--precision fp32" in err and not (tmp_path / "g.npz").exists()
    code = cli.main(["check", "tiny:bert", "--precision", "bf16", "--load-outputs", "g.npz"])
    captured = capsys.readouterr()
    assert code == 2 and "--precision fp32" in captured.err
    assert "PASS" not in captured.out  # refused before any check ran


def test_a_command_freezes_the_frameworks_objects_and_the_library_does_not(
    tfparity_in_process, monkeypatch
):
    """The CLI freezes what TF/transformers built on import (full collections then skip
    it); the Python API never freezes its caller's objects. Counted as calls of
    gc.freeze (which still runs), so earlier commands in this process do not matter."""
    import gc

    from tfparity import api

    calls = []
    freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: (calls.append("freeze"), freeze())[1])
    api.check_embeds("tiny:bert", inputs=api.InputOptions(random=1, seq_len=4))
    assert calls == []  # the library froze nothing
    result = tfparity_in_process("check", "tiny:bert", "--random", "1", "--seq-len", "4", "--no-pt")
    assert result.returncode == 0, result.stderr
    assert calls == ["freeze"]  # the command froze what was alive, once


def subparsers() -> dict:
    """Every subcommand's parser, as `tfparity --help` lists them (argparse's own table)."""
    import argparse

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_command_names_its_model_as_the_one_table_says():
    """Each command is in the table (a model command or one that loads none), and its
    parser shows exactly the model-naming options the table says it takes, each with
    the table's one help text; the others are parsed hidden, to be refused."""
    from tfparity.commands.naming import ARGUMENTS, NAMING, NO_MODEL, OPTIONS, dest

    parsers = subparsers()
    assert set(parsers) == set(NAMING) | set(NO_MODEL) and not set(NAMING) & set(NO_MODEL)
    assert {"generate", "gradients", "crosscheck", "sweep"} <= {
        c for c, n in NAMING.items() if {"--tf", "--pt"} <= set(n.takes)
    }
    for command, parser in parsers.items():
        actions = {a.dest: a for a in parser._actions}
        if command in NO_MODEL:
            assert not {dest(o) for o in OPTIONS} & set(actions), command
            continue
        shown = {o for o in OPTIONS if actions[dest(o)].help is not argparse.SUPPRESS}
        assert shown == set(NAMING[command].takes), command
        for option in shown:
            assert actions[dest(option)].help == ARGUMENTS[option]()["help"], (command, option)
        usage = parser.format_usage()
        for option in set(OPTIONS) - shown:
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", usage) is None, option


@pytest.mark.parametrize(
    "command", ["check", "crosscheck", "generate", "gradients", "sweep", "modes", "positions"]
)
def test_the_model_named_twice_or_a_port_without_its_reference_exits_2(command, capsys):
    """The same two sentences in every command that takes --tf, before anything loads;
    commands without a reference refuse --tf by the table's reason."""
    from tfparity.commands.naming import NAMING

    assert cli.main([command, "tiny:bert", "--tf", "tiny:bert", "--pt", "tiny:bert"]) == 2
    err = capsys.readouterr().err
    if "--tf" in NAMING[command].takes:
        assert "MODEL (tiny:bert) and --tf tiny:bert both name the TF model" in err
        assert cli.main([command, "--tf", "tiny:bert"]) == 2
        err = capsys.readouterr().err
        assert "nothing names its PyTorch reference: add --pt PT_MODEL" in err
    else:
        assert f"`tfparity {command}` does not take --tf: " in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv, why",
    [
        (["embeddings", "tiny:bert", "--pt", "tiny:bert"], "no PyTorch reference"),
        (["positions", "tiny:bert", "--pt-config", "hidden_act=gelu"], "no PyTorch reference"),
        (["modes", "tiny:bert", "--signature", "x"], "not an export"),
        (["diagnose", "tiny:bert", "--head", "masked-lm", "--ids", "i", "--embeds", "e"], "tiny:<"),
        (["generate", "tiny:gpt2", "--head", "causal-lm"], "loads the LM head itself"),
        (["generate", "tiny:gpt2", "--source", "tiny:gpt2"], "an export does not have"),
        (["gradients", "tiny:bert", "--signature", "x"], "on a tape"),
        (["check", "tiny:bert", "--pt", "tiny:bert"], "tfparity crosscheck --tf TF_MODEL"),
        (["sweep", "tiny:bert", "--source", "tiny:bert", "--out", "x"], "from --pt"),
        (["backends", "m.keras", "--allow-pickle"], "no PyTorch checkpoint"),
        (["backends", "m.keras", "--source", "tiny:bert"], "needs no source"),
    ],
)
def test_an_option_a_command_does_not_take_exits_2_naming_why(argv, why, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    option = next(a for a in argv if a.startswith("--"))
    assert f"`tfparity {argv[0]}` does not take {option}: " in err and why in err, err


def test_a_naming_must_decide_every_option():
    from tfparity.commands.naming import Naming

    with pytest.raises(ValueError, match="decide each"):
        Naming(takes=("MODEL", "--tf"))


def test_the_docs_table_of_model_naming_is_the_code_table():
    """docs/check.md's table says, per command, what NAMING takes (--allow-pickle goes
    with MODEL wherever the row does not refuse it): a changed table fails until the
    page says so too."""
    from tfparity.commands.naming import NAMING, OPTIONS

    page = (Path(tfparity.__file__).parents[1] / "docs" / "check.md").read_text()
    section = page.split("## Naming the model in every command", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:4] for line in section.splitlines() if line.startswith("| `")]
    documented = {}
    for commands, takes, refuses in rows:
        pickle = set() if "`--allow-pickle`" in refuses else {"--allow-pickle"}
        named = set(re.findall(r"--[a-z-]+|MODEL", takes)) | pickle
        for command in re.findall(r"`([a-z]+)`", commands):
            documented[command] = set(OPTIONS) if takes.strip() == "all" else named
    assert documented == {c: set(n.takes) for c, n in NAMING.items()}


def test_every_command_that_quantises_offers_the_one_list_of_modes():
    """``--quantize`` takes :data:`tfparity.compare.quantisation.MODES` on every command,
    the list the adapter that quantises checks against (one tuple to extend)."""
    from tfparity.adapters.tf_common.quantize import check_mode
    from tfparity.compare.quantisation import MODES

    offering = {}
    for name, parser in subparsers().items():
        for action in parser._actions:
            if "--quantize" in action.option_strings:
                offering[name] = tuple(action.choices)
    assert set(offering) >= {"crosscheck", "generate", "backends"}
    assert all(choices == MODES for choices in offering.values()), offering
    assert [check_mode(m) for m in MODES] == list(MODES)
    with pytest.raises(tfparity.TfparityError, match="Unknown quantisation mode 'int3'"):
        check_mode("int3")
