"""Plugin modules: where recipes, quality filters, taggers and stages added
outside the package are imported from.

A plugin is a plain module that registers what it adds when imported (with
:func:`agl_fast.presets.register_recipe`,
:func:`agl_fast.quality_filters.register_filter`,
:func:`agl_fast.tagging.register_tagger` or
:func:`agl_fast.pipeline.register_stage`). They are found in three places,
in this order:

* the ``agl_fast.plugins`` entry-point group of installed distributions;
* ``AGL_FAST_PLUGINS``, a comma-separated list of module names;
* ``agl-fast --plugin MODULE`` (repeatable), which adds to that variable so
  that the curation workers, forked or spawned, load the same modules.

Every registry calls :func:`load_plugins` before it answers, so a worker
process sees what its parent saw. The installed distributions' entry points
are scanned once per process (scanning them reads the metadata of every
installed distribution, several milliseconds, which a registry lookup on
every call must not pay): a distribution installed after that scan is seen
after :func:`refresh_plugins`. The environment variable is read on every
call (a dictionary lookup), so :func:`add_plugin` and a variable set later
take effect at once. A plugin that fails to import is a
:class:`~agl_fast.exceptions.ParameterError` naming it, never a silent
omission: the failing scan is not recorded as done, so every later lookup
raises again.
"""

from __future__ import annotations

import importlib
import logging
import os
from importlib.metadata import entry_points

from .exceptions import ParameterError

__all__ = ["ENTRY_POINT_GROUP", "ENV_VAR", "add_plugin", "load_plugins", "refresh_plugins"]

_LOG = logging.getLogger(__name__)

#: Entry-point group whose modules are imported as plugins.
ENTRY_POINT_GROUP = "agl_fast.plugins"
#: Environment variable with comma-separated plugin module names.
ENV_VAR = "AGL_FAST_PLUGINS"

_loaded: set[str] = set()
#: Whether this process has scanned the entry points, and the value of
#: :data:`ENV_VAR` it last imported in full.
_scan = {"entry_points": False, "env": ""}


def _import(name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception as exc:
        raise ParameterError(f"plugin {name!r} could not be imported: {exc}") from exc
    _LOG.debug("loaded plugin %s", name)


def load_plugins() -> list[str]:
    """Import every plugin not imported yet.

    The entry points are scanned on the first call of the process only (see
    :func:`refresh_plugins`); :data:`ENV_VAR` is read on every call.

    Returns
    -------
    list of str
        The module names imported by this call (empty when nothing new).
    """
    new: list[str] = []
    if not _scan["entry_points"]:
        new.extend(_load_entry_points())
        _scan["entry_points"] = True
    env = os.environ.get(ENV_VAR, "")
    if env != _scan["env"]:
        for name in env.split(","):
            name = name.strip()
            if name and name not in _loaded:
                _import(name)
                _loaded.add(name)
                new.append(name)
        _scan["env"] = env
    return new


def refresh_plugins() -> list[str]:
    """Scan the installed distributions' entry points again and import the
    plugins that are new (after ``pip install`` of a plugin into a running
    process).

    Returns
    -------
    list of str
        The module names imported by this call.
    """
    _scan["entry_points"] = False
    return load_plugins()


def _load_entry_points() -> list[str]:
    new = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        key = f"ep:{ep.name}={ep.value}"
        if key not in _loaded:
            try:
                ep.load()
            except Exception as exc:
                raise ParameterError(f"plugin entry point {ep.name!r} failed: {exc}") from exc
            _loaded.add(key)
            new.append(ep.value)
    return new


def add_plugin(name: str) -> None:
    """Import plugin module ``name`` now and record it in
    :data:`ENV_VAR`, so that processes started from here import it too."""
    present = [n for n in os.environ.get(ENV_VAR, "").split(",") if n.strip()]
    if name not in present:
        os.environ[ENV_VAR] = ",".join([*present, name])
    load_plugins()
