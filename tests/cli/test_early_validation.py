"""What the arguments alone decide exits 2 before TensorFlow or torch is imported.

A newcomer's typo (``check --text ""``, ``check tiny:bret``) used to cost a 6-23 s
framework start-up before the one-line refusal. The cases run in one fresh process
(this test process may hold TensorFlow already), each through ``cli.main`` as
``python -m tfparity`` calls it; the process then reports which frameworks it imported.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

# (argv, the refusal's words); each must exit 2 with only numpy imported.
REFUSED = [
    (["check", "--text", ""], "Text 1 is empty"),
    (["check", "tiny:bert", "--text", "hi", "--text", "  "], "Text 2 is empty"),
    (["check", "tiny:bret"], "Unknown tiny architecture 'bret'"),
    (["check", "tiny:bert/masked-llm"], "Unknown head 'masked-llm'"),
    (["positions", "tiny:bert", "--batch-size", "0"], "--batch-size must be at least 1"),
    (["crosscheck", "--tf", "tiny:bert", "--pt", "tiny:brt"], "Unknown tiny architecture 'brt'"),
    (["sweep", "tiny:bret", "--texts", "corpus.txt"], "Unknown tiny architecture 'bret'"),
    (["embeddings", "./no-such-dir"], "no such directory"),
    # an export given to a command that can name neither its source nor its reference
    (["positions", "model.keras"], "(`tfparity check model.keras --source MODEL`"),
    (["modes", "model.tflite"], "model.tflite is a LiteRT (.tflite) flatbuffer, an export"),
]
# The same commands with good arguments get past every early check: the command itself
# is replaced by one that returns 0, so nothing loads.
ACCEPTED = [
    ["check", "tiny:bert", "--text", "hi"],
    ["check", "tiny:bert/masked-lm", "--random", "2"],
    ["crosscheck", "--tf", "tiny:bert", "--pt", "tiny:bert"],
]

SCRIPT = """
import contextlib, io, json, sys, time
import tfparity.commands.check as check, tfparity.commands.crosscheck as crosscheck
from tfparity import cli

cases = json.loads(sys.argv[1])
results = []
for argv in cases["refused"]:
    err = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stderr(err):
        code = cli.main(argv)
    results.append([code, err.getvalue(), time.perf_counter() - start])
check._run_check = crosscheck.run = lambda args: 0
accepted = [cli.main(argv) for argv in cases["accepted"]]
loaded = [m for m in ("tensorflow", "torch", "transformers", "keras") if m in sys.modules]
print(json.dumps({"refused": results, "accepted": accepted, "loaded": loaded}))
"""


@pytest.fixture(scope="module")
def early(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("early")
    (cwd / "corpus.txt").write_text("one line\n")
    (cwd / "model.keras").write_bytes(b"PK")  # named only: refused before it is read
    (cwd / "model.tflite").write_bytes(b"")
    cases = json.dumps({"refused": [argv for argv, _ in REFUSED], "accepted": ACCEPTED})
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, cases],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_argument_errors_exit_2_before_any_framework_import(early):
    assert early["loaded"] == []
    for (argv, words), (code, stderr, seconds) in zip(REFUSED, early["refused"], strict=True):
        assert code == 2, (argv, stderr)
        assert words in stderr and "Traceback" not in stderr, (argv, stderr)
        assert len(stderr.strip().splitlines()) == 1, (argv, stderr)
        assert seconds < 1.0, (argv, seconds)  # a framework start-up takes 5 s or more


def test_good_arguments_pass_the_early_checks(early):
    assert early["accepted"] == [0] * len(ACCEPTED)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "log"])
def test_a_command_says_it_is_loading_on_a_terminal_only(terminal, monkeypatch):
    """The seconds of framework start-up and loading are announced on a terminal; a log
    (CI, a pipe) keeps stderr for the one-paragraph error."""
    from tfparity.commands.common import frameworks_frozen

    stream = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    frameworks_frozen(torch=False)
    said = stream.getvalue()
    if terminal:
        assert said == "tfparity: starting TensorFlow, then loading the model...\n"
    else:
        assert said == ""
