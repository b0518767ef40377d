"""Task heads: which model class a checkpoint is, and what its head outputs mean.

A fine-tuned checkpoint names its class in ``config.architectures``
(``BertForSequenceClassification``); transformers names every TF class ``TF`` + the
PyTorch name, and every head class the family's prefix + a suffix of its kind. So the
kind, and both classes, follow from the names, without a table per family (the loader
checks that transformers has the class, and refuses by name where it does not).

Pure Python: no framework imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum


class Head(str, Enum):
    """The kinds of model class tfparity runs on both sides (``--head KIND``)."""

    BASE = "base"
    SEQUENCE_CLASSIFICATION = "sequence-classification"
    TOKEN_CLASSIFICATION = "token-classification"
    QUESTION_ANSWERING = "question-answering"
    MULTIPLE_CHOICE = "multiple-choice"
    MASKED_LM = "masked-lm"
    CAUSAL_LM = "causal-lm"
    SEQ2SEQ_LM = "seq2seq-lm"


# Class-name suffixes of each kind, most specific first ("LMHeadModel" ends in "Model").
SUFFIXES: Mapping[Head, tuple[str, ...]] = {
    Head.SEQUENCE_CLASSIFICATION: ("ForSequenceClassification",),
    Head.TOKEN_CLASSIFICATION: ("ForTokenClassification",),
    Head.QUESTION_ANSWERING: ("ForQuestionAnswering", "ForQuestionAnsweringSimple"),
    Head.MULTIPLE_CHOICE: ("ForMultipleChoice",),
    Head.MASKED_LM: ("ForMaskedLM",),
    Head.CAUSAL_LM: ("ForCausalLM", "LMHeadModel"),
    Head.SEQ2SEQ_LM: ("ForConditionalGeneration",),
    Head.BASE: ("Model",),
}

# Kinds whose inputs or outputs tfparity's batches do not fit yet: refused by name.
UNSUPPORTED: Mapping[Head, str] = {
    Head.MULTIPLE_CHOICE: "its inputs are [batch, choices, seq], not tfparity's [batch, seq]",
    Head.SEQ2SEQ_LM: "only `tfparity crosscheck` (the decoder teacher-forced) and "
    "`tfparity generate` (its greedy decoding) run an encoder-decoder's decoder",
}

# Kinds of UNSUPPORTED that the commands running a decoder load (a T5's seq2seq LM:
# `tfparity generate` judges the tokens it generates, `tfparity crosscheck` its decoder
# teacher-forced): they ask for them with ``decoders=True`` (see :func:`unsupported`).
GENERATION_ONLY = frozenset({Head.SEQ2SEQ_LM})

# Outputs a head adds, by the task-level agreement they are judged by beside the numbers.
LABEL_OUTPUTS = ("logits",)
SPAN_OUTPUTS = ("start_logits", "end_logits")

# Kinds whose logits are over the vocabulary: judged by top-1 (and top-k) agreement.
LM_HEADS = frozenset({Head.MASKED_LM, Head.CAUSAL_LM, Head.SEQ2SEQ_LM})

# Kinds whose vocabulary logits sit on the batch's [batch, seq] positions, so the
# distribution metrics (KL, same top-1, Δp; docs/quantised.md) are taken per token under
# the attention mask; of them, those whose position t predicts the token at t + 1 (and
# so have a next-token NLL and perplexity). A seq2seq LM's logits are the decoder's,
# teacher-forced on the row's own ids shifted right behind the start token
# (adapters/interfaces/greedy.py teacher_forced_decoder): its position t predicts the
# token at t itself, so it has a target (and an NLL) at every real position.
DISTRIBUTION_HEADS = frozenset({Head.MASKED_LM, Head.CAUSAL_LM, Head.SEQ2SEQ_LM})
NEXT_TOKEN_HEADS = frozenset({Head.CAUSAL_LM})
SAME_TOKEN_HEADS = frozenset({Head.SEQ2SEQ_LM})

# What each kind's class answers with: the outputs a check that judges a model by its
# answer compares (the positions check): a base model's last hidden state, a QA head's
# two span logits, every other head's logits.
ANSWER_OUTPUTS: Mapping[Head, tuple[str, ...]] = {
    Head.BASE: ("last_hidden_state",),
    Head.QUESTION_ANSWERING: SPAN_OUTPUTS,
}


def answer_outputs(head: Head) -> tuple[str, ...]:
    """The outputs of :data:`ANSWER_OUTPUTS` a model class of kind ``head`` returns."""
    return ANSWER_OUTPUTS.get(head, LABEL_OUTPUTS)


# The sequence index a per-sequence head reads, for the bidirectional encoders whose
# permutation equivariance the positions check judges: the first token ([CLS], <s>),
# which BERT-like poolers and every such encoder's classification head take. Permuting
# it away would make the head read another token, so the check keeps it in place. (A
# decoder's classifier reads its last real token; decoders are not judged there.)
POOLED_TOKEN: Mapping[Head, int] = {Head.SEQUENCE_CLASSIFICATION: 0}

# Kinds whose logits are the config's labels (``id2label``): a port's label maps are
# judged against the reference's for these only (every config has default maps).
LABELLED_HEADS = frozenset({Head.SEQUENCE_CLASSIFICATION, Head.TOKEN_CLASSIFICATION})

# Kinds with one label per sequence (logits [batch, classes]): gold labels, one per text
# (``--labels``), score them.
PER_SEQUENCE_LABEL_HEADS = frozenset({Head.SEQUENCE_CLASSIFICATION})

# Kinds whose logits are a distribution over classes (per sequence, or per token for
# token classification): the distribution metrics are taken over labels.
CLASS_HEADS = frozenset({Head.SEQUENCE_CLASSIFICATION, Head.TOKEN_CLASSIFICATION})


def unsupported(kind: Head, *, decoders: bool = False) -> str | None:
    """Why a model class of kind ``kind`` cannot be loaded here; None where it can.
    ``decoders``: the caller runs a decoder (``tfparity generate``, ``tfparity
    crosscheck``, ``sweep --generate``), so the kinds of :data:`GENERATION_ONLY` load.
    Every other command leaves it False, so a seq2seq LM stays refused there by name,
    before anything runs a forward pass it has no decoder inputs for. An argument, not
    ambient state: what a load may do is read at its call."""
    if kind in GENERATION_ONLY and decoders:
        return None
    return UNSUPPORTED.get(kind)


def head_names() -> list[str]:
    return [h.value for h in Head]


def parse_head(text: str) -> Head:
    """``--head KIND``; a clear error naming the kinds."""
    try:
        return Head(text)
    except ValueError:
        raise ValueError(f"unknown head '{text}'; one of {', '.join(head_names())}") from None


def head_of_class(class_name: str) -> Head | None:
    """The kind of a transformers class name (TF or PyTorch); None for another name."""
    name = class_name[2:] if class_name.startswith("TF") else class_name
    for head, suffixes in SUFFIXES.items():
        if any(name.endswith(s) and len(name) > len(s) for s in suffixes):
            return head
    return None


def head_of_config(architectures: Sequence[str] | None) -> Head:
    """The kind ``config.architectures`` names (its first entry); BASE when it names
    none or a class of no known kind."""
    for name in architectures or ():
        head = head_of_class(name)
        if head is not None:
            return head
    return Head.BASE


def pt_class_candidates(pt_base_class: str, head: Head) -> list[str]:
    """The PyTorch class names a family's head of kind ``head`` may have, from its base
    class name (``BertModel`` -> ``BertForSequenceClassification``)."""
    if head is Head.BASE:
        return [pt_base_class]
    prefix = pt_base_class.removesuffix("Model")
    return [prefix + suffix for suffix in SUFFIXES[head]]


def reordered_outputs(
    head: Head,
    permutation: Sequence[int],
    tf_labels: Mapping[int, str] | None = None,
    pt_labels: Mapping[int, str] | None = None,
) -> str:
    """What a head's output rows in another order mean, said as the head's user reads
    its outputs: TF's row ``i`` computes PyTorch's row ``permutation[i]``. QA's two rows
    are the start and end logits (transformers splits ``qa_outputs`` in that order); a
    classifier's rows are its classes, named by ``id2label`` where the configs name them."""
    if head is Head.QUESTION_ANSWERING and tuple(permutation) == (1, 0):
        return (
            "start and end logits swapped: TF's start logits are PyTorch's end logits "
            "and its end logits PyTorch's start logits (the head's two rows in the other "
            "order)"
        )
    moved = [i for i, j in enumerate(permutation) if i != j]
    kind = "classes" if head in LABELLED_HEADS else "outputs"
    text = (
        f"{kind} permuted: TF's logits {', '.join(map(str, moved))} are PyTorch's "
        f"{', '.join(str(permutation[i]) for i in moved)}"
    )
    if (
        tf_labels
        and pt_labels
        and all(i in tf_labels and permutation[i] in pt_labels for i in moved)
    ):
        what = ", ".join(
            f"TF's {tf_labels[i]!r} is PyTorch's {pt_labels[permutation[i]]!r}" for i in moved
        )
        text += f" ({what})"
    return text
