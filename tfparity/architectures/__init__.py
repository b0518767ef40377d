"""The architecture registry: everything tfparity knows of each model type, one module
per family, looked up by ``config.model_type``.

A family module defines ``ARCHITECTURES``, a tuple of :class:`Architecture` records (one
per HF ``model_type`` it serves). Modules are discovered, so adding an architecture is
one new module here plus its tests. A model type nobody registered gets the generic
family (:func:`generic.architecture`): layer-level localisation and weight hints by
parameter-name prefix, as long as transformers has a TF class for it.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .base import (
    Architecture,
    EmbeddingTables,
    IdsOnlyTransform,
    KnownDifference,
    Positions,
)
from .faults import Fault
from .sublayers import COMPONENTS, FeedForward, SubLayers, Tap

__all__ = [
    "COMPONENTS",
    "Architecture",
    "EmbeddingTables",
    "Fault",
    "FeedForward",
    "IdsOnlyTransform",
    "KnownDifference",
    "Positions",
    "SubLayers",
    "Tap",
    "for_config",
    "keras_hub_backbones",
    "lookup",
    "activation_name",
    "registry",
    "tapped_types",
    "tiny_types",
    "torch_only_tiny_types",
]

# Modules of this package that hold machinery, not a family.
_MACHINERY = frozenset(
    {
        "base",
        "faults",
        "findings",
        "generation_faults",
        "heads",
        "sublayers",
        "generic",
        "keras_hub_layouts",
        "tf_scopes",
        "torch_scopes",
    }
)


@functools.cache
def registry() -> Mapping[str, Architecture]:
    """Every registered architecture by model type (read-only; built once)."""
    found: dict[str, Architecture] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name in _MACHINERY or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for arch in module.ARCHITECTURES:
            if arch.model_type in found:
                raise RuntimeError(f"{arch.model_type!r} is registered twice ({info.name})")
            found[arch.model_type] = arch
    return MappingProxyType(found)


def lookup(model_type: str) -> Architecture:
    """The registered architecture of ``model_type``, else the generic family's."""
    arch = registry().get(model_type)
    if arch is not None:
        return arch
    from .generic import architecture

    return architecture(model_type)


def for_config(config: Any) -> Architecture:
    """The architecture of a transformers config (by its ``model_type``)."""
    return lookup(getattr(config, "model_type", ""))


@functools.cache
def keras_hub_backbones() -> Mapping[str, Architecture]:
    """Registered architectures by the keras-hub backbone class of their port (what a
    keras-hub preset's config.json names); read-only."""
    found: dict[str, Architecture] = {}
    for arch in registry().values():
        if arch.keras_hub is not None:
            found.setdefault(arch.keras_hub.backbone, arch)
    return MappingProxyType(found)


def tapped_types() -> tuple[str, ...]:
    """The HF TF model types localised to the sub-layer (for messages; PyTorch-only
    families, whose TF side is keras-hub's, are not HF TF models)."""
    return tuple(
        t for t, arch in registry().items() if arch.sublayers is not None and arch.tf_class
    )


def activation_name(config: Any) -> str:
    """The feed-forward activation's config value, under whichever name the
    architecture uses (``hidden_act``; DistilBERT's ``activation``; GPT's
    ``activation_function``, ``afn``)."""
    names = ("hidden_act", "activation", "activation_function", "afn")
    return next((v for n in names if (v := getattr(config, n, None))), "")


def tiny_types() -> tuple[str, ...]:
    """The model types whose ``tiny:<model_type>`` spec loads as a Hugging Face TF model,
    sorted (see :func:`torch_only_tiny_types` for the others)."""
    return tuple(
        sorted(t for t, a in registry().items() if a.tiny is not None and a.tf_class is not None)
    )


def torch_only_tiny_types() -> tuple[str, ...]:
    """The model types with a ``tiny:`` spec but no transformers TF class (Llama, Qwen,
    Gemma): their tiny checkpoints are seeded in PyTorch and run on the TF side through
    keras-hub (``keras-hub:tiny:<model_type>``)."""
    return tuple(
        sorted(t for t, a in registry().items() if a.tiny is not None and a.tf_class is None)
    )
