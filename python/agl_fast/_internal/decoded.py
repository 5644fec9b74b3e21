"""Arrow tables of decoded batches (:func:`agl_fast.audio.load_many` and
:func:`agl_fast.audio.load_arrays`): the metadata columns and the samples
column. pyarrow is imported here only when a table is built, so that
:func:`agl_fast.audio.load` and the librosa drop-in never load it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["meta_table", "samples_column"]


def samples_column(data: Any, meta: dict[str, Any], *, flat: bool) -> pa.Array:
    """The ``samples`` column: ``large_list<float32>`` per file when ``flat``
    (mono or one channel), else ``list<large_list<float32>>`` ``[channels][n]``;
    null where the file failed."""
    import pyarrow as pa

    chans, frames = meta["channels"], meta["frames"]
    mask = pa.array(meta["failed"])
    values = pa.array(data, type=pa.float32())
    if flat:
        return pa.LargeListArray.from_arrays(_offsets(frames, np.int64), values, mask=mask)
    inner = pa.LargeListArray.from_arrays(_offsets(np.repeat(frames, chans), np.int64), values)
    return pa.ListArray.from_arrays(_offsets(chans, np.int32), inner, mask=mask)


def _offsets(counts: Any, dtype: Any) -> pa.Array:
    """Arrow list offsets of ``counts`` (a leading 0, then the running sum)."""
    import pyarrow as pa

    out = np.zeros(len(counts) + 1, dtype)
    np.cumsum(counts, out=out[1:])
    return pa.array(out)


def meta_table(keys: Sequence[str], str_paths: list[str | bytes], meta: dict[str, Any]) -> pa.Table:
    """Every column of :func:`agl_fast.audio.load_many`'s table but ``samples``."""
    import pyarrow as pa

    failed = meta["failed"]
    frames = meta["frames"]
    sr_arr = np.asarray(meta["sr"], np.int64)
    dur = np.where(sr_arr > 0, frames / np.maximum(sr_arr, 1), 0.0)

    def col(v: Any, t: pa.DataType) -> pa.Array:
        return pa.array(np.asarray(v), t, mask=failed)

    return pa.table(
        {
            "key": pa.array(list(keys), pa.string()),
            "path": pa.array([p if isinstance(p, str) else None for p in str_paths], pa.string()),
            "sr": col(np.asarray(meta["sr"], np.int64), pa.int64()),
            "channels": col(meta["channels"], pa.int64()),
            "frames": col(frames, pa.int64()),
            "duration": col(dur, pa.float64()),
            "source_sr": col(np.asarray(meta["source_sr"], np.int64), pa.int64()),
            "source_channels": col(np.asarray(meta["source_channels"], np.int64), pa.int64()),
            "truncated": col(meta["truncated"], pa.bool_()),
            "corrupt_frames": col(np.asarray(meta["corrupt_frames"], np.int64), pa.int64()),
            "decoded_fraction": pa.array(meta["decoded_fraction"], pa.float64()),
            "error_type": pa.array(meta["kinds"], pa.string()),
            "error_message": pa.array(meta["messages"], pa.string()),
        }
    )
