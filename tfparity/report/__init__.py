"""Reports and their renderings (text, JSON); numpy-free and framework-free."""

from ..results import Divergence, Report

__all__ = ["Divergence", "Report"]
