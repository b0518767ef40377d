"""Fixtures the Hugging Face TF side's tests share."""

from __future__ import annotations

from collections.abc import Callable

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
