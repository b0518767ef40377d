"""The stored reports of tests/report/data/: small real runs of every command that
writes one, made by scripts/report_samples.py (tests/report/test_report_samples.py keeps
them fresh). Reading them back costs no model run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfparity.report.jsonio import reports_from_dict
from tfparity.results import Report

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def sample_json() -> dict[str, dict]:
    """Sample name -> its JSON as its command wrote it (a sweep's: its summary.json)."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))}


@pytest.fixture(scope="session")
def sample_printed() -> dict[str, str]:
    """Sample name -> what its command printed."""
    return {p.stem: p.read_text() for p in sorted(DATA.glob("*.txt"))}


@pytest.fixture(scope="session")
def sample_reports(sample_json) -> dict[str, list[Report]]:
    """Sample name -> the reports its JSON holds (a sweep's summary is not a report)."""
    return {name: reports_from_dict(data) for name, data in sample_json.items() if name != "sweep"}
