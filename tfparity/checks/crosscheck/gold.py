"""Accuracy against gold labels (``--labels``): which sequences each side classifies
right, and the flips between them. Two models can have the same accuracy while answers
flip between right and wrong (Dutta et al., "Accuracy is Not All You Need", arXiv
2407.09141), so both directions are counted: correct→wrong (PyTorch right, TF wrong)
and wrong→correct. Reported beside the verdict, not judged: a flip at a near-tie is
rounding, and the label agreement says so. Numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...architectures.heads import PER_SEQUENCE_LABEL_HEADS, Head
from ...errors import TfparityError
from ...inputs import Batch, read_texts_file
from ...trace import Trace

LOGITS = "logits"
MAX_LISTED = 5  # flips listed (all are counted)


@dataclass(frozen=True)
class GoldFlip:
    """A sequence one side gets right and the other wrong."""

    text: int  # from 1, as the texts were given
    label: int
    tf: int
    pt: int


@dataclass
class GoldAgreement:
    """Both sides' accuracy on the gold labels, and the flips between them."""

    output: str
    total: int
    tf_correct: int
    pt_correct: int
    correct_to_wrong: int
    wrong_to_correct: int
    flips: list[GoldFlip] = field(default_factory=list)


def read_labels(path: str) -> list[str]:
    """A labels file: one label per line (an id or a label name), blank lines skipped
    as in a texts file, so line k labels text k."""
    return read_texts_file(path)


def gold_ids(given: Sequence[str], id2label: Mapping[Any, str] | None) -> np.ndarray:
    """Each label as a class id: an integer below the number of the config's labels, or
    a name of its ``id2label``; exit 2 naming the first label that is neither."""
    by_name = {str(v): int(k) for k, v in (id2label or {}).items()}
    classes = len(by_name) if by_name else np.iinfo(np.int32).max
    ids = []
    for k, label in enumerate(given):
        text = str(label).strip()
        if text in by_name:
            ids.append(by_name[text])
        elif text.lstrip("-").isdigit() and 0 <= int(text) < classes:
            ids.append(int(text))
        else:
            names = ", ".join(sorted(by_name)) or "none"
            raise TfparityError(
                f"label {k + 1} ({text!r}) is neither a class id below {classes} nor one of "
                f"the model's label names ({names})."
            )
    return np.asarray(ids, np.int64)


def check_labels(
    head: Head | None,
    batches: Sequence[Batch],
    given: Sequence[str],
    id2label: Mapping[Any, str] | None,
) -> np.ndarray:
    """The labels as class ids; exit 2, before any run, for a head without one label per
    sequence, a count of labels other than the sequences' or a label the config does
    not have."""
    if head not in PER_SEQUENCE_LABEL_HEADS:
        kinds = ", ".join(sorted(h.value for h in PER_SEQUENCE_LABEL_HEADS))
        raise TfparityError(
            f"--labels gives one label per text, for a head with one label per sequence "
            f"({kinds}); this model's head is {getattr(head, 'value', head)}."
        )
    count = sum(b.input_ids.shape[0] for b in batches)
    if len(given) != count:
        raise TfparityError(
            f"--labels has {len(given)} labels for {count} texts: give one label per text, "
            "in the texts' order."
        )
    return gold_ids(given, id2label)


def gold_agreement(
    tf: Sequence[Trace],
    pt: Sequence[Trace],
    batches: Sequence[Batch],
    head: Head | None,
    given: Sequence[str],
    id2label: Mapping[Any, str] | None,
) -> GoldAgreement:
    """Both sides' argmax labels against ``given`` (one per sequence, in the order the
    texts were given; each batch's ``numbers`` say which row is which)."""
    gold = check_labels(head, batches, given, id2label)
    count = len(gold)
    numbers, tf_top, pt_top = [], [], []
    start = 0
    for a, e, batch in zip(tf, pt, batches, strict=True):
        rows = batch.input_ids.shape[0]
        numbers += list(batch.numbers or range(start, start + rows))
        tf_top.append(np.asarray(a[LOGITS]).argmax(axis=-1))
        pt_top.append(np.asarray(e[LOGITS]).argmax(axis=-1))
        start += rows
    order = np.asarray(numbers)
    tf_label, pt_label, gold = np.concatenate(tf_top), np.concatenate(pt_top), gold[order]
    tf_ok, pt_ok = tf_label == gold, pt_label == gold
    flipped = np.flatnonzero(tf_ok != pt_ok)
    flips = [
        GoldFlip(int(order[i]) + 1, int(gold[i]), int(tf_label[i]), int(pt_label[i]))
        for i in flipped[np.argsort(order[flipped])][:MAX_LISTED]
    ]
    return GoldAgreement(
        output=LOGITS,
        total=count,
        tf_correct=int(tf_ok.sum()),
        pt_correct=int(pt_ok.sum()),
        correct_to_wrong=int((pt_ok & ~tf_ok).sum()),
        wrong_to_correct=int((tf_ok & ~pt_ok).sum()),
        flips=flips,
    )
