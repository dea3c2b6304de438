"""The API's service modules as the API bench scripts reach them in whichever tree they measure:
``service`` (the service's command line) and ``shared`` (the one connection the API's calls
share), which a tree from before ``api/shared.py`` kept in ``service`` itself."""

from __future__ import annotations

from processkit.api import service

try:
    from processkit.api import shared
except ImportError:  # a tree from before api/shared.py, whose service module started the service
    shared = service  # type: ignore[assignment]

__all__ = ["service", "shared"]
