"""tfparity.adapters.runtime.imports: quiet, lazy framework imports."""

from __future__ import annotations

import gc

import pytest

from tfparity.adapters.runtime.imports import _collector_paused


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_for_an_import_then_left_as_it_was(enabled):
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with _collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(ImportError), _collector_paused():
            import tfparity_no_such_module  # noqa: F401
        assert gc.isenabled() is enabled  # restored when the import fails too
    finally:
        gc.enable() if was else gc.disable()
