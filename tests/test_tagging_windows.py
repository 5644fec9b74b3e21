"""Windowing arithmetic, time fractions and the AudioSet ontology."""

from __future__ import annotations

import numpy as np
import pytest

from agl_fast.exceptions import ParameterError
from agl_fast.tagging import (
    GROUP_KEYS,
    ClipFrames,
    extract_windows,
    ontology,
    plan_windows,
    time_fractions,
    window_views,
)


@pytest.mark.parametrize(
    ("n", "win", "hop", "starts"),
    [
        (5, 10, 10, [0]),  # short clip: one padded window
        (10, 10, 10, [0]),
        (25, 10, 10, [0, 10, 15]),  # last window flush with the end
        (30, 10, 10, [0, 10, 20]),
        (30, 10, 5, [0, 5, 10, 15, 20]),
        (27, 10, 5, [0, 5, 10, 15, 17]),
        (11, 10, 4, [0, 1]),
    ],
)
def test_plan_windows(n, win, hop, starts):
    got = plan_windows(n, win, hop)
    assert got.tolist() == starts
    assert got[-1] + win >= n  # every sample covered


def test_plan_windows_bad_input():
    with pytest.raises(ParameterError, match="hop must be >= 1 sample, got hop=0"):
        plan_windows(10, 5, 0)
    with pytest.raises(ParameterError, match="at least one sample, got n=0"):
        plan_windows(0, 5, 5)


def test_short_clip_padding():
    y = np.array([1, 2, 3], np.float32)
    rep = extract_windows(y, plan_windows(3, 8, 8), 8, "repeat")
    assert rep.tolist() == [[1, 2, 3, 1, 2, 3, 1, 2]]
    zero = extract_windows(y, plan_windows(3, 8, 8), 8, "zero")
    assert zero.tolist() == [[1, 2, 3, 0, 0, 0, 0, 0]]
    with pytest.raises(ParameterError, match="pad must be"):
        extract_windows(y, np.zeros(1, np.int64), 8, "edge")  # type: ignore[arg-type]


def test_long_clip_windows_are_slices():
    y = np.arange(27, dtype=np.float32)
    w = extract_windows(y, plan_windows(27, 10, 5), 10)
    assert w.shape == (5, 10)
    assert w[-1].tolist() == list(range(17, 27))


def test_windows_equal_strided_views_and_refuse_starts_out_of_range():
    rng = np.random.default_rng(3)
    y = rng.standard_normal(5000).astype(np.float32)
    starts = np.sort(rng.integers(0, 5000 - 700 + 1, size=40))
    w = extract_windows(y, starts, 700)
    view = np.lib.stride_tricks.sliding_window_view(y, 700)[starts]
    assert w.dtype == np.float32 and w.flags.c_contiguous
    np.testing.assert_array_equal(w, view)
    assert extract_windows(y, np.zeros(0, np.int64), 700).shape == (0, 700)
    for bad in ([-1], [4301]):  # before the clip; past its end (n - win = 4300)
        with pytest.raises(ParameterError, match=r"window starts must lie in \[0, 4300\]"):
            extract_windows(y, np.array(bad), 700)


def test_window_views_read_the_clip_in_place():
    y = np.arange(27, dtype=np.float32)
    starts = plan_windows(27, 10, 5)
    views = window_views(y, starts, 10)
    assert [v.tolist() for v in views] == [list(range(s, s + 10)) for s in (0, 5, 10, 15, 17)]
    assert all(np.shares_memory(v, y) and v.flags.c_contiguous for v in views)
    np.testing.assert_array_equal(extract_windows(y, starts, 10), np.stack(views))
    short = window_views(y[:3], plan_windows(3, 8, 8), 8, "zero")  # the padded copy
    assert len(short) == 1 and short[0].tolist() == [0, 1, 2, 0, 0, 0, 0, 0]
    assert not np.shares_memory(short[0], y)
    with pytest.raises(ParameterError, match="window starts must lie"):
        window_views(y, np.array([18]), 10)
    with pytest.raises(ParameterError, match="win must be >= 1 sample"):
        window_views(y, np.array([0]), 0)


def test_window_length_is_bounded_before_anything_is_allocated() -> None:
    """A clip shorter than the window is padded to it, so an absurd window
    length would allocate that much: it is refused first, in every entry
    point, including the tagger's constructor (before its model loads)."""
    from agl_fast.tagging import EfficientATTagger
    from agl_fast.tagging.windows import MAX_WINDOW_SAMPLES, check_window

    y = np.zeros(100, np.float32)
    too_long = MAX_WINDOW_SAMPLES + 1
    check_window(MAX_WINDOW_SAMPLES)  # the largest allowed passes
    for call in (
        lambda: check_window(too_long),
        lambda: plan_windows(100, too_long, 320),
        lambda: window_views(y, np.array([0]), too_long),
        lambda: extract_windows(y, np.array([0]), 2**62),
    ):
        with pytest.raises(ParameterError, match="win must be at most"):
            call()
    # 10^6 s at 32 kHz; NaN and infinity: a ParameterError, not an
    # OverflowError or ValueError from round(), and no model is read.
    cases = [
        (1e6, None, "win must be at most"),
        (float("nan"), None, "must be finite and > 0"),
        (float("inf"), None, "must be finite and > 0"),
        (10.0, float("nan"), "must be finite and > 0"),
    ]
    for window_s, hop_s, message in cases:
        with pytest.raises(ParameterError, match=message):
            EfficientATTagger(b"not a model", window_s=window_s, hop_s=hop_s)


def test_time_fractions_hand_computed():
    # windows [0,10) [5,15) [10,20); clip n = 20; one class
    probs = np.array([[0.9], [0.2], [0.6]], np.float32)
    fr = ClipFrames(np.array([0, 5, 10]), 10, 20, 1, probs)
    # segments [0,5): w0 -> .9; [5,10): w0,w1 -> max .9 / mean .55;
    # [10,15): w1,w2 -> max .6 / mean .4; [15,20): w2 -> .6
    cls, _ = time_fractions(fr, threshold=0.5, aggregation="max")
    assert cls[0] == pytest.approx(1.0)
    cls, _ = time_fractions(fr, threshold=0.5, aggregation="mean")
    assert cls[0] == pytest.approx(15 / 20)
    cls, _ = time_fractions(fr, threshold=0.7, aggregation="max")
    assert cls[0] == pytest.approx(10 / 20)


def test_time_fractions_overlap_counted_once():
    # hop 1 over a 10-sample window: every instant covered up to 10 times,
    # a class present everywhere still has fraction exactly 1
    starts = plan_windows(40, 10, 1)
    probs = np.ones((starts.shape[0], 1), np.float32)
    cls, _ = time_fractions(ClipFrames(starts, 10, 40, 1, probs), threshold=0.5)
    assert cls[0] == pytest.approx(1.0)


def test_time_fractions_short_clip_and_groups():
    # a 3-sample clip in one 8-sample window: only the clip's time counts
    probs = np.array([[0.8, 0.1, 0.4]], np.float32)
    groups = np.array([[True, True, False], [False, True, True]])
    fr = ClipFrames(np.array([0]), 8, 3, 1, probs)
    cls, grp = time_fractions(fr, threshold=0.3, group_matrix=groups)
    assert cls.tolist() == [1.0, 0.0, 1.0]
    assert grp is not None and grp.tolist() == [1.0, 1.0]


def test_time_fractions_group_union():
    # class 0 present in [0,10), class 1 in [10,20): group {0,1} present all the time
    probs = np.array([[0.9, 0.0], [0.0, 0.9]], np.float32)
    fr = ClipFrames(np.array([0, 10]), 10, 20, 1, probs)
    cls, grp = time_fractions(fr, threshold=0.5, group_matrix=np.array([[True, True]]))
    assert cls.tolist() == [0.5, 0.5]
    assert grp is not None and grp.tolist() == [1.0]


def test_time_fractions_bad_input():
    fr = ClipFrames(np.array([0, 10]), 10, 20, 1, np.zeros((3, 1), np.float32))
    with pytest.raises(ParameterError, match="n_windows=2"):
        time_fractions(fr)
    fr = ClipFrames(np.array([0]), 10, 10, 1, np.zeros((1, 1), np.float32))
    with pytest.raises(ParameterError, match="aggregation must be"):
        time_fractions(fr, aggregation="median")  # type: ignore[arg-type]


def test_ontology_integrity():
    onto = ontology()
    assert onto.n_classes == 527
    assert len(set(onto.mids)) == 527 and len(set(onto.names)) == 527
    assert onto.group_keys == GROUP_KEYS
    assert onto.group_names == (
        "Human sounds",
        "Animal",
        "Music",
        "Natural sounds",
        "Sounds of things",
        "Source-ambiguous sounds",
        "Channel, environment and background",
    )
    # the seven groups are the roots, and every class reaches one
    for g in onto.group_mids:
        assert onto.parents(g) == ()
    gm = onto.group_matrix()
    assert gm.shape == (7, 527)
    assert gm.any(axis=0).all()
    # every child id names a node of the ontology
    assert all(c in onto.children for kids in onto.children.values() for c in kids)


def test_ontology_known_facts():
    onto = ontology()
    assert onto.names[0] == "Speech" and onto.mids[0] == "/m/09x0r"
    assert onto.groups_of("/m/09x0r") == ("human_sounds",)
    bird = onto.index("Bird")
    assert "animal" in onto.groups_of(onto.mids[bird])
    assert "/m/09l8g" in onto.ancestors("/m/09x0r")  # Speech under Human voice
    with pytest.raises(ParameterError, match="unknown AudioSet class"):
        onto.index("Not a sound")


def test_segment_fractions_hand_computed():
    from agl_fast.tagging import segment_fractions

    # 100 samples, windows of 20 at hop 20: probs of class 0 high in windows 0-1
    # (samples 0-39), class 1 high only in window 4 (80-99), class 2 at 0.5 mean
    starts = np.arange(0, 100, 20)
    probs = np.zeros((5, 3), np.float32)
    probs[:2, 0] = 0.9
    probs[4, 1] = 0.9
    probs[:, 2] = [0.6, 0.4, 0.6, 0.4, 0.6]
    fr = ClipFrames(starts, 20, 100, 1, probs)
    cls, grp = segment_fractions(fr, threshold=0.5, group_matrix=np.array([[True, True, False]]))
    np.testing.assert_allclose(cls, [0.4, 0.2, 0.6])
    np.testing.assert_allclose(grp, [0.6])
    cls, _ = segment_fractions(fr, threshold=0.5, n_segments=4)
    # segments of 25 samples: each straddles two windows, the max of 0.6/0.4 is present
    np.testing.assert_allclose(cls, [0.5, 0.25, 1.0])
    # mean over the segment's samples: 0.56, 0.48, 0.48, 0.56 for class 2
    cls, _ = segment_fractions(fr, threshold=0.5, n_segments=4, aggregation="mean")
    np.testing.assert_allclose(cls, [0.5, 0.25, 0.5])
    with pytest.raises(ParameterError, match="n_segments"):
        segment_fractions(fr, n_segments=0)
