"""Excerpts: the ``keep`` functions of scripts/doc_examples.py that cut the part of an
output a page shows."""

from __future__ import annotations


def diagnosis_lines(text: str) -> str:
    """From the verdict to the fix and the verdict line: what the diagnosis found."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("verdict: "))
    end = next(i for i, line in enumerate(lines) if line.startswith("outputs ("))
    fix = next(i for i, line in enumerate(lines) if line.startswith("fix: "))
    return "\n".join([*lines[:3], "...", *lines[start : end + 1], "", *lines[fix:]]) + "\n"


def distribution_and_verdict(text: str) -> str:
    """The judge and worst-layers lines, the distribution lines and the verdict."""
    keep = ("  judge:", "  worst_layers:", "logits ", "distribution", "top-1 agreement")
    keep += ("first divergence:", "FAIL ", "PASS ")
    return "\n".join(line for line in text.splitlines() if line.startswith(keep)) + "\n"


def export_verdicts(text: str) -> str:
    """The verdict of each of the three comparisons, and what they say together."""
    keep = ("PASS ", "FAIL ", "export parity:")
    return "\n".join(line for line in text.splitlines() if line.startswith(keep)) + "\n"


def verdicts_and_divergences(text: str) -> str:
    """The verdicts of an export's three comparisons and where each failing one parts."""
    keep = ("PASS ", "FAIL ", "export parity:", "first divergence:")
    return "\n".join(line for line in text.splitlines() if line.startswith(keep)) + "\n"


def tokenizer_lines(text: str) -> str:
    """The header lines naming the tokenizers, the failure and the verdict."""
    keep = ("  tokenizer:", "  reference_tokenizer:", "tokenizer:input_ids:", "FAIL ")
    return "\n".join(line for line in text.splitlines() if line.startswith(keep)) + "\n"


def verdict_and_mask_notes(text: str) -> str:
    """The verdict line and the notes on the signature's missing attention mask."""
    lines = text.splitlines()
    keep = [line for line in lines if line.startswith(("PASS ", "FAIL "))]
    return "\n".join(keep + [line for line in lines if "attention mask" in line]) + "\n"


def quantisation_section(out: str) -> str:
    """The quantisation section and the verdict line of a ``--quantize`` run."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("quantisation: "))
    end = next(i for i, line in enumerate(lines) if line.startswith("note: ") and i > start)
    verdict = next(line for line in lines if line.startswith(("PASS ", "FAIL ")))
    return "\n".join([*lines[start:end], "", verdict])


def quantised_generation(out: str) -> str:
    """The judge line, the prompt table, the distribution and quantisation lines and the
    verdict of a ``generate --quantize`` run."""
    lines = out.splitlines()
    table = next(i for i, line in enumerate(lines) if line.startswith("prompt  agreed"))
    end = next(i for i, line in enumerate(lines) if i > table and not line.strip())
    keep = [line for line in lines if line.startswith("  judge:")]
    keep += ["", *lines[table:end], ""]
    keep += [line for line in lines if line.startswith(("distribution", "quantisation:"))]
    keep += [line for line in lines if line.startswith("  tokens agreed")]
    return "\n".join([*keep, "", next(x for x in lines if x.startswith(("PASS", "FAIL")))])


def distribution_lines(out: str) -> str:
    """The reference line, the distribution and budget lines and the verdict of a
    ``--kl-budget`` cross-check."""
    lines = out.splitlines()
    keep = [line for line in lines if line.startswith("  reference:")]
    keep += [line for line in lines if line.startswith(("top-1 agreement", "distribution"))]
    return "\n".join([*keep, "", next(x for x in lines if x.startswith(("PASS", "FAIL")))])


def divergence_and_hint(text: str) -> str:
    return "\n".join(
        line for line in text.splitlines() if line.startswith(("first divergence:", "hint:"))
    )


def assertion_message(text: str) -> str:
    """pytest's ``E`` lines, from the AssertionError to the full report's path."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "AssertionError: " in line)
    last = next(i for i in range(first, len(lines)) if "full report:" in lines[i])
    return "\n".join(lines[first : last + 1])
