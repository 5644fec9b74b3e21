"""``install()`` / ``uninstall()``: the accelerated functions patched into
the real ``librosa`` package, the way ``cudf.pandas`` or
``sklearnex.patch_sklearn`` accelerate a library in place.

Every module of librosa that holds one of the original functions (its
defining module, the package namespaces, and the modules that imported it,
such as ``librosa.onset`` importing ``melspectrogram``) gets the agl-fast
function instead, so ``import librosa``, ``import librosa.display`` and
librosa's internal calls all run accelerated. ``uninstall()`` puts every
original back.

The patching is lazy, as librosa's own imports are: ``install()`` imports
nothing. It patches the librosa modules already imported, then an import
hook (a finder first on :data:`sys.meta_path`, whose loader runs librosa's
own and then patches the module it executed) patches each librosa module as
the script imports it. The original of an accelerated name is recognised
where librosa defines it (the function of that name whose ``__module__`` is
the module being executed, inside the accelerated name's librosa package;
``librosa.core`` for the top-level names); from then on every librosa
module holding that object gets the agl-fast function. A module imported
before ``install()`` and one imported after end the same. Names that
librosa's lazy loader copies into a package namespace later read the
patched defining module, so they are agl-fast's too, and ``uninstall()``
puts librosa's back there as well.

The lazy packages (``librosa``, ``librosa.core``, ``librosa.feature``,
``librosa.util``: their names are imported on first lookup) get a lookup in
front of their lazy loader that serves the accelerated names they list, so
that a script's ``librosa.load`` or ``librosa.feature.mfcc`` is agl-fast's
without importing the librosa module that defines librosa's own
(``librosa.load`` alone imports scipy.signal and numba); librosa's is
imported the first time a call is handed to it. ``uninstall()`` puts the
lazy loader back and takes the names it served out again, so the lazy
loader finds librosa's.
"""

from __future__ import annotations

import _thread
import importlib
import importlib.util
import sys
from types import ModuleType

from ._coverage import ACCELERATED, ORIGINALS, log_debug

TYPE_CHECKING = False  # typing is not imported at run time (start-up cost)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["install", "installed", "uninstall"]

# Reentrant: patching a module imports agl-fast's kernels, whose import may
# pass through the hook again.
_lock = _thread.RLock()
#: (module, attribute, librosa's value or _ABSENT) of every patch, in order.
_PATCHES: list[tuple[ModuleType, str, Any]] = []
_ABSENT = object()
#: Short name ("mfcc") -> the accelerated names that end in it ("feature.mfcc").
_BY_NAME: dict[str, tuple[str, ...]] = {}
for _qual in ACCELERATED:
    _short = _qual.rpartition(".")[2]
    _BY_NAME[_short] = (*_BY_NAME.get(_short, ()), _qual)
#: librosa package -> (name, accelerated name) it serves: "librosa.feature"
#: serves "feature.mfcc"; "librosa" and "librosa.core" the top-level names.
_HOMES: dict[str, list[tuple[str, str]]] = {}
for _qual in ACCELERATED:
    _path, _, _short = _qual.rpartition(".")
    for _home in (f"librosa.{_path}",) if _path else ("librosa", "librosa.core"):
        _HOMES.setdefault(_home, []).append((_short, _qual))
#: Lazy librosa package -> its own ``__getattr__``, while ours is in front.
_LAZY: dict[str, Any] = {}
#: id(librosa's original) -> accelerated name, for the originals in ORIGINALS.
_BY_ID: dict[int, str] = {}
#: Accelerated name -> agl-fast's function, resolved on first patch.
_NEW: dict[str, Any] = {}
_state = {"active": False}


def _is_librosa(name: str) -> bool:
    return name == "librosa" or name.startswith("librosa.")


def _librosa_modules() -> list[ModuleType]:
    return [m for k, m in list(sys.modules.items()) if _is_librosa(k) and isinstance(m, ModuleType)]


def _compat_function(qual: str) -> Any:
    fn = _NEW.get(qual)
    if fn is None:
        path, _, name = qual.rpartition(".")
        module = importlib.import_module(str(__package__) + (f".{path}" if path else ""))
        fn = _NEW[qual] = getattr(module, name)
    return fn


def _definition(module: ModuleType, name: str, value: Any) -> str | None:
    """The accelerated name whose original ``value`` is, if ``module`` is
    where librosa defines it (None otherwise)."""
    here = module.__name__
    if getattr(value, "__module__", None) != here or getattr(value, "__name__", None) != name:
        return None
    for qual in _BY_NAME[name]:
        path = qual.rpartition(".")[0]
        package = "librosa." + (path or "core")
        if here == package or here.startswith(package + "."):
            return qual
    return None


def _serve_lazy_names(module: ModuleType) -> None:
    """Put a lookup in front of a lazy librosa package's ``__getattr__``:
    the accelerated names it lists are agl-fast's (imported on first
    lookup, then kept in its namespace), every other name is the lazy
    loader's as before."""
    names = {n: q for n, q in _HOMES.get(module.__name__, ()) if n not in module.__dict__}
    lazy = module.__dict__.get("__getattr__")
    if not names or lazy is None or module.__name__ in _LAZY:
        return
    listed = module.__dict__.get("__all__", ())
    names = {n: q for n, q in names.items() if n in listed}

    def __getattr__(name: str) -> Any:
        qual = names.get(name)
        if qual is None or name in module.__dict__:
            return lazy(name)
        with _lock:
            value = _compat_function(qual)
            _PATCHES.append((module, name, _ABSENT))
            setattr(module, name, value)
        return value

    _LAZY[module.__name__] = lazy
    _PATCHES.append((module, "__getattr__", lazy))
    module.__getattr__ = __getattr__  # type: ignore[method-assign]


def _patch(modules: list[ModuleType]) -> None:
    """Record the originals ``modules`` define, then patch every librosa
    module that holds one (all of them when a new original was found: a
    module that imported it during a circular import finished first)."""
    found = False
    for module in modules:
        _serve_lazy_names(module)
        space = module.__dict__
        for name in _BY_NAME.keys() & space.keys():
            value = space[name]
            if id(value) in _BY_ID:
                continue
            qual = _definition(module, name, value)
            if qual is not None and qual not in ORIGINALS:
                ORIGINALS[qual] = value
                _BY_ID[id(value)] = qual
                found = True
    for module in _librosa_modules() if found else modules:
        space = module.__dict__
        for name in _BY_NAME.keys() & space.keys():
            value = space[name]
            qual = _BY_ID.get(id(value))
            if qual is not None and ORIGINALS[qual] is value:
                _PATCHES.append((module, name, value))
                setattr(module, name, _compat_function(qual))
                log_debug("%s.%s patched", module.__name__, name)


def _executed(module: ModuleType) -> None:
    """The import hook's callback: ``module`` (librosa's) has just run."""
    with _lock:
        if _state["active"]:
            _patch([module])


class _PatchingLoader:
    """librosa's own loader, then :func:`_executed` on the module it ran.
    Every other attribute is the wrapped loader's; the module's
    ``__loader__`` and ``__spec__.loader`` are the wrapped loader."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        self._loader.exec_module(module)
        _executed(module)


class _LibrosaFinder:
    """First on :data:`sys.meta_path` while installed: finds librosa's
    modules with the finders after it and wraps their loader."""

    def __init__(self) -> None:
        self._searching: set[tuple[int, str]] = set()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        key = (_thread.get_ident(), fullname)
        if not _is_librosa(fullname) or key in self._searching:
            return None  # another finder that asks sys.meta_path asked again
        self._searching.add(key)
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._searching.discard(key)
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader)
        return spec


_FINDER = _LibrosaFinder()


def librosa_original(qual: str) -> Any:
    """librosa's own function behind the accelerated name ``qual`` while
    installed (None otherwise), importing the librosa module that defines
    it if the script has not: through the lazy loader of its package, as
    librosa's own lookup would, which the import hook then patches."""
    with _lock:
        if qual in ORIGINALS or not _state["active"]:
            return ORIGINALS.get(qual)
    path, _, name = qual.rpartition(".")
    home = importlib.import_module("librosa." + (path or "core"))
    lazy = _LAZY.get(home.__name__)
    if lazy is not None:
        lazy(name)
    return ORIGINALS.get(qual)


def installed() -> bool:
    """Whether :func:`install` is in effect."""
    return _state["active"]


def install() -> None:
    """Patch agl-fast's accelerated functions into the real ``librosa``.

    Imports nothing: the librosa modules already imported are patched now,
    each one imported later as it is imported. Idempotent. The names and
    the cases still handed to librosa are those of
    :func:`agl_fast.compat.librosa.coverage`.

    Raises
    ------
    NotAcceleratedError
        librosa is not installed.
    """
    with _lock:
        if _state["active"]:
            return
        if "librosa" not in sys.modules and importlib.util.find_spec("librosa") is None:
            from ...exceptions import NotAcceleratedError

            raise NotAcceleratedError(
                "install() patches librosa, which is not installed: pip install librosa"
            )
        _state["active"] = True
        sys.meta_path.insert(0, _FINDER)
        _patch(_librosa_modules())


def uninstall() -> None:
    """Put back every librosa function :func:`install` replaced, and
    librosa's own where its lazy loader copied agl-fast's."""
    with _lock:
        while _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
        for mod, name, before in reversed(_PATCHES):
            if before is _ABSENT:
                mod.__dict__.pop(name, None)
            else:
                setattr(mod, name, before)
        ours = {id(fn): qual for qual, fn in _NEW.items() if qual in ORIGINALS}
        for module in _librosa_modules():
            space = module.__dict__
            for name in _BY_NAME.keys() & space.keys():
                qual = ours.get(id(space[name]))
                if qual is not None and space[name] is _NEW[qual]:
                    setattr(module, name, ORIGINALS[qual])
        _PATCHES.clear()
        ORIGINALS.clear()
        _BY_ID.clear()
        _LAZY.clear()
        _state["active"] = False
