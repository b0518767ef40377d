#!/usr/bin/env python3
"""Which tests' verdicts rest on TF's kernels: the measurement behind tests/kernel_tests.txt.

CI runs the suite with TF's default oneDNN CPU kernels, then reruns the tests listed in
tests/kernel_tests.txt with its Eigen kernels (``TF_ENABLE_ONEDNN_OPTS=0``). A test
belongs there when a kernel change can move one of its verdicts: measured, not guessed.

1. Record every verdict's distance to its threshold, per test, under both kernel sets
   (this file is also the pytest plugin that records them)::

       PYTHONPATH=scripts MARGINS_OUT=/tmp/m-onednn pytest -p kernel_margins -n 2 tests
       PYTHONPATH=scripts MARGINS_OUT=/tmp/m-eigen TF_ENABLE_ONEDNN_OPTS=0 \\
           pytest -p kernel_margins -n 2 tests

2. Compare them and print the list (``--write`` puts it in tests/kernel_tests.txt)::

       python scripts/kernel_margins.py /tmp/m-onednn /tmp/m-eigen [--write]

A verdict's *ratio* is its error over what its judge allows: the referee's
``actual_rmse / allowed_rmse``, a tolerance's ``required_atol / atol``; 1 is the
threshold. A test is listed when, under either kernel set, one of its verdicts lies
within a factor ``NEAR`` of the threshold, or one flipped between the kernel sets, or
the two runs judged a different number of tensors.
Tests whose verdicts the plugin does not see (the sweep's row-wise referee) are listed
in ``UNSEEN`` by hand, and tests that judge only arrays they make themselves are left
out (``FRAMEWORK_FREE``), each with the reason.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

# A verdict within a factor NEAR of its threshold: the largest move the Eigen kernels
# made of a tensor's ratio (ratios from 0.2 up, 5,000 verdicts) was 1.9x, so a verdict
# nearer than 2x is one a kernel change can flip; one further away is not.
NEAR = 2.0
LIST = Path(__file__).resolve().parents[1] / "tests" / "kernel_tests.txt"

# The sweep's calibrated referee decides from calibrated float32 margins (tfparity/sweep/
# calibrated_referee.py), not through RefereeResult: where its verdicts meet full's rests on
# the rounding it calibrated on. Kept: minilm (the kernels move its ratios up to 3x),
# reduced precision, and MobileBERT (the one tiny family whose ratios moved, 1.44x).
UNSEEN = (
    "tests/sweep/test_calibrated_referee.py::test_calibrated_matches_full_on_the_repo_corpus_with_fewer_float64_rows",
    "tests/sweep/test_calibrated_referee.py::test_calibrated_matches_full_on_every_fault_of_the_catalogue[mobilebert]",
    "tests/sweep/test_calibrated_referee.py::test_calibrated_matches_full_on_clean_models_in_reduced_precision[fp16]",
    "tests/sweep/test_calibrated_referee.py::test_calibrated_matches_full_on_clean_models_in_reduced_precision[bf16]",
)

# Tests whose near verdicts judge arrays the test makes itself (numpy, Hypothesis draws):
# no TF kernel computes them, so the Eigen pass has nothing to add.
FRAMEWORK_FREE = (
    "tests/compare/test_compare.py::",
    "tests/compare/test_compare_outputs.py::",
    "tests/compare/test_compare_properties.py::",
    "tests/compare/test_referee.py::",
    "tests/compare/test_masks.py::test_property_",
    "tests/sweep/test_sweep.py::test_property_",
    "tests/test_orchestration.py::test_api_assertions_and_cli_apply_the_same_lone_atol_rule",
)

# ------------------------------------------------------------------ the pytest plugin

_seen: dict = {"id": None, "rows": []}


def _record(name: str, ratio: float, passed: bool) -> None:
    if _seen["id"] is not None and math.isfinite(ratio):
        _seen["rows"].append([name, ratio, bool(passed)])


def pytest_configure(config) -> None:
    from tfparity.compare import record, referee

    result_init = referee.RefereeResult.__init__
    comparison_init = record.Comparison.__init__

    def referee_result(self, *args, **kwargs):
        result_init(self, *args, **kwargs)
        if self.allowed_rmse > 0:
            _record(self.name, self.actual_rmse / self.allowed_rmse, self.passed)

    def comparison(self, *args, **kwargs):
        comparison_init(self, *args, **kwargs)
        if self.judge == "tolerance" and self.atol > 0 and self.total and not self.problem:
            _record(self.name, self.required_atol / self.atol, self.passed)

    referee.RefereeResult.__init__ = referee_result
    record.Comparison.__init__ = comparison


def pytest_runtest_setup(item) -> None:
    _seen["id"], _seen["rows"] = item.nodeid, []


def pytest_runtest_logfinish(nodeid, location) -> None:
    out = os.environ.get("MARGINS_OUT")
    if out and _seen["id"] == nodeid:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{out}.{worker}", "a", encoding="utf-8") as f:
            f.write(json.dumps({"id": nodeid, "rows": _seen["rows"]}) + "\n")
    _seen["id"] = None


# ------------------------------------------------------------------ the analysis


def load(prefix: str) -> dict[str, list]:
    found: dict[str, list] = {}
    base = Path(prefix)
    for path in sorted(
        [*base.parent.glob(base.name + ".gw*"), base.with_name(base.name + ".main")]
    ):
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            found[row["id"]] = row["rows"]
    return found


def why_listed(a: list, b: list) -> str | None:
    """The reason a test with verdict rows ``a`` (oneDNN) and ``b`` (Eigen) is listed."""
    near = [r for r in a + b if 1 / NEAR <= r[1] <= NEAR]
    if near:
        return f"{near[0][0]} at {near[0][1]:.2g} of its threshold"
    if len(a) != len(b):
        return f"{len(a)} verdicts under oneDNN, {len(b)} under Eigen"
    for x, y in zip(a, b, strict=True):
        if x[2] != y[2]:
            return f"{x[0]} flipped ({x[1]:.2g} -> {y[1]:.2g})"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("onednn", help="MARGINS_OUT of the oneDNN run")
    parser.add_argument("eigen", help="MARGINS_OUT of the Eigen run")
    parser.add_argument("--write", action="store_true", help=f"write {LIST.name}")
    args = parser.parse_args(argv)
    a, b = load(args.onednn), load(args.eigen)
    if not a or not b:
        print("no recordings found: run step 1 of this script's docstring", file=sys.stderr)
        return 2
    measured = [t for t in sorted(a) if not t.startswith(FRAMEWORK_FREE)]
    listed = {t: why for t in measured if (why := why_listed(a[t], b.get(t, [])))}
    listed.update({t: "the sweep's calibrated referee (UNSEEN)" for t in UNSEEN})
    for test, why in sorted(listed.items()):
        print(f"{test}  # {why}")
    print(f"{len(listed)} of {len(a)} tests listed", file=sys.stderr)
    if args.write:
        head = (
            "# Rerun by CI under TF's Eigen kernels (TF_ENABLE_ONEDNN_OPTS=0): the tests whose\n"
            "# verdicts a kernel change can move, as measured by scripts/kernel_margins.py\n"
            "# (how to remake this list: its docstring). One pytest node id per line, then why.\n"
        )
        lines = "".join(f"{t}  # {why}\n" for t, why in sorted(listed.items()))
        LIST.write_text(head + lines, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
