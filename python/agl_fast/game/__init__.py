"""The listening game: people guess where clips were recorded, next to the models.

``agl-fast serve`` runs it; :func:`create_app` builds the ASGI application
for any ASGI server. Needs the ``game`` extra (starlette, uvicorn,
sqlalchemy); the names below load on first use, so that the ``agl-fast``
command works without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import GameConfig, create_app
    from .board import export_guesses
    from .clips import Catalogue, Clip, load_catalogue, write_demo
    from .db import SCHEMA_VERSION, make_engine, migrate

_WHERE = {
    "GameConfig": "app",
    "create_app": "app",
    "export_guesses": "board",
    "Catalogue": "clips",
    "Clip": "clips",
    "load_catalogue": "clips",
    "write_demo": "clips",
    "SCHEMA_VERSION": "db",
    "make_engine": "db",
    "migrate": "db",
}

__all__ = [
    "SCHEMA_VERSION",
    "Catalogue",
    "Clip",
    "GameConfig",
    "create_app",
    "export_guesses",
    "load_catalogue",
    "make_engine",
    "migrate",
    "write_demo",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
