"""The installed toolkeep's version, in a module of its own so that what names it (the MCP
server, a kept state's fingerprint) need not import the whole package."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("toolkeep")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
