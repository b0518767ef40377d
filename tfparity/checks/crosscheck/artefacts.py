"""What travels with the weights and decides what a fine-tuned model means: its label
maps and its tokenizer. Two checkpoints can agree on every tensor and still disagree on
these: a port whose ``config.json`` has ``id2label`` swapped calls every NEGATIVE text
POSITIVE with logits identical to the reference's, and a port whose tokenizer maps the
texts to other ids than the reference's is checked, tensor by tensor, on ids the
reference's users never feed it. Both are failures of the port, judged here:

- label maps (sequence and token classification heads, where both configs have them):
  ``num_labels``, ``id2label`` and ``label2id``, keys normalised (JSON gives ``"0"``,
  transformers ``0``). Default maps (``LABEL_0``, ``LABEL_1``, ...) on one side against
  named ones on the other are a note: the default says nothing about what a label means.
- tokenizers, on the texts checked: both tokenize each text; the first that differs
  fails, with both tokenizations.

Each failure is a :class:`~tfparity.compare.Comparison` that compared no values, named
``config:...`` or ``tokenizer:...`` (:data:`tfparity.results.ARTEFACT_PREFIXES`), so the
verdict line leads with it. No framework call: configs are read, tokenizers called.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...compare import Comparison, failed_comparison
from ...inputs import token_ids, token_strings, tokenizer_source
from ...results import Report

_DEFAULT_LABEL = re.compile(r"LABEL_(\d+)")
MAX_LISTED = 3  # differing labels named per failure (all are counted)
WINDOW = 12  # tokens shown per tokenization
_AFTER = ("reference", "head", "reference_checkpoint_dtype")  # the header's facts of models


@dataclass
class Findings:
    """Failures to add to a report's comparisons, its notes and its details."""

    failures: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def num_labels_problem(self) -> str | None:
        """The ``num_labels`` failure's text, for the divergence hint (the heads differ
        in size, so the logits do too)."""
        found = [c.problem for c in self.failures if c.name == "config:num_labels"]
        return found[0] if found else None


def with_findings(report: Report, found: Findings) -> Report:
    """``report`` judged on ``found`` too: its failures fail the report, its details go
    in after the reference and its head (the text header's order: what was compared,
    then whose tokenizer and which labels)."""
    report.comparisons = [*report.comparisons, *found.failures]
    report.passed = report.passed and not found.failures
    report.notes = [*report.notes, *found.notes]
    keys = list(report.details)
    after = [i + 1 for i, k in enumerate(keys) if k in _AFTER]
    at = max(after, default=len(keys))
    items = list(report.details.items())
    report.details = dict(items[:at] + list(found.details.items()) + items[at:])
    return report


def label_findings(tf_config: Any, pt_config: Any) -> Findings:
    """The two configs' label maps compared (see the module's docstring); nothing where
    either has none (a stored reference's config may not)."""
    tf_map, pt_map = id_to_label(tf_config), id_to_label(pt_config)
    if tf_map is None or pt_map is None:
        return Findings()
    if len(tf_map) != len(pt_map):
        problem = (
            f"num_labels differ: {len(tf_map)} in TF, {len(pt_map)} in PyTorch (the "
            "classifier heads have different sizes: a port of another fine-tuning?)"
        )
        found = [_failed("config:num_labels", problem, 1)]
        return Findings(found, details={"labels": f"{len(tf_map)} in TF, {len(pt_map)} in PyTorch"})
    if is_default(tf_map) != is_default(pt_map):
        return Findings(notes=[_default_note(tf_map, pt_map)], details=_labels_detail(tf_map))
    failures = []
    differ = sorted(i for i in tf_map if tf_map[i] != pt_map.get(i))
    if differ:
        text = _label_differences(differ, tf_map, pt_map)
        failures.append(_failed("config:id2label", f"label maps differ: {text}", len(differ)))
    failures += _label2id_failure(tf_config, pt_config, tf_map, pt_map)
    return Findings(failures, details=_labels_detail(tf_map, same=not failures))


def id_to_label(config: Any) -> dict[int, str] | None:
    """``config.id2label`` with int keys (a config read as plain JSON has str ones)."""
    raw = getattr(config, "id2label", None)
    if not isinstance(raw, Mapping) or not raw:
        return None
    return {int(k): str(v) for k, v in raw.items()}


def is_default(id2label: Mapping[int, str]) -> bool:
    """transformers' maps for a config that names no labels: ``LABEL_<id>``."""
    return all(_DEFAULT_LABEL.fullmatch(v) and int(v[6:]) == k for k, v in id2label.items())


def _label_differences(ids: list[int], tf_map: dict[int, str], pt_map: dict[int, str]) -> str:
    """``id 0 is 'NEGATIVE' in TF, 'POSITIVE' in PyTorch (swapped with id 1)``, for the
    first few differing ids."""
    where = {label: i for i, label in pt_map.items()}
    parts = []
    for i in ids[:MAX_LISTED]:
        j = where.get(tf_map[i])
        if j is not None and tf_map.get(j) == pt_map.get(i):
            how = f" (swapped with id {j})"
        elif j is not None:
            how = f" ({tf_map[i]!r} is id {j} in PyTorch)"
        else:
            how = ""
        parts.append(f"id {i} is {tf_map[i]!r} in TF, {pt_map.get(i)!r} in PyTorch{how}")
    more = f"; and {len(ids) - MAX_LISTED} more" if len(ids) > MAX_LISTED else ""
    return "; ".join(parts) + more


def _label2id_failure(tf_config: Any, pt_config: Any, tf_map, pt_map) -> list[Comparison]:
    """``label2id`` compared too where ``id2label`` agrees: a config whose two maps
    disagree with each other still decodes predictions one way and encodes training
    labels the other."""
    tf_ids, pt_ids = _label_to_id(tf_config), _label_to_id(pt_config)
    if tf_ids is None or pt_ids is None or tf_ids == pt_ids or tf_map != pt_map:
        return []
    differ = sorted(set(tf_ids) | set(pt_ids), key=str)
    differ = [label for label in differ if tf_ids.get(label) != pt_ids.get(label)]
    text = "; ".join(
        f"{label!r} is {tf_ids.get(label)} in TF, {pt_ids.get(label)} in PyTorch"
        for label in differ[:MAX_LISTED]
    )
    return [_failed("config:label2id", f"label2id differs: {text}", len(differ))]


def _label_to_id(config: Any) -> dict[str, int] | None:
    raw = getattr(config, "label2id", None)
    if not isinstance(raw, Mapping) or not raw:
        return None
    return {str(k): int(v) for k, v in raw.items()}


def _default_note(tf_map: dict[int, str], pt_map: dict[int, str]) -> str:
    named, side = (pt_map, "PyTorch") if is_default(tf_map) else (tf_map, "TF")
    default = "TF" if side == "PyTorch" else "PyTorch"
    return (
        f"Label maps: {default}'s config has the default names (LABEL_0, ...), {side}'s "
        f"names them ({', '.join(named[i] for i in sorted(named))}); not judged (the "
        "default says nothing of what a label means), but the port's users will read "
        f"{default}'s names: give both configs the same id2label."
    )


def _labels_detail(id2label: dict[int, str], *, same: bool = True) -> dict[str, str]:
    names = ", ".join(id2label[i] for i in sorted(id2label))
    return {"labels": f"{len(id2label)} ({names}), {'the same' if same else 'differ'}"}


def tokenizer_findings(made_by: Any, reference: Any | None, texts: Sequence[str]) -> Findings:
    """Whose tokenizer made the ids (``details["tokenizer"]``), and, where the reference
    has a tokenizer of its own, the first text the two tokenize differently (a failure:
    the port's users feed it other ids than the reference's users)."""
    found = Findings(details={"tokenizer": tokenizer_source(made_by)})
    if reference is None:
        return found
    found.details["reference_tokenizer"] = tokenizer_source(reference)
    differ = [
        (n, text, a, b)
        for n, text in enumerate(texts, 1)
        if (a := token_ids(made_by, text)) != (b := token_ids(reference, text))
    ]
    if differ:
        n, text, a, b = differ[0]
        problem = (
            f"the tokenizers differ on {len(differ)} of {len(texts)} texts; first, text {n} "
            f"({_short(text)!r}): {_tokens(made_by, a, b)} by {tokenizer_source(made_by)}, "
            f"{_tokens(reference, b, a)} by {tokenizer_source(reference)}"
        )
        found.failures.append(_failed("tokenizer:input_ids", problem, len(differ)))
    return found


def _tokens(tokenizer: Any, ids: list[int], other: list[int]) -> str:
    """The tokens of ``ids`` from just before where they part from ``other``, WINDOW of
    them at most, ``...`` marking what is cut."""
    pairs = enumerate(zip(ids, other, strict=False))  # of different lengths, often
    first = next((i for i, (x, y) in pairs if x != y), min(len(ids), len(other)))
    start = max(0, min(first - 2, len(ids) - WINDOW))
    shown = token_strings(tokenizer, ids[start : start + WINDOW])
    head = "... " if start else ""
    tail = " ..." if start + WINDOW < len(ids) else ""
    return f'"{head}{" ".join(shown)}{tail}"'


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _failed(name: str, problem: str, count: int) -> Comparison:
    return failed_comparison(name, problem, [count], "n/a")


def tokenizers_judged(
    reports: list[Report],
    tokenizer: Any,
    reference_of: Callable[[], Any],
    batches: Sequence[Any],
) -> list[Report]:
    """``reports`` saying whose tokenizer made the ids of the texts (``tokenizer``), and
    judged on whether the reference's own (``reference_of()``, None without one) makes
    the same ids: a port checked on ids its reference's users never feed it proves
    nothing about them. As they are where no tokenizer made the ids (``tokenizer``
    None: ids given, or a side without one) or there are no texts; ``reference_of`` is
    called only when there are (it may load the reference's tokenizer)."""
    texts = [t for b in batches for t in (b.texts or ())]
    if not texts or tokenizer is None:
        return reports
    reference = reference_of()
    if reference is not None and tokenizer_source(reference) == tokenizer_source(tokenizer):
        reference = None  # the very tokenizer that made the ids: nothing to compare
    found = tokenizer_findings(tokenizer, reference, texts)
    return [with_findings(r, found) for r in reports]
