"""``--pt-config KEY=VALUE`` (``pt_config={...}``): the PyTorch reference built from its
checkpoint's config with some fields changed.

Why: a port can differ from its checkpoint by design or by a known bug (keras-hub's
``BertBackbone`` hard-codes the tanh GELU where BERT checkpoints use the exact one).
The cross-check then fails at that difference, first, and says nothing of the rest of
the port. Building the reference with the port's own setting (``hidden_act=
gelu_pytorch_tanh``) asks the next question: apart from that, is the port right?

It is never applied silently: only the fields given are changed, each is checked
against the checkpoint's config (a key it lacks, a value of another kind: exit 2, naming
the key), and every report on such a reference says which fields run as the checkpoint
does not (:func:`changed_note`).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...architectures.findings import pt_config_item
from ...errors import TfparityError

FLAG = "--pt-config"
# Fields that choose the model's class or its weights' layout, not how it computes.
REFUSED = ("model_type", "architectures", "transformers_version")


def parse_items(items: Iterable[str] | None) -> dict[str, Any] | None:
    """``["hidden_act=gelu_pytorch_tanh", "layer_norm_eps=1e-5"]`` as a dict: a value is
    read as JSON where it parses (numbers, true/false, null), else kept as a string.
    None (no item given) stays None: no change at all. Exit 2 on a malformed item or a
    key given twice."""
    if not items:
        return None
    found: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(c.isspace() for c in key):
            raise TfparityError(
                f"{FLAG} {item!r} is malformed: give KEY=VALUE, e.g. "
                f"{FLAG} hidden_act=gelu_pytorch_tanh."
            )
        if key in found:
            raise TfparityError(f"{FLAG} gives {key} twice; give each key once.")
        found[key] = parse_value(text)
    return found


def parse_value(text: str) -> Any:
    """``1e-5`` -> 1e-05, ``true`` -> True, ``null`` -> None, ``gelu`` -> ``"gelu"``
    (the inverse of :func:`~tfparity.architectures.findings.pt_config_item`)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def checked(pt_config: Any) -> dict[str, Any] | None:
    """The API's ``pt_config`` argument as a dict (None stays None); TypeError for
    anything but a mapping with string keys."""
    if pt_config is None:
        return None
    if not isinstance(pt_config, Mapping) or not all(isinstance(k, str) for k in pt_config):
        raise TypeError(
            "pt_config must be a dict of config fields to values (e.g. "
            f"{{'hidden_act': 'gelu_pytorch_tanh'}}), not {pt_config!r}"
        )
    return dict(pt_config) or None


def apply_changes(config: Any, changes: Mapping[str, Any] | None) -> tuple[Any, dict]:
    """``config`` with ``changes`` set (a copy; ``config`` itself without any), and what
    changed: field -> (the checkpoint's value, the reference's)."""
    if not changes:
        return config, {}
    changed = overridden(config, changes)
    return changed, {k: (getattr(config, k), v) for k, v in changes.items()}


@contextlib.contextmanager
def rejecting(changes: Mapping[str, Any] | None) -> Iterator[None]:
    """transformers' refusal to build a model with ``changes`` as an exit 2 naming
    them; without changes, errors pass as they are."""
    try:
        yield
    except TfparityError:
        raise
    except Exception as exc:
        if not changes:
            raise
        raise rejected(changes, exc) from exc


def overridden(config: Any, changes: Mapping[str, Any]) -> Any:
    """A copy of ``config`` with ``changes`` set; ``config`` itself is untouched. Exit 2
    for a key the config does not have or a value of another kind than the config's
    (a string for a number), naming the key."""
    fields = config.to_dict()
    known = set(fields) | set(config.attribute_map)
    changed = copy.deepcopy(config)
    for key, value in changes.items():
        if key not in known or key.startswith("_") or key in REFUSED:
            raise TfparityError(
                f"{FLAG} {key}: the reference's config ({type(config).__name__}) has no "
                f"field {key!r} that can be changed"
                + (" (it names the architecture, not a setting)." if key in REFUSED else ".")
            )
        _same_kind(key, getattr(config, key), value)
        setattr(changed, key, value)
    return changed


def _same_kind(key: str, old: Any, new: Any) -> None:
    """A number stays a number, a flag a flag, a string a string (None either way):
    transformers would otherwise fail mid-run with a traceback, not at build time."""
    if old is None or new is None or _kind(old) == _kind(new):
        return
    raise TfparityError(
        f"{FLAG} {pt_config_item(key, new)}: the checkpoint's {key} is {old!r}, "
        f"{_kind(old)}; give {_kind(old)}, not {_kind(new)}."
    )


def _kind(value: Any) -> str:
    if isinstance(value, bool):  # before int: a bool is an int to Python
        return "a flag (true/false)"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def changed_note(changed: Mapping[str, tuple[Any, Any]]) -> str:
    """What every report on a changed reference says (``changed``: field -> (the
    checkpoint's value, the reference's)), so a PASS is never read as the checkpoint's."""
    parts = [
        f"{key}={new!r} instead of the checkpoint's {old!r}" for key, (old, new) in changed.items()
    ]
    return (
        f"The PyTorch reference runs with {', '.join(parts)} ({FLAG}): it is not the "
        "checkpoint's own model."
    )


def label(changes: Mapping[str, Any]) -> str:
    """The reference's name suffix: ``(--pt-config hidden_act=gelu_pytorch_tanh)``."""
    return f" ({FLAG} {' '.join(pt_config_item(k, v) for k, v in changes.items())})"


def rejected(changes: Mapping[str, Any], exc: Exception) -> TfparityError:
    """transformers refused to build the reference with ``changes``: exit 2 naming them."""
    items = " ".join(pt_config_item(k, v) for k, v in changes.items())
    reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return TfparityError(
        f"{FLAG} {items}: transformers could not build the PyTorch reference with it: {reason}"
    )
