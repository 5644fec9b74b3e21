"""librosa through agl-fast: a drop-in that never stops a script.

``import agl_fast.compat.librosa as librosa`` gives every librosa name and
submodule. The accelerated functions (:func:`coverage` lists them; the
table of docs/compat-librosa.md is generated from the same table) run on
agl-fast with librosa's own signatures, defaults, dtypes, warnings and errors; every other
name is librosa's own object, taken from the installed package, so a script
goes on where agl-fast has no kernel. Without librosa installed, those names
raise :class:`~agl_fast.exceptions.NotAcceleratedError` naming
``pip install librosa``.

:func:`install` patches the accelerated functions into the real ``librosa``
package (``uninstall()`` undoes it), so code that imports ``librosa`` and
librosa's own internal calls run accelerated too; ``python -m
agl_fast.compat.librosa script.py`` runs a script that way and
``agl_fast.compat.librosa.pytest_plugin`` does it for a test suite.

Parameter errors are instances of :class:`agl_fast.exceptions.ParameterError`
and, when librosa is importable, of ``librosa.util.exceptions.ParameterError``
(see :mod:`._errors`). Where agl-fast has no equivalent of an option (a
``res_type`` other than ``polyphase``, soxr's included, an input that is not
a file path, a container the decoder does not read), the call is handed to
librosa itself, counted in :func:`coverage` with its reason and logged at
DEBUG.
"""

from __future__ import annotations

import importlib

from ._coverage import ACCELERATED, Coverage, coverage, reset_counters
from ._fallback import librosa_object, make_submodule
from ._install import install, installed, uninstall

TYPE_CHECKING = False  # typing is not imported at run time (start-up cost)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Coverage",
    "amplitude_to_db",
    "beat",
    "core",
    "coverage",
    "decompose",
    "display",
    "effects",
    "feature",
    "filters",
    "get_duration",
    "install",
    "installed",
    "istft",
    "load",
    "onset",
    "pcen",
    "power_to_db",
    "resample",
    "reset_counters",
    "segment",
    "sequence",
    "stft",
    "to_mono",
    "uninstall",
    "util",
]

#: Submodules that are files of this package (the others are made below).
_FILES = ("feature", "filters")


def __getattr__(name: str) -> Any:
    """The top-level functions (:mod:`._toplevel`, imported on first use),
    the ``feature`` and ``filters`` submodules, then librosa's own objects."""
    if name == "__version__":
        # the installed librosa's version, as ``librosa.__version__``
        from . import _version

        if _version.TEXT is None:
            raise AttributeError(name)
        globals()[name] = _version.TEXT
        return _version.TEXT
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _FILES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        top = importlib.import_module(f"{__name__}._toplevel")
        if not hasattr(top, name):
            return librosa_object("", name)
        value = getattr(top, name)
    globals()[name] = value
    return value


# librosa's other public submodules: librosa's own objects, plus the
# accelerated names (each imported from the module named, on first use);
# librosa.core also exposes the accelerated top-level names
core = make_submodule(__name__, "core", {q: "._toplevel" for q in ACCELERATED if "." not in q})
beat = make_submodule(__name__, "beat", {})
decompose = make_submodule(__name__, "decompose", {})
display = make_submodule(__name__, "display", {})
effects = make_submodule(__name__, "effects", {"split": "._effects", "trim": "._effects"})
onset = make_submodule(
    __name__, "onset", {"onset_strength": "._onset", "onset_strength_multi": "._onset"}
)
segment = make_submodule(__name__, "segment", {})
sequence = make_submodule(__name__, "sequence", {})
util = make_submodule(__name__, "util", {"normalize": "._utility"})
