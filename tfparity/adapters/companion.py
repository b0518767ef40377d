"""The companion of an export or of a user's own model: the model it came from (or its
reference), which holds what the model itself does not (the Hugging Face config and
the tokenizer), resolved through the loaders' own spec resolution
(:func:`~tfparity.adapters.keras_hub_checkpoints.checkpoint_dir`,
:func:`~tfparity.adapters.loading.read_config`,
:func:`~tfparity.adapters.keras_hub_checkpoints.spec_tokenizer`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..architectures.heads import Head
from ..errors import TfparityError
from .specs import EXPORT_KINDS, ModelSpec, is_export, parse_spec


@dataclass(frozen=True)
class Companion:
    """The companion spec (as given and as the plain checkpoint spec keras-hub converts),
    its config and tokenizer (None where the checkpoint has none)."""

    text: str
    checkpoint: ModelSpec  # a keras-hub:<SPEC> companion: SPEC
    config: Any
    tokenizer: Any | None

    @property
    def head(self) -> Head | None:
        """The head the companion spec names (``tiny:bert/sequence-classification``)."""
        return self.checkpoint.head


def resolve(text: str, for_whom: str) -> Companion:
    """The config and tokenizer of the companion ``text`` of the model ``for_whom`` (an
    export, a model of the user's own); exit 2 for a companion that holds none (another
    export, a keras-hub preset)."""
    from . import tiny
    from .keras_hub_checkpoints import checkpoint_dir, spec_tokenizer
    from .loading import read_config

    spec = parse_spec(text)
    if is_export(spec):
        raise TfparityError(
            f"{for_whom}'s companion {text} is {EXPORT_KINDS[spec.kind]} too: it holds "
            "no Hugging Face config or tokenizer either. Name the checkpoint the export "
            "came from (a directory, minilm, tiny:<model_type>, keras-hub:<SPEC>)."
        )
    if spec.kind == "keras-hub":
        if spec.inner is None:
            raise TfparityError(
                f"{text} is a keras-hub preset: it holds no Hugging Face config or "
                f"tokenizer for {for_whom}. Name the checkpoint it was converted from."
            )
        spec = spec.inner
    if spec.kind == "tiny":  # its config and tokenizer are built, not read
        return Companion(text, spec, tiny.tiny_config(spec.location), tiny.tiny_tokenizer())
    directory = checkpoint_dir(spec)
    return Companion(text, spec, read_config(directory), spec_tokenizer(spec, directory))
