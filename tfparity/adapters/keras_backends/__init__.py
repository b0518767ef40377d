"""One Keras 3 model on each Keras backend (TensorFlow, JAX, PyTorch), one process each.

Keras fixes its backend when it is first imported (``KERAS_BACKEND``), so a model runs
on three backends only in three processes. :mod:`.worker` is what runs inside one;
:mod:`.launch` starts them from the parent and reads back what they recorded; the
judging is framework-free, in :mod:`tfparity.cross_backend.judge`.
"""

from .launch import (
    BACKENDS,
    BackendRun,
    LaunchPlan,
    choose_backends,
    choose_referee,
    installed,
    pip_command,
    run_backends,
)

__all__ = [
    "BACKENDS",
    "BackendRun",
    "LaunchPlan",
    "choose_backends",
    "choose_referee",
    "installed",
    "pip_command",
    "run_backends",
]
