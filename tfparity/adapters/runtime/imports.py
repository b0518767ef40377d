"""Import TensorFlow, tf-keras, transformers and torch quietly and lazily.

TensorFlow prints C++ log lines (CUDA stubs, CPU features) before its own logging is
configured, and transformers warns that its TF classes are deprecated. tfparity is
quiet by default: these helpers set the environment before the first import and
silence the noise, unless ``TFPARITY_DEBUG=1`` (set by ``--debug``).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import warnings
from typing import Any

from ...errors import TfparityError


def _debug() -> bool:
    return os.environ.get("TFPARITY_DEBUG") == "1"


def _set_quiet_environment() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if _debug() else "3")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "info" if _debug() else "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


@contextlib.contextmanager
def _stderr_silenced():
    """Redirect file descriptor 2 (C++ logs bypass Python's sys.stderr)."""
    if _debug():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector paused for one large import (then as it was).
    TensorFlow, transformers and torch create hundreds of thousands of objects on
    import, and the full collections those allocations trigger rescan them all, again
    and again, slowing every command's start. An import leaves little cyclic garbage."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def import_tf() -> Any:
    """Return the ``tensorflow`` module, imported quietly."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    _set_quiet_environment()
    try:
        with _stderr_silenced(), warnings.catch_warnings(), _collector_paused():
            warnings.simplefilter("ignore")
            import tensorflow as tf

            # A CUDA build of TensorFlow on a machine without a GPU (or driver) logs
            # "failed call to cuInit" on the first device query, from C++ and after
            # import: query once here, while fd 2 is still silenced. Physical devices
            # only: logical ones (and memory settings) are still to be configured.
            tf.config.list_physical_devices()
    except ImportError as exc:  # pragma: no cover - a broken installation
        raise TfparityError(
            f"TensorFlow could not be imported ({exc}). Install tfparity's "
            "dependencies: pip install tfparity"
        ) from exc
    tf.get_logger().setLevel("ERROR")
    return tf


def import_transformers() -> Any:
    """Return ``transformers`` with TF support, imported quietly."""
    import_tf()
    with _stderr_silenced(), warnings.catch_warnings(), _collector_paused():
        warnings.simplefilter("ignore")
        import transformers
    if _debug():
        transformers.logging.set_verbosity_debug()
    else:
        transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    if not _debug():
        warnings.filterwarnings("ignore", message=".*TensorFlow and JAX classes are deprecated.*")
        warnings.filterwarnings("ignore", category=UserWarning, module="tf_keras")
    return transformers


def import_torch() -> Any:
    """Return ``torch`` or explain how to install it (exit code 2)."""
    try:
        with _collector_paused():
            import torch
    except ImportError as exc:
        raise TfparityError(
            "PyTorch is needed for this (the PyTorch cross-check) but is not installed. "
            "Install the CPU build with: pip install torch==2.13.0 (or pass --no-pt)."
        ) from exc
    return torch


def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None
