"""Every command on every kind of model (scripts/command_matrix.py's pairs): each ends
in a verdict (exit 0 or 1) or in exit 2 with tfparity's message naming why, never a
traceback, the catch-all "please report it" or a KeyError; and docs/command-matrix.md's
table holds what each pair does today (regenerate it with the script when it changes).

One test per kind, its artefact built once (the SavedModel is the session's
``tiny_bert_export("clean")``); every pair runs in this process on one sequence of four
tokens. ``backends`` is left out: tests/cross_backend/ runs it on its warm processes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("keras_hub")

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "command_matrix", ROOT / "scripts" / "command_matrix.py"
)
matrix = importlib.util.module_from_spec(_spec)
sys.modules["command_matrix"] = matrix  # its dataclasses look their module up
_spec.loader.exec_module(matrix)

KINDS = (*(k.name for k in matrix.SPECS), *matrix.FILE_KINDS)


@pytest.fixture(scope="module")
def built(tmp_path_factory, tiny_bert_export):
    root = tmp_path_factory.mktemp("command-matrix")
    inputs = matrix.write_inputs(root / "inputs")
    kinds = (*matrix.SPECS, *matrix.file_kinds(root, lambda _: tiny_bert_export("clean")))
    return {k.name: k for k in kinds}, inputs, root


def test_the_page_names_every_pair_and_every_kind_is_run():
    page = matrix.read_table()
    columns = [c.name for c in matrix.commands(Path("."))]
    assert set(page) == {(k, c) for k in KINDS for c in columns}
    assert not any(cell.startswith("CRASH") for cell in page.values())


def test_a_crash_is_told_from_a_refusal():
    """The rule the matrix judges by, both ways: a message from tfparity is a refusal;
    an exception escaping main, or the catch-all, is a crash."""
    assert matrix.Outcome(2, "x").cell() == "exit 2: x"
    assert matrix.Outcome(2, "KeyError: 'a'", crashed=True).cell().startswith("CRASH")
    err = "tfparity: error: KeyError: 'x' (run with --debug for the traceback; please report it)"
    assert matrix.CATCH_ALL in err


@pytest.mark.parametrize("kind", KINDS)
def test_every_command_ends_in_a_verdict_or_a_reason(kind, built):
    kinds, inputs, root = built
    page = matrix.read_table()
    found, printed = {}, {}
    for i, command in enumerate(matrix.commands(inputs)):
        outcome, text = matrix.run_pair(command, kinds[kind], inputs, root / f"{kind}-{i}")
        found[command.name] = outcome.cell()
        printed[command.name] = text
        assert not outcome.crashed, text[-3000:]
        assert "Traceback" not in text and "KeyError" not in text, text[-3000:]
        if outcome.code == 2:
            assert outcome.reason, text[-3000:]
    expected = {c: cell for (k, c), cell in page.items() if k == kind}
    stale = {c: (expected.get(c), cell) for c, cell in found.items() if expected.get(c) != cell}
    assert not stale, (
        f"docs/command-matrix.md is stale for {kind} (page, now): {stale}; rerun "
        f"`python scripts/command_matrix.py --kinds {kind}`"
    )
