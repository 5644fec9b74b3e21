"""The options of a curation run and their one validation: what one batch
computes (:class:`BatchConfig`) and how the run is driven
(:class:`CurateConfig`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields

import numpy as np

from .._internal.onnx import DEVICES
from ..exceptions import ParameterError
from ..presets import CHANNEL_POLICIES, get_recipe
from ..quality_filters import check_thresholds, defaults
from ..tagging.registry import get_tagger
from ..tagging.windows import DEFAULT_FRACTION_SCHEME, FRACTION_SCHEMES
from .stages import check_requested

__all__ = [
    "DEFAULT_MIN_DURATION",
    "ENGINES",
    "LONG_CLIPS",
    "BatchConfig",
    "CurateConfig",
    "default_workers",
]

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


#: The executors a run can have, by name (a summary's ``engine``), and the
#: fewest ``workers`` each runs with: 0 runs the batches in this process,
#: which a Ray cluster cannot.
ENGINES = {"local": 0, "ray": 1}

#: Batches per worker at least, when ``batch_size`` would give fewer.
TASKS_PER_WORKER = 4


def default_workers() -> int:
    """Worker processes by default: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class CurateConfig(BatchConfig):
    """Parameters of a run (recorded in the summary): what each file gets
    (:class:`BatchConfig`) and how the run is driven. :meth:`validate` holds
    every rule of them, for every engine.

    Attributes
    ----------
    workers : int or None
        Workers (default: the CPUs this process may use, or on Ray the
        cluster's CPUs over ``threads``); 0 runs the batches in this
        process, without crash isolation (not on Ray).
    batch_size : int
        Files per call of the batch function.
    file_timeout : float or None
        Seconds per file before its worker is killed (a batch gets
        ``file_timeout * batch_size``); None: no limit.
    memory_limit : int or None
        Address-space cap of each worker in bytes (None: no cap).
    part_rows, part_bytes : int
        A part is written once this many rows or bytes of rows are done
        (rows are durable long before: see :mod:`agl_fast.pipeline.run`).
    resume : bool
        Continue the run in the output directory.
    retry_failed : bool
        With ``resume``: run the files of failed rows again.
    """

    workers: int | None = None
    batch_size: int = 8
    file_timeout: float | None = 60.0
    memory_limit: int | None = None
    part_rows: int = 20_000
    part_bytes: int = 64 << 20
    resume: bool = False
    retry_failed: bool = False

    def batch_config(self) -> BatchConfig:
        """The per-file part of the configuration."""
        return BatchConfig(**{f.name: getattr(self, f.name) for f in fields(BatchConfig)})

    def validate(self, engine: str = "local") -> None:
        """Raise :class:`ParameterError` for options no run on ``engine``
        (a name of :data:`ENGINES`) could start with: the run options and
        the per-file ones (:meth:`BatchConfig.validate`)."""
        if engine not in ENGINES:
            raise ParameterError(f"engine must be one of {tuple(ENGINES)}, got engine={engine!r}")
        least = ENGINES[engine]
        if self.workers is not None and (not _is_int(self.workers) or self.workers < least):
            where = "" if engine == "local" else f" with engine {engine!r}"
            raise ParameterError(
                f"workers must be an integer >= {least}{where}, got workers={self.workers!r}"
            )
        for name in ("batch_size", "part_rows", "part_bytes"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ParameterError(f"{name} must be an integer >= 1, got {name}={value!r}")
        if self.file_timeout is not None and not self.file_timeout > 0:
            raise ParameterError(
                f"file_timeout must be > 0 or None, got file_timeout={self.file_timeout!r}"
            )
        if self.memory_limit is not None and (
            not _is_int(self.memory_limit) or self.memory_limit < 1
        ):
            raise ParameterError(
                f"memory_limit must be a positive integer or None, "
                f"got memory_limit={self.memory_limit!r}"
            )
        if self.retry_failed and not self.resume:
            raise ParameterError(
                "retry_failed continues a run: pass resume=True (--resume) with it"
            )
        super().validate()

    def batch_size_for(self, files: int, workers: int) -> int:
        """Files per batch for a run of ``files`` files on ``workers``
        workers: ``batch_size``, or fewer so that every worker gets several
        batches (a run's tail is then one file, not one batch, long)."""
        per = max(workers, 1) * TASKS_PER_WORKER
        return min(self.batch_size, max(1, -(-files // per)))


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)
