"""The example outputs on the pages are what the code prints today.

scripts/doc_examples.py knows every example block (between ``<!-- example: NAME -->``
comments) and makes it from a real run; here the cheap ones are re-run (the tiny models;
minilm's are marked slow) and held to the page by ``differences``: numbers masked (the
CPU's kernels move them), everything else exact. Its own rule is tested first.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("doc_examples", ROOT / "scripts" / "doc_examples.py")
doc_examples = importlib.util.module_from_spec(_spec)
sys.modules["doc_examples"] = doc_examples  # its dataclasses look their module up
_spec.loader.exec_module(doc_examples)

PAGE = """\
tfparity crosscheck · port_bias
  judge: float64 referee (factor 3, floor 1e-07 x RMS)
  seconds: 4.13

hidden       layer  max abs diff    cosine  accumulated  verdict
     0  embeddings      9.54e-07  1.000000           ok       ok
     4           3         0.248  0.999291     DIVERGES     FAIL

tensor             max abs diff   mismatched  verdict
last_hidden_state         0.152  27411/27648     FAIL
pooler_output           0.00587    1912/1920     FAIL

first divergence: hidden_states[4] · layer 3 · component attention
hint: weight encoder.layer.3.attention.self.value.bias is all zeros (rmse 9.6e-08)

FAIL crosscheck: 5 of 9 tensors differ; max abs diff 0.248 (hidden_states[4])"""


def _edit(old: str, new: str) -> str:
    assert PAGE.count(old) == 1, old
    return PAGE.replace(old, new)


def test_a_rerun_with_other_digits_is_not_stale():
    rerun = (
        PAGE.replace("4.13", "12.5")
        .replace("9.54e-07", "1.19e-06")
        .replace("0.248", "0.2481")
        .replace("27411/27648", "27402/27648")
        .replace("9.6e-08", "1.1e-07")
        # a failing table lists the worst first: close rows may trade places
        .replace(
            "last_hidden_state         0.152  27411/27648     FAIL\n"
            "pooler_output           0.00587    1912/1920     FAIL",
            "pooler_output             0.2      1912/1920     FAIL\n"
            "last_hidden_state         0.152  27411/27648     FAIL",
        )
    )
    assert rerun != PAGE
    assert doc_examples.differences(PAGE, rerun) == []
    passed = "PASS crosscheck: 9 tensors compared; max abs diff 3.58e-06 (hidden_states[6])"
    noise = "PASS crosscheck: 9 tensors compared; max abs diff 4.1e-06 (hidden_states[4])"
    assert doc_examples.differences(passed, noise) == []
    # a FAIL of a label map or tokenizer where every tensor passed: its worst is noise too
    artefact = "FAIL crosscheck: the tokenizers differ on 5 of 5 texts; 0 of 4 tensors differ"
    worst = f"{artefact}; max abs diff 9.54e-07 (hidden_states[1])"
    other = f"{artefact}; max abs diff 1.19e-06 (hidden_states[0])"
    assert doc_examples.differences(worst, other) == []
    assert doc_examples.differences(worst, worst.replace("0 of 4", "1 of 4")) != []
    cache = "FAIL generate: prompt 0: cache: cached step 1 differs: RMSE 0.18 over {} allowed"
    assert doc_examples.differences(cache.format("3.3e-07"), cache.format("2.76e-07")) == []
    assert doc_examples.differences(cache, cache.replace("step 1", "step 2")) != []
    # a bootstrap interval's ends are measured values too (KL noise near 1e-15)
    kl = "budget PASS: kl_mean<=0.01 PASS (8.8e-16, 95% CI [{}, 4.44e-15]); same_top1 CI [1, 1]"
    assert doc_examples.differences(kl.format("3.01e-16"), kl.format("8.58e-17")) == []
    assert doc_examples.differences(kl, kl.replace("[1, 1]", "[0, 1]")) != []


@pytest.mark.parametrize(
    "old, new",
    [
        ("FAIL crosscheck: 5 of 9", "PASS crosscheck: 9"),  # the verdict
        ("5 of 9 tensors", "4 of 9 tensors"),  # the count of tensors
        ("(hidden_states[4])", "(hidden_states[5])"),  # a FAIL's worst tensor
        ("hidden_states[4] · layer 3 · component attention", "hidden_states[5] · layer 4"),
        ("component attention", "component output"),
        ("is all zeros", "is transposed"),  # the hint's words
        ("value.bias", "query.bias"),
        ("DIVERGES     FAIL", "      ok       ok"),  # a row's verdict
        ("pooler_output  ", "logits         "),  # a row's name
        ("  cosine", "  cos"),  # a header
        ("  seconds: 4.13\n", ""),  # a missing line
        ("FAIL\n\nfirst", "FAIL\nlabel agreement (logits): 5/5\n\nfirst"),  # an added line
        ("\nhint:", "\n\nhint:"),  # the parts split otherwise
    ],
)
def test_a_changed_word_verdict_divergence_or_line_is_stale(old, new):
    assert doc_examples.differences(PAGE, _edit(old, new)) != []


def test_every_example_has_one_block_on_its_page_and_every_block_an_example():
    on_pages = {}
    for page, text in doc_examples.pages().items():
        for name in doc_examples.blocks(text):
            assert name not in on_pages, f"{name} is on {page} and {on_pages[name]}"
            on_pages[name] = page
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        page = path.relative_to(ROOT).as_posix()
        found = doc_examples.blocks(text)
        assert set(found) <= {n for n, p in on_pages.items() if p == page}, page
    assert on_pages == {e.name: e.page for e in doc_examples.EXAMPLES}
    untested = [e for e in doc_examples.EXAMPLES if not e.tested]
    assert all(e.why_untested for e in untested)


TESTED = [
    pytest.param(e, id=e.name, marks=[pytest.mark.slow] if e.minilm else [])
    for e in doc_examples.EXAMPLES
    if e.tested
]


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return doc_examples.Runner(tmp_path_factory.mktemp("doc-examples"))


@pytest.mark.parametrize("example", TESTED)
def test_the_page_shows_what_the_example_prints_today(example, runner):
    if example.needs_cpu_only:
        import tensorflow as tf

        if tf.config.list_physical_devices("GPU"):
            pytest.skip("the page shows a machine without a GPU")
    page = doc_examples.blocks((ROOT / example.page).read_text())[example.name]
    found = doc_examples.differences(page, runner.output(example))
    assert found == [], f"{example.name} is stale: run python scripts/doc_examples.py"
