"""Subcommands of the tfparity CLI, one module each, each with register(sub)."""
