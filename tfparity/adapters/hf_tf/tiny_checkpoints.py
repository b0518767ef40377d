"""``tiny:<model_type>`` as other frameworks need it: a Hugging Face checkpoint
directory written once (keras-hub's converters read one), and its PyTorch model for the
families without a TF class. Kept apart from :mod:`.tiny` (configs, seeds, tokenizer),
which the loaders import: this module builds models through them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..sources.checkpoint_files import local_dir
from ..sources.specs import ModelSpec
from ..sources.tiny import seed_torch_parameters, tiny_config


def spec_dir(spec: ModelSpec) -> Path:
    """The Hugging Face checkpoint directory a plain MODEL spec names: a tiny model's is
    written here (its PyTorch weights come from the seeded TF model), the others are on
    disk already."""
    if spec.kind == "tiny":
        return checkpoint_dir(spec.location)
    return local_dir(spec)


def checkpoint_dir(model_type: str) -> Path:
    """A Hugging Face directory (config.json + model.safetensors) holding the PyTorch
    weights of ``tiny:<model_type>``, written once to the cache (a temporary folder when
    the cache is off). Other frameworks' converters (keras-hub) read it.

    Types with a TF class take the seeded TF model's weights (exactly the weights the
    PyTorch reference of ``tiny:<type>`` gets); the others are seeded in PyTorch.
    """
    import hashlib
    import json
    import tempfile

    from ..._version import __version__
    from ...architectures import registry
    from ..sources.weight_cache import cache_root

    arch = registry()[model_type]
    key = json.dumps([model_type, dict(arch.tiny or {}), __version__], sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    root = cache_root()
    base = root if root is not None else Path(tempfile.mkdtemp(prefix="tfparity-tiny-"))
    directory = base / "tiny-checkpoints" / f"{model_type}-{digest}"
    if (directory / "model.safetensors").is_file():
        return directory
    model = _tiny_head_model(model_type)
    staging = Path(tempfile.mkdtemp(prefix=f".{model_type}-", dir=_parent(directory)))
    model.save_pretrained(str(staging), safe_serialization=True)
    _add_body(model, staging)
    try:
        staging.rename(directory)  # atomic: a concurrent writer's copy is as good
    except OSError:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return directory


def _parent(directory: Path) -> Path:
    directory.parent.mkdir(parents=True, exist_ok=True)
    return directory.parent


def _tiny_head_model(model_type: str) -> Any:
    """The PyTorch model with its head (how hub checkpoints are saved: ``roberta.``,
    ``model.`` prefixes and an ``lm_head``), every parameter seeded by name; types with
    a TF class then get the seeded TF model's body weights, as their PyTorch reference
    does."""
    from ...architectures import registry
    from ..runtime.imports import import_transformers

    arch = registry()[model_type]
    config = tiny_config(model_type)
    t = import_transformers()
    cls = getattr(t, arch.pt_head_class or arch.pt_class)
    model = cls._from_config(config, attn_implementation="eager")
    seed_torch_parameters(model, seed=f"tiny:{model_type}")
    if arch.tf_class is not None:
        from transformers.modeling_tf_pytorch_utils import load_tf2_model_in_pytorch_model

        from ..sources.specs import ModelSpec
        from .loading import load_tf

        tf_model = load_tf(ModelSpec(f"tiny:{model_type}", "tiny", model_type)).model
        base = getattr(t, arch.pt_class)._from_config(config, attn_implementation="eager")
        load_tf2_model_in_pytorch_model(base, tf_model, allow_missing_keys=True)
        body = base.state_dict()
        model.base_model.load_state_dict(body, strict=False)
        model._tfparity_body = body  # a pooler the head class drops (ALBERT) is saved too
    return model.eval()


def _add_body(model: Any, directory: Path) -> None:
    """Write base-model weights the head class leaves out (ALBERT's pooler) into the
    saved checkpoint, under the base prefix, as hub checkpoints hold them."""
    body = getattr(model, "_tfparity_body", None)
    if not body:
        return
    from safetensors.numpy import load_file, save_file

    path = directory / "model.safetensors"
    state = load_file(str(path))
    prefix = model.base_model_prefix + "."
    missing = {
        prefix + k: v.detach().cpu().numpy()
        for k, v in body.items()
        if prefix + k not in state and k not in state and not k.endswith("position_ids")
    }
    if missing:
        save_file({**state, **missing}, str(path), metadata={"format": "pt"})
