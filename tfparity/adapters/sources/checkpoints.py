"""The one place a MODEL spec is resolved to its checkpoint: the directory (a tiny
model's seeded one, a cached hub snapshot, a local directory), its config and its
tokenizer; for keras-hub's converter, the PyTorch reference, exports' companions (the
model an export came from holds what the export does not) and users' models alike.
Reading a directory's files is :mod:`.checkpoint_files`'s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...architectures.heads import Head
from ...errors import TfparityError
from ..runtime.imports import import_transformers
from .checkpoint_files import checkpoint_tokenizer, local_dir, read_config
from .specs import EXPORT_KINDS, ModelSpec, as_spec, is_export


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


def resolve(text: str | ModelSpec, for_whom: str) -> Companion:
    """The config and tokenizer of the companion ``text`` of the model ``for_whom`` (an
    export, a model of the user's own); exit 2 for a companion that holds none (another
    export, a keras-hub preset)."""
    from . import tiny

    spec = as_spec(text)
    text = spec.text
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
    directory = local_dir(spec)
    return Companion(text, spec, read_config(directory), spec_tokenizer(spec, directory))


def spec_tokenizer(spec: ModelSpec, directory: Path | None) -> Any:
    """The transformers tokenizer of the checkpoint a plain MODEL spec names."""
    from . import tiny

    if spec.kind == "tiny":
        return tiny.tiny_tokenizer()
    return checkpoint_tokenizer(import_transformers(), directory, spec.text)


def reference_tokenizer(text: str | ModelSpec) -> Any | None:
    """The tokenizer of the PyTorch reference the spec ``text`` names (``--pt``), to
    tokenize the texts with beside the TF side's; None where it holds none (an export,
    a keras-hub preset: such a reference is refused elsewhere, by the loader)."""
    spec: ModelSpec | None = as_spec(text)
    if spec.kind == "keras-hub":
        spec = spec.inner
    if spec is None or is_export(spec):
        return None
    return spec_tokenizer(spec, None if spec.kind == "tiny" else local_dir(spec))
