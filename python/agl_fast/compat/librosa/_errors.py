"""Errors and warnings of the compatibility layer, in librosa's classes.

Inside :mod:`agl_fast.compat.librosa` a parameter error is an instance of
both :class:`agl_fast.exceptions.ParameterError` (or the subclass the core
raised) and ``librosa.util.exceptions.ParameterError`` when librosa is
importable, so ``except librosa.ParameterError`` keeps working after
``import agl_fast.compat.librosa as librosa``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ...exceptions import AglError, AudioDecodeError, ParameterError
from ._coverage import ACCELERATED, record_call

F = TypeVar("F", bound=Callable[..., Any])


class HandOver(Exception):
    """Raised inside an accelerated function, before it has computed or
    written anything, for a call that librosa must answer itself (an
    argument of a type or value the native path does not take, a
    behaviour of the followed librosa release it does not implement).
    :func:`librosa_api` catches it and makes the same call on librosa's own
    function, counted with :attr:`reason` in ``coverage()``; librosa then
    returns its own result or raises its own error."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@functools.cache
def _librosa_parameter_error() -> type[Exception] | None:
    try:
        from librosa.util.exceptions import ParameterError as LibrosaParameterError
    except ImportError:
        return None
    return LibrosaParameterError


_DUAL: dict[type[ParameterError], type[ParameterError]] = {}


def dual_class(cls: type[ParameterError]) -> type[ParameterError]:
    """``cls`` combined with librosa's ``ParameterError`` (``cls`` itself
    when librosa is not importable); one class per ``cls``."""
    base = _librosa_parameter_error()
    if base is None or issubclass(cls, base):
        return cls
    if cls not in _DUAL:
        _DUAL[cls] = type(cls.__name__, (cls, base), {"__module__": __name__})
    return _DUAL[cls]


def as_librosa(exc: ParameterError) -> ParameterError:
    """``exc`` re-raised as an instance of librosa's class too."""
    cls = dual_class(type(exc))
    if cls is type(exc):
        return exc
    new = cls(*exc.args)
    new.__cause__ = exc.__cause__
    return new


#: Builtin errors that a bad argument raises on its way through numpy,
#: scipy or librosa's own code (a string where a number goes, a zero
#: rate...): :func:`librosa_api` gives them the package's type.
#: ``NotImplementedError`` is scipy.ndimage's answer to an input dtype it has
#: no filter for (``pcen(ref=["a"])``).
ARGUMENT_ERRORS: tuple[type[Exception], ...] = (
    TypeError,
    ValueError,
    ArithmeticError,
    IndexError,
    AttributeError,
    NotImplementedError,
)

_ARGUMENT_CLASSES: dict[type[BaseException], type[ParameterError]] = {}


def argument_error(name: str, exc: BaseException) -> ParameterError:
    """``exc`` (a builtin error, or librosa's ``ParameterError``, raised for
    a bad argument of ``name``) as a typed error that is still an instance
    of its own class, so ``except TypeError`` or ``except
    librosa.ParameterError`` keep catching it.

    Parameters
    ----------
    name : str
        The librosa name that was called.
    exc : BaseException
        The error raised inside it.

    Returns
    -------
    ParameterError
        An instance of :class:`agl_fast.exceptions.ParameterError`, of
        librosa's class when librosa is importable, and of ``type(exc)``.
    """
    base = dual_class(ParameterError)
    kind = type(exc)
    if kind not in _ARGUMENT_CLASSES and issubclass(base, kind):
        _ARGUMENT_CLASSES[kind] = base
    if kind not in _ARGUMENT_CLASSES:
        _ARGUMENT_CLASSES[kind] = _combined(base, kind)
    return _ARGUMENT_CLASSES[kind](f"{name}: invalid argument ({kind.__name__}: {exc})")


#: The file errors of librosa's readers met so far, as typed classes.
_READ_CLASSES: dict[type[BaseException], type[AudioDecodeError]] = {}

#: librosa names whose hand-over reads a file.
_READERS = ("load", "get_duration")


def read_error(name: str, exc: BaseException) -> AudioDecodeError:
    """``exc`` (an ``OSError`` or ``RuntimeError`` of the reader librosa used
    for a file it was handed) as an :class:`AudioDecodeError` that is still
    an instance of its own class (``except FileNotFoundError`` keeps
    catching it)."""
    kind = type(exc)
    if kind not in _READ_CLASSES:
        _READ_CLASSES[kind] = _combined(AudioDecodeError, kind)
    return _READ_CLASSES[kind](f"{name}: cannot read the file ({kind.__name__}: {exc})")


def _combined(base: type[Any], kind: type[BaseException]) -> type[Any]:
    """A class that is both ``base`` and ``kind``, whose message is the one
    it is built with (``kind``'s own ``__str__`` may read attributes that
    only its own constructor sets, as numpy's ``UFuncTypeError`` does);
    ``base`` alone when the two cannot be combined."""
    if issubclass(base, kind):
        return base
    body = {"__module__": __name__, "__str__": Exception.__str__, "__repr__": Exception.__repr__}
    try:
        return type(kind.__name__, (base, kind), body)
    except TypeError:
        return base


def librosa_api(fn: F) -> F:
    """Decorator: a :class:`ParameterError` leaving ``fn`` is also librosa's;
    each call is counted (:func:`agl_fast.compat.librosa.coverage`); a
    :class:`HandOver` raised by ``fn`` sends the call to librosa."""

    where = fn.__module__.removeprefix(str(__package__)).lstrip(".")
    name = f"{where}.{fn.__name__}" if where else fn.__name__
    if where.startswith("_"):  # a private module: the librosa name it serves
        name = next(q for q in ACCELERATED if q.rpartition(".")[2] == fn.__name__)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        record_call(name)
        try:
            try:
                return fn(*args, **kwargs)
            except HandOver as over:
                from ._fallback import handed_over

                return handed_over(name, over.reason)(*args, **kwargs)
        except ParameterError as exc:
            converted = as_librosa(exc)
            if converted is exc:
                raise
            raise converted.with_traceback(exc.__traceback__) from exc.__cause__
        except ARGUMENT_ERRORS as exc:
            raise argument_error(name, exc) from exc
        except Exception as exc:
            librosa_error = _librosa_parameter_error()
            if librosa_error is not None and isinstance(exc, librosa_error):
                raise argument_error(name, exc) from exc
            if (
                name in _READERS
                and isinstance(exc, (OSError, RuntimeError, EOFError))
                and not isinstance(exc, AglError)  # the native reader's own, already typed
            ):
                raise read_error(name, exc) from exc
            raise

    return wrapper  # type: ignore[return-value]
