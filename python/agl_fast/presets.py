"""Feature recipes the seed papers depend on, each one call on a batch.

* ``bat``: the BAT / OWL SAGE binaural input.
* ``efficientat``: the EfficientAT ``mn`` models' eval-mode front end.
* ``librosa``: librosa's default log-mel (``melspectrogram`` +
  ``power_to_db(ref=1.0, top_db=80)``), per clip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from . import _native
from ._internal import args as _args
from ._internal.args import flag, opt_real, real
from ._internal.batch import Output, prepare_mono, prepare_stereo, run
from ._internal.config import resolve_threads
from .exceptions import ParameterError, ShapeError
from .features import logmel
from .plugins import load_plugins

__all__ = [
    "CHANNEL_POLICIES",
    "PRESETS",
    "Recipe",
    "bat",
    "binaural_input",
    "efficientat",
    "get_recipe",
    "librosa_logmel",
    "mono_input",
    "preset",
    "recipe_names",
    "register_recipe",
]

#: How a binaural recipe (``bat``) treats a clip that is not two-channel:
#: ``"refuse"`` (default: a :class:`ShapeError` naming the channel count)
#: or ``"mono-to-binaural"`` (a mono clip becomes two identical ears; other
#: counts are still refused). One rule for every entry point: ``curate
#: --features bat``, ``agl-fast features --preset bat`` and the API.
CHANNEL_POLICIES = ("refuse", "mono-to-binaural")


def binaural_input(y: np.ndarray, policy: str = "refuse", name: str = "clip") -> np.ndarray:
    """A clip as the ``[2, n]`` input of a binaural recipe, by ``policy``.

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (channels, n)]
        Audio.
    policy : {"refuse", "mono-to-binaural"}
        See :data:`CHANNEL_POLICIES`.
    name : str
        What to call the clip in an error message.

    Returns
    -------
    np.ndarray [shape=(2, n)]
        ``y`` itself when it has two channels; a mono clip duplicated under
        ``"mono-to-binaural"``.

    Raises
    ------
    ShapeError
        A clip that is not two-channel and that the policy does not convert.
    ParameterError
        An unknown policy.
    """
    if not isinstance(policy, str) or policy not in CHANNEL_POLICIES:
        raise ParameterError(
            f"channels policy must be one of {CHANNEL_POLICIES}, got policy={policy!r}"
        )
    name = _args.text("name", name)
    y = _args.array("y", y)
    if y.ndim == 0:
        raise ShapeError(f"y must be audio [n] or [channels, n], got a scalar {name}")
    channels = 1 if y.ndim == 1 else int(y.shape[0])
    if y.ndim == 2 and channels == 2:
        return y
    if y.ndim <= 2 and channels == 1 and policy == "mono-to-binaural":
        mono = y.reshape(-1)
        return np.ascontiguousarray(np.stack([mono, mono]))
    hint = " (--mono-to-binaural duplicates a mono clip)" if channels == 1 else ""
    raise ShapeError(
        f"the bat recipe needs two-channel (binaural) audio; {name} has {channels} channel(s){hint}"
    )


def mono_input(y: np.ndarray) -> np.ndarray:
    """A clip as the input of a mono recipe or tagger: its channel mean.

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (channels, n)]
        Audio.

    Returns
    -------
    np.ndarray [shape=(n,), dtype=float32]
        ``y`` itself when it is one channel; else ``y.mean(axis=0)`` in
        float32 (for two channels ``(a + b) * 0.5``: the same bits).

    Raises
    ------
    ShapeError
        ``y`` is not 1-D or 2-D.
    """
    y = _args.array("y", y)
    if y.ndim not in (1, 2):
        raise ShapeError(f"y must be audio [n] or [channels, n], got shape={list(y.shape)}")
    if y.ndim == 1:
        return y
    if y.ndim == 2 and y.shape[0] == 1:
        return y[0]
    if y.ndim == 2 and y.shape[0] == 2 and y.dtype == np.float32:
        out = np.add(y[0], y[1])
        out *= np.float32(0.5)
        return out
    return np.ascontiguousarray(y.mean(axis=0, dtype=np.float32))


def bat(
    y: Any,
    *,
    sr: float = 32000,
    n_fft: int = _native.PRESET_N_FFT,
    hop_length: int = 320,
    n_mels: int = 128,
    fmin: float = 50.0,
    fmax: float = 14000.0,
    amin: float = 1e-10,
    loudness_dbfs: float | None = None,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """BAT / OWL SAGE binaural features.

    Periodic Hann STFT (``n_fft`` 1024, hop 320 at 32 kHz, centred, reflect
    padding) of both channels; Slaney mel (128 bands, 50-14000 Hz);
    ``10 log10(max(mel @ |X|, 1e-10))`` of the **magnitude** per ear; and
    ``mel @ cos(IPD)``, ``mel @ sin(IPD)`` with ``IPD = phase(R) - phase(L)``.

    Parameters
    ----------
    y : np.ndarray [shape=(2, n) or (batch, 2, n)], list of ``[2, n_i]`` or Arrow
        Stereo audio at ``sr`` Hz (channel 0 = left).
    sr : float
        Sample rate in Hz (sets the mel bands; no resampling is done).
    loudness_dbfs : float or None
        If set (BAT uses -14), scale each clip, both channels by one gain, to
        this RMS level in dBFS first. Silent clips are left as they are.

    Returns
    -------
    np.ndarray [shape=(batch, 4, t, n_mels), dtype=float32]
        Channels: log-mel L (dB), log-mel R (dB), IPD cos, IPD sin.
        ``t = 1 + n // hop_length``.
    """
    prep = prepare_stereo(y, allow_copy=allow_copy)
    return run(
        _native.bat,
        prep,
        lambda t: (4, t, n_mels),
        output,
        recipe={
            "sr": real("sr", sr),
            "n_fft": n_fft,
            "hop_length": hop_length,
            "n_mels": n_mels,
            "fmin": real("fmin", fmin),
            "fmax": real("fmax", fmax),
            "amin": real("amin", amin),
            "loudness_dbfs": opt_real("loudness_dbfs", loudness_dbfs),
        },
        n_threads=resolve_threads(n_threads),
    )


def efficientat(
    y: Any,
    *,
    sr: float = 32000,
    n_fft: int = _native.PRESET_N_FFT,
    win_length: int = 800,
    hop_length: int = 320,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float = 15000.0,
    preemphasis: float = 0.97,
    n_threads: int | None = None,
    output: Output = "auto",
    allow_copy: bool = True,
) -> Any:
    """EfficientAT (``mn`` models, eval mode) log-mel input.

    Pre-emphasis ``y'[n] = y[n+1] - 0.97 y[n]``; STFT with a symmetric
    Hann(800) centred in ``n_fft`` 1024, hop 320, centred with reflect
    padding; power spectrum; Kaldi mel banks (128, 0-15000 Hz); then
    ``(ln(mel + 1e-5) + 4.5) / 5``.

    Parameters
    ----------
    y : np.ndarray [shape=(n,) or (batch, n)], list of 1-D arrays, or Arrow
        Mono audio at ``sr`` Hz (32 kHz for the released models).

    Returns
    -------
    np.ndarray [shape=(batch, n_mels, t), dtype=float32]
        ``t = 1 + (n - 1) // hop_length``. Add the channel axis
        (``x[:, None]``) for the model's ``[batch, 1, 128, t]`` input.
    """
    prep = prepare_mono(y, allow_copy=allow_copy)
    return run(
        _native.efficientat,
        prep,
        lambda t: (n_mels, t),
        output,
        recipe={
            "sr": real("sr", sr),
            "n_fft": n_fft,
            "win_length": win_length,
            "hop_length": hop_length,
            "n_mels": n_mels,
            "fmin": real("fmin", fmin),
            "fmax": real("fmax", fmax),
            "preemphasis": real("preemphasis", preemphasis),
        },
        n_threads=resolve_threads(n_threads),
    )


def librosa_logmel(
    y: Any,
    *,
    sr: float = 22050,
    n_threads: int | None = None,
    output: Output = "auto",
    **kwargs: Any,
) -> Any:
    """librosa's default log-mel: :func:`agl_fast.logmel` with librosa's
    defaults (``n_fft`` 2048, hop 512, 128 Slaney bands, power 2,
    ``ref=1.0``, ``top_db=80``), per clip.

    Returns
    -------
    np.ndarray [shape=(batch, 128, t), dtype=float32]
    """
    return logmel(y, sr=sr, n_threads=n_threads, output=output, **kwargs)


@dataclass(frozen=True)
class Recipe:
    """A feature recipe: what it takes and the function that computes it.

    Attributes
    ----------
    name : str
        Registry key (``--features`` of ``curate``, ``--preset`` of
        ``features``).
    channels : {"mono", "binaural"}
        Its input: the channel mean of each clip (:func:`mono_input`), or
        two ears (:func:`binaural_input`, under the caller's channel policy).
    run : callable
        ``run(batch, *, sr, n_threads, output, **options)``: a list of
        clips in, one array per clip out (``output="list"``).
    help : str
        One line for ``--help``.
    """

    name: str
    channels: Literal["mono", "binaural"]
    run: Callable[..., Any]
    help: str

    def prepare(self, y: np.ndarray, policy: str = "refuse", name: str = "clip") -> np.ndarray:
        """One clip as this recipe's input (the one channel rule of every
        entry point).

        Parameters
        ----------
        y : np.ndarray [shape=(n,) or (channels, n)]
            Audio.
        policy : {"refuse", "mono-to-binaural"}
            For a binaural recipe: see :data:`CHANNEL_POLICIES`.
        name : str
            What to call the clip in an error message.

        Returns
        -------
        np.ndarray [shape=(2, n) or (n,), dtype=float32]
        """
        if self.channels == "binaural":
            return binaural_input(y, policy, name)
        return mono_input(y)


_RECIPES: dict[str, Recipe] = {}


def register_recipe(recipe: Recipe, *, replace: bool = False) -> Recipe:
    """Add ``recipe`` to the registry (see :mod:`agl_fast.plugins`).

    Raises
    ------
    ParameterError
        The name is taken (unless ``replace``), or the recipe is malformed.
    """
    if not isinstance(recipe, Recipe):
        raise ParameterError(f"register_recipe takes a Recipe, got {type(recipe).__name__}")
    if not recipe.name.isidentifier() or recipe.name == "none":
        raise ParameterError(f"a recipe name must be an identifier (not 'none'): {recipe.name!r}")
    if recipe.channels not in ("mono", "binaural"):
        raise ParameterError(f"channels must be 'mono' or 'binaural', got {recipe.channels!r}")
    replace = flag("replace", replace)
    if recipe.name in _RECIPES and not replace:
        raise ParameterError(f"a recipe named {recipe.name!r} is registered already")
    _RECIPES[recipe.name] = recipe
    return recipe


def recipe_names() -> list[str]:
    """Names of the registered recipes (plugins included), sorted."""
    load_plugins()
    return sorted(_RECIPES)


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``.

    Raises
    ------
    ParameterError
        No such recipe; the message lists the registered ones.
    """
    load_plugins()
    found = _RECIPES.get(name) if isinstance(name, str) else None
    if found is None:
        raise ParameterError(f"unknown preset name={name!r}; choose one of {sorted(_RECIPES)}")
    return found


class _PresetFunctions(Mapping[str, Callable[..., Any]]):
    """The registry as ``name -> function`` (:data:`PRESETS`)."""

    def __getitem__(self, name: str) -> Callable[..., Any]:
        if name not in _RECIPES:
            load_plugins()
        return _RECIPES[name].run

    def __iter__(self) -> Iterator[str]:
        load_plugins()
        return iter(sorted(_RECIPES))

    def __len__(self) -> int:
        load_plugins()
        return len(_RECIPES)


#: The registered recipes' functions by name (a live view of the registry).
PRESETS: Mapping[str, Callable[..., Any]] = _PresetFunctions()

register_recipe(Recipe("bat", "binaural", bat, "BAT / OWL SAGE binaural log-mel + IPD"))
register_recipe(Recipe("efficientat", "mono", efficientat, "EfficientAT mn log-mel input"))
register_recipe(Recipe("librosa", "mono", librosa_logmel, "librosa's default log-mel (dB)"))


def preset(name: str, y: Any, **kwargs: Any) -> Any:
    """Run the registered recipe called ``name`` (``'bat'``,
    ``'efficientat'``, ``'librosa'`` or a plugin's) on ``y``; keyword
    arguments go to that recipe."""
    return get_recipe(name).run(y, **kwargs)
