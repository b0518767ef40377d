"""PyTorch gradients for the gradients check: the ``input_ids`` path, differentiated
by autograd, in float32 or in the float64 copy that referees.

The gradient with respect to the embeddings is taken at the word-embedding module's
output (a forward hook keeps it), which is what TensorFlow's ``inputs_embeds`` path
is fed; the hidden states the model returns keep their gradients
(``retain_grad``), and every parameter's gradient is read by the names
:meth:`~.pt_model.PTModel.weights` uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...compare import to_numpy
from ..interfaces.gradients import GradientRun, Objective, Term
from ..runtime.imports import import_torch


def torch_loss(outputs: dict[str, Any], terms: list[Term], dtype: Any) -> Any:
    """The scalar of :class:`~..interfaces.gradients.Objective` in PyTorch, in ``dtype``."""
    torch = import_torch()
    total = torch.zeros((), dtype=dtype)
    for term in terms:
        x = outputs[term.output].to(dtype)
        target = torch.from_numpy(term.target)
        if term.kind == "project":
            per = (x * target.to(dtype)).sum(-1)
        elif term.kind == "classes":
            flat = torch.nn.functional.cross_entropy(
                x.reshape(-1, x.shape[-1]), target.reshape(-1), reduction="none"
            )
            per = flat.reshape(target.shape)
        else:
            per = ((x - target.to(dtype)) ** 2).sum(-1)
        total = total + _mean(torch, per, term.mask, dtype)
    return total


def _mean(torch: Any, per: Any, mask: np.ndarray | None, dtype: Any) -> Any:
    if mask is None:
        return per.mean()
    weights = torch.from_numpy(mask).to(dtype)
    return (per * weights).sum() / max(float(mask.sum()), 1.0)


def pt_gradients(
    model: Any,
    inputs: dict[str, Any],
    mask: np.ndarray,
    objective: Objective,
    names: Any,
    time_major: bool = False,
) -> GradientRun:
    """One autograd run of ``model`` (float32 or float64) on ``inputs``; ``names``:
    parameter name -> the name reported (None: left out); ``time_major``: the embedding
    module's output is ``[seq, batch, width]``, its gradient given batch-major as TF's."""
    torch = import_torch()
    dtype = next(model.parameters()).dtype
    captured: list[Any] = []

    def keep(_module: Any, _inputs: Any, output: Any) -> Any:
        output.retain_grad()
        captured.append(output)
        # the model goes on with a copy: CTRL scales its embeddings in place, which would
        # make the kept tensor (and its gradient) the scaled one, not the module's output
        return output.clone()

    hook = model.get_input_embeddings().register_forward_hook(keep)
    model.zero_grad(set_to_none=True)
    try:
        with torch.enable_grad():
            out = model(**inputs, output_hidden_states=True, return_dict=True)
            hidden = list(out.hidden_states)
            for h in hidden:
                if h.requires_grad:
                    h.retain_grad()
            outputs = {k: v for k, v in out.items() if torch.is_tensor(v)}
            shapes = {k: tuple(v.shape) for k, v in outputs.items()}
            loss = torch_loss(outputs, objective.terms(shapes, mask), dtype)
            loss.backward()
    finally:
        hook.remove()
    embeds = _grad(captured[0]) if captured else None
    if time_major and embeds is not None:
        embeds = embeds.swapaxes(0, 1)
    run = GradientRun(
        loss=float(loss.detach()),
        forward={f"hidden_states[{k}]": to_numpy(h) for k, h in enumerate(hidden)},
        hidden={f"hidden_states[{k}]": _grad(h) for k, h in enumerate(hidden)},
        inputs_embeds=embeds,
        weights={
            names(name): _grad(p) for name, p in model.named_parameters() if names(name) is not None
        },
    )
    run.frozen_rows = {
        names(f"{name}.weight"): int(module.padding_idx)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Embedding)
        and module.padding_idx is not None
        and names(f"{name}.weight") is not None
    }
    model.zero_grad(set_to_none=True)  # the gradients are numpy now: free them
    return run


def _grad(tensor: Any) -> np.ndarray | None:
    grad = tensor.grad
    return None if grad is None else to_numpy(grad).copy()
