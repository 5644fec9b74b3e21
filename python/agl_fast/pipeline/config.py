"""What one curation batch computes: :class:`BatchConfig`, its defaults and
the one validation of its options."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._internal.onnx import DEVICES
from ..exceptions import ParameterError
from ..presets import CHANNEL_POLICIES, get_recipe
from ..quality_filters import check_thresholds, defaults
from ..tagging.registry import get_tagger
from ..tagging.windows import DEFAULT_FRACTION_SCHEME, FRACTION_SCHEMES
from .stages import check_requested

__all__ = ["DEFAULT_MIN_DURATION", "LONG_CLIPS", "BatchConfig"]

#: Seconds a clip needs at least to pass (the ``min_duration`` rule).
DEFAULT_MIN_DURATION = 1.0
#: What a file longer than ``max_duration`` becomes (:class:`BatchConfig`).
LONG_CLIPS = ("cut", "fail")
#: Rejection reasons of the duration rules (in the ``reasons`` column).
TOO_SHORT, TOO_LONG = "too_short", "too_long"

#: ``error_type`` of a row whose file decodes to less than its header
#: declares.
TRUNCATED_SOURCE = "TruncatedSource"
#: A file is cut when its decoded length falls short of the declared one by
#: more than this share of it ...
CUT_SOURCE_TOLERANCE = 0.01
#: ... and by more than this many seconds (encoder padding and rounding of
#: frame counts stay well below both).
CUT_SOURCE_SECONDS = 0.1


@dataclass
class BatchConfig:
    """What the batch function computes per file (recorded in the summary).

    Attributes
    ----------
    sr : int
        Output sample rate in Hz.
    mono : bool
        Downmix to one channel at the source rate.
    features : {"none", "bat", "efficientat"}
        Feature preset written to the ``features`` column.
    max_duration : float or None
        Seconds decoded per file at most: a longer file is decoded up to
        this, flagged ``truncated`` and, with ``long_clips="fail"``, fails
        with the reason ``too_long``.
    min_duration : float
        A clip shorter than this many seconds fails with the reason
        ``too_short`` (default :data:`DEFAULT_MIN_DURATION`: the AGL1K
        benchmark's clips last 10-180 s, and the filters need at least a
        second to say anything); 0 turns the rule off.
    allow_cut_sources : bool
        Keep files that decode to less than their header declares (a
        ``decoded_fraction`` below 1) instead of failing them as
        :data:`TRUNCATED_SOURCE`.
    channels_policy : {"refuse", "mono-to-binaural"}
        What the ``bat`` features do with a clip that is not two-channel
        (:data:`agl_fast.presets.CHANNEL_POLICIES`).
    long_clips : {"cut", "fail"}
        What a file longer than ``max_duration`` becomes: its first
        ``max_duration`` seconds (``"cut"``, default) or a failed row.
    res_type : {"fast", "hq", "vhq"}
        Resampling filter.
    threads : int or None
        Native threads of one batch call (default: the library default).
    tag : tuple of str
        Tagging stages: ``"speech"`` and/or ``"efficientat"``.
    tag_model, tag_device, allow_cpu
        The EfficientAT tagger's ONNX file, device and CPU fallback.
    quality_thresholds : dict of str to float
        Thresholds of the quality filter, by name of
        :data:`agl_fast.quality_filters.DEFAULT_THRESHOLDS` (agl-fast's choices; the
        paper gives none); names left out keep their default.
    fraction_scheme : {"segments10", "time"}
        How the taggers turn window decisions into time fractions
        (:data:`agl_fast.tagging.FRACTION_SCHEMES`).
    stages : tuple of str
        Registered stages that run only on request
        (:func:`agl_fast.pipeline.stages.requested_stages`), e.g.
        ``("fingerprint",)``.
    """

    sr: int = 32000
    mono: bool = False
    features: str = "none"
    max_duration: float | None = 600.0
    min_duration: float = DEFAULT_MIN_DURATION
    long_clips: str = "cut"
    channels_policy: str = "refuse"
    allow_cut_sources: bool = False
    res_type: str = "hq"
    threads: int | None = None
    tag: tuple[str, ...] = field(default_factory=tuple)
    tag_model: str | None = None
    tag_device: str = "auto"
    allow_cpu: bool = False
    quality_thresholds: dict[str, float] = field(default_factory=defaults)
    fraction_scheme: str = DEFAULT_FRACTION_SCHEME
    stages: tuple[str, ...] = field(default_factory=tuple)

    def thresholds(self) -> dict[str, float]:
        """Every quality threshold: the defaults updated by :attr:`quality_thresholds`."""
        return check_thresholds(self.quality_thresholds)

    def validate(self) -> None:
        """Raise :class:`ParameterError` for options no batch could run with."""
        check_thresholds(self.quality_thresholds)
        check_requested(self.stages)
        if self.fraction_scheme not in FRACTION_SCHEMES:
            raise ParameterError(
                f"fraction_scheme must be one of {FRACTION_SCHEMES}, "
                f"got fraction_scheme={self.fraction_scheme!r}"
            )
        if self.features != "none":
            get_recipe(self.features)
        if self.tag_device not in DEVICES:
            raise ParameterError(
                f"tag_device must be one of {DEVICES}, got tag_device={self.tag_device!r}"
            )
        for name in self.tag:
            if get_tagger(name).needs_model and not self.tag_model:
                raise ParameterError(f"tag {name!r} needs tag_model (--tag-model MODEL.onnx)")
        if not isinstance(self.sr, int) or self.sr < 1:
            raise ParameterError(f"sr must be a positive integer, got sr={self.sr!r}")
        if self.res_type not in ("fast", "hq", "vhq"):
            raise ParameterError(
                f"res_type must be 'fast', 'hq' or 'vhq', got res_type={self.res_type!r}"
            )
        if self.max_duration is not None and not self.max_duration > 0:
            raise ParameterError(
                f"max_duration must be > 0 or None, got max_duration={self.max_duration!r}"
            )
        if (
            isinstance(self.min_duration, bool)
            or not isinstance(self.min_duration, (int, float))
            or not 0 <= self.min_duration < float("inf")
        ):
            raise ParameterError(
                f"min_duration must be a finite number >= 0, got min_duration={self.min_duration!r}"
            )
        if not isinstance(self.allow_cut_sources, bool | np.bool_):
            raise ParameterError(
                "allow_cut_sources must be a bool, got "
                f"allow_cut_sources={self.allow_cut_sources!r}"
            )
        if self.channels_policy not in CHANNEL_POLICIES:
            raise ParameterError(
                f"channels_policy must be one of {CHANNEL_POLICIES}, "
                f"got channels_policy={self.channels_policy!r}"
            )
        if self.long_clips not in LONG_CLIPS:
            raise ParameterError(
                f"long_clips must be one of {LONG_CLIPS}, got long_clips={self.long_clips!r}"
            )
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ParameterError(
                f"threads must be a positive integer, got threads={self.threads!r}"
            )
