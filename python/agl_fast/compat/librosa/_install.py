"""``install()`` / ``uninstall()``: the accelerated functions patched into
the real ``librosa`` package, the way ``cudf.pandas`` or
``sklearnex.patch_sklearn`` accelerate a library in place.

Every module of librosa that holds one of the original functions (its
defining module, the package namespaces, and the modules that imported it,
such as ``librosa.onset`` importing ``melspectrogram``) gets the agl-fast
function instead, so ``import librosa``, ``import librosa.display`` and
librosa's internal calls all run accelerated. ``uninstall()`` puts every
original back.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from types import ModuleType
from typing import Any

from ._coverage import ACCELERATED
from ._fallback import ORIGINALS, SUBMODULES

__all__ = ["install", "installed", "uninstall"]

_log = logging.getLogger("agl_fast.compat.librosa")
_lock = threading.Lock()
#: (module, attribute, original value, whether the attribute was in the
#: module's namespace before) of every patch, in order.
_PATCHES: list[tuple[ModuleType, str, Any, bool]] = []
_ABSENT = object()


def _import_librosa() -> ModuleType:
    try:
        import librosa
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from ...exceptions import NotAcceleratedError

        raise NotAcceleratedError(
            "install() patches librosa, which is not installed: pip install librosa"
        ) from exc
    for sub in SUBMODULES:
        try:
            importlib.import_module(f"librosa.{sub}")
        except ImportError as exc:  # e.g. librosa.display without matplotlib
            _log.debug("librosa.%s not patched: %s", sub, exc)
    return librosa


def _compat_function(qual: str) -> Any:
    path, _, name = qual.rpartition(".")
    module = importlib.import_module(str(__package__) + (f".{path}" if path else ""))
    return module.__dict__[name]


def installed() -> bool:
    """Whether :func:`install` is in effect."""
    return bool(_PATCHES)


def install() -> None:
    """Patch agl-fast's accelerated functions into the real ``librosa``.

    Idempotent. The names and the cases still handed to librosa are those of
    :func:`agl_fast.compat.librosa.coverage`.

    Raises
    ------
    NotAcceleratedError
        librosa is not installed.
    """
    with _lock:
        if _PATCHES:
            return
        librosa = _import_librosa()
        for qual in ACCELERATED:
            path, _, name = qual.rpartition(".")
            home = importlib.import_module("librosa" + (f".{path}" if path else ""))
            original = getattr(home, name)
            new = _compat_function(qual)
            ORIGINALS[qual] = original
            targets = {id(home): home, id(librosa): librosa} if not path else {id(home): home}
            if not path:
                targets[id(librosa.core)] = librosa.core
            for mod in list(sys.modules.values()):
                if isinstance(mod, ModuleType) and (mod.__name__ or "").startswith("librosa"):
                    if mod.__dict__.get(name) is original:
                        targets[id(mod)] = mod
            for mod in targets.values():
                before = mod.__dict__.get(name, _ABSENT)
                _PATCHES.append((mod, name, before, before is not _ABSENT))
                setattr(mod, name, new)
        _log.debug("librosa patched: %d places for %d functions", len(_PATCHES), len(ACCELERATED))


def uninstall() -> None:
    """Put back every librosa function :func:`install` replaced."""
    with _lock:
        for mod, name, before, present in reversed(_PATCHES):
            if present:
                setattr(mod, name, before)
            else:
                mod.__dict__.pop(name, None)
        _PATCHES.clear()
        ORIGINALS.clear()
