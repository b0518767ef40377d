"""What a checkpoint really holds against what the model built from it needs.

Loaders fill what a checkpoint lacks with random weights and drop what the model does
not use, silently: a token-classification checkpoint checked as a base model gets a
random pooler on each side (a verdict computed from random numbers), and a config.json
smaller than its checkpoint leaves layers unread (a PASS that compared half a model).
Both sides record their gaps here, by PyTorch names relative to the base model
(``pooler.dense.weight``, ``classifier.bias``), and the cross-check decides from them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ...errors import TfparityError


@dataclass(frozen=True)
class Holdings:
    """``missing``: weights the model needs that its checkpoint lacks (the loader made
    them up); ``unused``: weights the checkpoint holds that the model never reads."""

    missing: tuple[str, ...] = ()
    unused: tuple[str, ...] = ()
    body: frozenset[str] = frozenset()  # the base model's modules but the pooler
    # Modules (base-relative first names) whose weights this side holds but may have
    # been made up before it was saved: an export holds the pooler its model had, which
    # a token-classification checkpoint never filled (see :meth:`export`).
    unsure: frozenset[str] = frozenset()
    # Why weights are missing, where the loader knows (a TF class's own names for weights
    # the checkpoint holds): said instead of the generic "port them".
    causes: tuple[str, ...] = ()

    @classmethod
    def export(cls) -> Holdings:
        """An export's (SavedModel, ``.keras``, LiteRT): it holds every weight it
        computes with, so nothing is missing; but it cannot say whether its model's
        loader made its pooler up (a token-classification checkpoint exported as a base
        model), so a reference lacking only the pooler leaves it unjudged, as two
        checkpoints both lacking it do."""
        return cls(unsure=frozenset({"pooler"}))

    def may_be_made_up(self, name: str) -> bool:
        """Whether the weight ``name`` (base-relative) is held but may be random."""
        return name.split(".", 1)[0] in self.unsure

    @classmethod
    def of(
        cls, missing: Iterable[str], unused: Iterable[str], base_prefix: str, body: Iterable[str]
    ) -> Holdings:
        return cls(
            tuple(sorted(relative(missing, base_prefix))),
            tuple(sorted(relative(unused, base_prefix))),
            frozenset(body) - {"pooler"},
        )

    def body_weights(self, names: Iterable[str]) -> list[str]:
        return sorted(n for n in names if is_body(n, self.body))


def relative(names: Iterable[str], base_prefix: str) -> set[str]:
    """Names without the base model's prefix (``bert.encoder...`` -> ``encoder...``)."""
    prefix = base_prefix + "."
    return {n.removeprefix(prefix) for n in names}


def is_body(name: str, body_modules: set[str]) -> bool:
    """Whether ``name`` (base-relative) belongs to the model's body, the embeddings and
    layers every output depends on; the pooler and the task head are not body."""
    return name.split(".", 1)[0] in body_modules


def refuse_unused_body(holdings: Holdings, where: str) -> list[str]:
    """Exit 2 when the checkpoint holds body weights the model never reads (config.json
    smaller than the checkpoint); a note for unused head weights (a pretraining head
    when checking the base model), which are normal. ``where`` names the checkpoint
    mid-sentence (``the checkpoint in DIR``): the refusal capitalises it."""
    body = holdings.body_weights(holdings.unused)
    if body:
        raise TfparityError(
            f"{where[:1].upper()}{where[1:]} holds weights of the model's body that the "
            f"model built from its config.json never uses: {listed(body)}. config.json "
            "describes a smaller model than the checkpoint (num_hidden_layers, hidden "
            "sizes?): fix config.json, or the check would compare part of the model and "
            "call it the whole."
        )
    head = sorted(holdings.unused)
    if not head:
        return []
    return [f"Unused weights of {where}, not part of the model checked: {listed(head)}."]


def made_up_note(missing: Iterable[str]) -> list[str]:
    """The note on weights a TF loader left randomly initialised (none: no note)."""
    missing = sorted(missing)
    if not missing:
        return []
    return ["Not in the checkpoint, left randomly initialised: " + ", ".join(missing[:8])]


def listed(names: Iterable[str], most: int = 8) -> str:
    """Names for a message: sorted, the first ``most`` and how many more."""
    names = sorted(names)
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"
