"""The stored reports of tests/report/data/ are what scripts/report_samples.py makes: one
sample (or two, to have both verdicts) of every command that writes a report, each its
command's own JSON and printed text, read back whole; a fresh run of the cheapest still
writes the fields its sample holds (a renamed or added field makes the samples stale:
rerun the script)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tfparity.cli import COMMANDS
from tfparity.report.jsonio import reports_from_dict, reports_to_dict

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "report" / "data"
_spec = importlib.util.spec_from_file_location(
    "report_samples", ROOT / "scripts" / "report_samples.py"
)
report_samples = importlib.util.module_from_spec(_spec)
sys.modules["report_samples"] = report_samples  # its dataclasses look their module up
_spec.loader.exec_module(report_samples)
SAMPLES = report_samples.SAMPLES
# the cheapest sample (tiny:bert's embedding facts, about a second): re-run here
FRESH = "embeddings"


def test_every_command_that_writes_a_report_has_a_sample():
    sampled = {s.command for s in SAMPLES}
    assert sampled | set(report_samples.NO_REPORT) == set(COMMANDS)
    assert not sampled & set(report_samples.NO_REPORT)
    backends = [s for s in SAMPLES if s.command == "backends"]
    assert {"--quantize" in s.argv for s in backends} == {True, False}  # float and quantised


def test_the_stored_files_are_the_samples():
    names = {s.name for s in SAMPLES}
    assert {p.stem for p in DATA.glob("*.json")} == names
    assert {p.stem for p in DATA.glob("*.txt")} == names
    assert {p.name for p in DATA.iterdir()} == {f"{n}.{e}" for n in names for e in ("json", "txt")}


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.name)
def test_a_sample_s_verdict_is_its_exit_code_and_reads_back_whole(sample_json, sample):
    """The JSON says PASS where the command exited 0; a report read back from it writes
    the same JSON again (nothing the renderers read is lost on the way)."""
    data = sample_json[sample.name]
    if sample.command == "sweep":
        assert (data["failed"] == 0) is (sample.exit == 0) and data["complete"]
        return
    assert data["passed"] is (sample.exit == 0)
    again = reports_to_dict(reports_from_dict(data))
    assert again == {k: v for k, v in data.items() if k in again}
    assert set(data) - set(again) <= set(data.get("details", {}))  # a contract's top level


def _fields(value, path: str = "") -> set[str]:
    """Every key path of a JSON value (a list's items merged), not the values."""
    if isinstance(value, dict):
        found = {f"{path}.{k}" for k in value}
        for k, v in value.items():
            found |= _fields(v, f"{path}.{k}")
        return found
    if isinstance(value, list):
        return set().union(*(_fields(v, f"{path}[]") for v in value))
    return set()


def test_a_fresh_run_writes_the_fields_its_sample_holds(tmp_path, sample_json, sample_printed):
    data, printed = report_samples.run(report_samples.BY_NAME[FRESH], tmp_path, set())
    fresh = json.loads(data)
    stored = sample_json[FRESH]
    assert _fields(fresh) == _fields(stored), "stale: run python scripts/report_samples.py"
    assert fresh["passed"] == stored["passed"]
    assert printed.splitlines()[0] == sample_printed[FRESH].splitlines()[0]
