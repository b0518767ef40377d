"""Fixtures the Hugging Face TF side's tests share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tfparity.inputs import InputOptions
from tfparity.results import Report


@pytest.fixture
def crosscheck_dir() -> Callable[[str], Report]:
    """The cross-check of a checkpoint directory against itself (TF port vs PyTorch), on
    two random rows of 8 tokens, without the reload pass."""

    def check(directory: str) -> Report:
        from tfparity.api import crosscheck

        (report,) = crosscheck(
            directory, pt=directory, inputs=InputOptions(random=2, seq_len=8), reload=False
        )
        return report

    return check


@pytest.fixture(scope="session")
def save_tiny() -> Callable[[Any, Path], str]:
    """Save a seeded PyTorch model with the tiny tokenizer, as a user saves a checkpoint;
    the directory's path."""

    def save(model: Any, directory: Path) -> str:
        from tfparity.adapters.sources.tiny import tiny_tokenizer

        model.save_pretrained(directory, safe_serialization=True)
        tiny_tokenizer().save_pretrained(directory)
        return str(directory)

    return save
