"""The one coordinate rule: numbers or numeric text, finite, in range, never wrapped."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from agl_fast.coords import coordinate_problem, parse_coordinate, validate_coordinates
from agl_fast.exceptions import InvalidCoordinatesError, ParameterError


@pytest.mark.parametrize(
    ("value", "axis", "expected"),
    [
        (48.85, "latitude", 48.85),
        (" -33.9 ", "lat", -33.9),
        ("180", "longitude", 180.0),
        (-180, "lon", -180.0),
        (np.float32(12.5), "latitude", 12.5),
        (np.int64(-90), "latitude", -90.0),
    ],
)
def test_valid_values_parse_unchanged(value: object, axis: str, expected: float) -> None:
    assert parse_coordinate(value, axis) == pytest.approx(expected, abs=0)


@pytest.mark.parametrize(
    ("value", "axis", "match"),
    [
        (200, "latitude", r"latitude 200 is outside \[-90, 90\]"),
        (500.0, "longitude", r"longitude 500.0 is outside \[-180, 180\]"),
        (180.0001, "longitude", "outside"),
        ("east", "longitude", "'east' is not a number"),
        (True, "latitude", "True is not a number"),
        (float("inf"), "latitude", "not finite"),
        ("nan", "latitude", "not finite"),
        (None, "latitude", "missing"),
        ("", "longitude", "missing"),
        ([1.0], "latitude", "not a number"),
        (10**400, "latitude", "out of range"),
    ],
)
def test_invalid_values_raise_a_typed_error(value: object, axis: str, match: str) -> None:
    with pytest.raises(InvalidCoordinatesError, match=match) as info:
        parse_coordinate(value, axis)
    assert isinstance(info.value, ParameterError)


def test_unknown_axis_is_refused() -> None:
    with pytest.raises(InvalidCoordinatesError, match="axis must be"):
        parse_coordinate(1.0, "altitude")


def test_pair_problem_names_each_bad_value() -> None:
    assert coordinate_problem(10, 20) is None
    reason = coordinate_problem(200, "east")
    assert reason is not None
    assert "latitude 200" in reason and "longitude 'east'" in reason


@pytest.mark.parametrize("wrap", [list, np.array, pa.array])
def test_columns_mark_invalid_rows_and_keep_missing_ones_silent(wrap: object) -> None:
    lat = [10.0, 200.0, None, 45.0, 91.0]
    lon = [20.0, 500.0, None, -190.0, 0.0]
    la, lo, reasons = validate_coordinates(wrap(lat), wrap(lon))  # type: ignore[operator]
    assert la.dtype == np.float64 and lo.dtype == np.float64
    assert (la[0], lo[0]) == (10.0, 20.0)
    assert reasons[0] is None and reasons[2] is None
    assert all(math.isnan(v) for v in (la[1], lo[1], la[2], lo[2], la[3], lo[3], la[4], lo[4]))
    assert reasons[1] is not None and "latitude 200.0" in reasons[1]
    assert reasons[3] is not None and "longitude -190.0" in reasons[3]
    assert reasons[3] is not None and "latitude" not in reasons[3]
    assert reasons[4] is not None and "latitude 91.0" in reasons[4]


def test_text_columns_are_parsed_and_bad_text_is_a_reason() -> None:
    la, lo, reasons = validate_coordinates(["48.1", "east"], ["2.3", "1"])
    assert (la[0], lo[0]) == (48.1, 2.3)
    assert reasons == [None, "latitude 'east' is not a number"]


def test_columns_of_different_length_are_refused() -> None:
    with pytest.raises(InvalidCoordinatesError, match="differ in length: 2 and 1"):
        validate_coordinates([1.0, 2.0], [1.0])


def test_truth_files_can_require_coordinates() -> None:
    _, _, reasons = validate_coordinates([None, 1.0], [None, 2.0], missing_ok=False)
    assert reasons == ["latitude is missing; longitude is missing", None]


def test_one_column_alone_is_checked() -> None:
    from agl_fast.coords import check_column

    vals, reasons = check_column(["12.5", None, "95", "x"], "lat")
    assert vals[0] == 12.5 and np.isnan(vals[1:]).all()
    assert reasons[:2] == [None, None]
    assert reasons[2] == "latitude '95' is outside [-90, 90] degrees"
    assert reasons[3] == "latitude 'x' is not a number"
