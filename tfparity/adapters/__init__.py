"""Adapters: framework and architecture specifics (TF, torch) behind small interfaces."""
