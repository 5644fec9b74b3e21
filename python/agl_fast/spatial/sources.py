"""Dry (anechoic) source signals for on-the-fly spatial training.

:class:`SourceBank` draws mono clips of a fixed length from several kinds of
source, each with a train and a test part that share nothing:

* the synthetic events of :func:`agl_fast.spatial.dataset.synthetic_event`
  (tone, noise burst, chirp, click train), drawn afresh for every clip (the
  two parts differ only by their random streams);
* ``speech``: utterances synthesised with ``espeak-ng`` (when it is
  installed); train and test use different sentences and different voices;
* ``recording``: random segments of user recordings (mono, resampled to
  ``sr``); the first 80 % of each recording feeds the train part and the
  last 20 % the test part.

Every clip is drawn from a :class:`numpy.random.Generator` the caller owns,
so a sequence of clips is reproducible.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..exceptions import ParameterError
from .dataset import SYNTHETIC_EVENTS, synthetic_event
from .defaults import SR

__all__ = ["SourceBank", "espeak_utterances"]

_TRAIN_SENTENCES = (
    "The kettle is boiling in the kitchen, bring two cups please.",
    "Turn left at the old church and walk until you reach the river.",
    "Seven green bottles were standing on the garden wall this morning.",
    "Could you close the window, the wind is blowing the papers away?",
    "Our train leaves at a quarter past nine from platform four.",
    "She painted the little boat blue and sailed it across the lake.",
    "Every evening the birds gather in the tall trees behind the school.",
    "Please remember to water the tomatoes before you go to bed.",
    "A heavy truck rumbled past the bakery and rattled the glass.",
    "He counted one, two, three, four, five and then opened the door.",
    "The market sells fresh bread, cheese, olives and ripe figs.",
    "Listen carefully, the next announcement concerns all passengers.",
)
_TEST_SENTENCES = (
    "The museum opens at ten and closes early on Sundays.",
    "Bring a warm coat, the mountain path gets cold after sunset.",
    "Five children were laughing loudly by the fountain in the square.",
    "Is this the road to the harbour, or should we turn back?",
)
_TRAIN_VOICES = ("en-gb", "en-us+m3", "en-gb+f2", "en-us+f4", "en-gb-scotland", "en+m5")
_TEST_VOICES = ("en-us+m1", "en-gb+f3", "en-029")


def espeak_utterances(
    sentences: Sequence[str], voices: Sequence[str], *, sr: int = SR
) -> list[np.ndarray]:
    """Every sentence spoken by every voice with ``espeak-ng``.

    Parameters
    ----------
    sentences : sequence of str
        Texts to speak.
    voices : sequence of str
        ``espeak-ng`` voice names (``language[+variant]``).
    sr : int
        Output sample rate in Hz.

    Returns
    -------
    list of np.ndarray [shape=(n_i,), dtype=float32]
        Mono utterances at ``sr``; empty if ``espeak-ng`` is not installed.
    """
    exe = shutil.which("espeak-ng")
    if exe is None:
        return []
    from ..audio import load

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, voice in enumerate(voices):
            for j, text in enumerate(sentences):
                path = Path(tmp) / f"{i}_{j}.wav"
                speed = 140 + 15 * ((i + j) % 4)
                cmd = [exe, "-v", voice, "-s", str(speed), "-w", str(path), text]
                done = subprocess.run(cmd, capture_output=True, check=False)
                if done.returncode or not path.is_file():
                    continue
                y, _ = load(path, sr=sr, mono=True)
                if y.size:
                    out.append(np.asarray(y, dtype=np.float32))
    return out


class SourceBank:
    """Mono source clips of ``seconds`` at ``sr``, one part per split.

    Parameters
    ----------
    seconds : float
        Clip length in seconds.
    sr : int
        Sample rate in Hz.
    recordings : sequence of path-like
        Long recordings to cut segments from (optional).
    speech : bool
        Synthesise speech with ``espeak-ng`` if it is installed.
    """

    def __init__(
        self,
        seconds: float,
        *,
        sr: int = SR,
        recordings: Sequence[str | Path] = (),
        speech: bool = True,
    ) -> None:
        from ..audio import load

        self.sr = sr
        self.n = round(seconds * sr)
        self.speech: dict[str, list[np.ndarray]] = {"train": [], "test": []}
        if speech:
            self.speech["train"] = espeak_utterances(_TRAIN_SENTENCES, _TRAIN_VOICES, sr=sr)
            self.speech["test"] = espeak_utterances(_TEST_SENTENCES, _TEST_VOICES, sr=sr)
        self.recordings: dict[str, list[np.ndarray]] = {"train": [], "test": []}
        for path in recordings:
            y, _ = load(path, sr=sr, mono=True)
            cut = int(0.8 * y.size)
            for split, part in (("train", y[:cut]), ("test", y[cut:])):
                if part.size > self.n:
                    self.recordings[split].append(np.asarray(part, dtype=np.float32))
        self.kinds: tuple[str, ...] = SYNTHETIC_EVENTS
        if self.speech["train"] and self.speech["test"]:
            self.kinds += ("speech",)
        if self.recordings["train"] and self.recordings["test"]:
            self.kinds += ("recording",)

    def _segment(self, pool: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
        # A few tries for a segment that is not (nearly) silent.
        best = np.zeros(self.n, dtype=np.float32)
        for _ in range(4):
            y = pool[int(rng.integers(len(pool)))]
            if y.size <= self.n:
                seg = np.zeros(self.n, dtype=np.float32)
                start = int(rng.integers(0, self.n - y.size + 1))
                seg[start : start + y.size] = y
            else:
                start = int(rng.integers(0, y.size - self.n + 1))
                seg = y[start : start + self.n]
            if float(np.mean(seg**2)) > 1e-6:
                return seg
            best = seg
        return best

    def draw(self, rng: np.random.Generator, split: str = "train") -> tuple[np.ndarray, str]:
        """One clip ``[seconds * sr]`` float32 and its kind.

        The kind is uniform over :attr:`kinds`.
        """
        if split not in ("train", "test"):
            raise ParameterError(f"split must be 'train' or 'test', got {split!r}")
        kind = self.kinds[int(rng.integers(len(self.kinds)))]
        if kind == "speech":
            y = self._segment(self.speech[split], rng)
        elif kind == "recording":
            y = self._segment(self.recordings[split], rng)
        else:
            y = synthetic_event(kind, rng, self.sr, self.n / self.sr)
        return np.asarray(y, dtype=np.float32), kind
