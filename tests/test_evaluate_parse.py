"""Answer parsing: JSON extraction, repair, aliases, coercion, statuses."""

from __future__ import annotations

import pytest

from agl_fast.evaluate.parse import parse_answer


def test_fenced_json_with_trailing_comma_and_aliases():
    a = parse_answer('Here:\n```json\n{"City": "Paris", "lat": "48.85", "lng": 2.35,}\n```')
    assert (a.status, a.city, a.latitude, a.longitude) == ("ok", "Paris", 48.85, 2.35)


def test_nested_object_and_chinese_keys():
    a = parse_answer('{"answer": {"城市": "北京", "国家": "中国", "纬度": 39.9, "经度": 116.4}}')
    assert (a.status, a.city, a.country, a.latitude, a.longitude) == (
        "ok",
        "北京",
        "中国",
        39.9,
        116.4,
    )


def test_single_quotes_and_missing_comma_are_repaired():
    a = parse_answer("{'city': 'Lima' 'country': 'Peru', 'latitude': -12.05, 'longitude': -77.04}")
    assert (a.status, a.city, a.country, a.latitude) == ("ok", "Lima", "Peru", -12.05)


def test_first_complete_object_wins_and_braces_in_strings():
    a = parse_answer(
        '{"reason": "a {curly} note", "city": "Oslo", "lat": 59.9, "lon": 10.7} {"city": "X"}'
    )
    assert (a.city, a.latitude, a.longitude) == ("Oslo", 59.9, 10.7)


@pytest.mark.parametrize(
    ("text", "value"),
    [("48.85° N", 48.85), ("33.9 S", -33.9), ("2,35", 2.35), ("-74.0 W", -74.0)],
)
def test_numeric_coercion(text, value):
    a = parse_answer(f'{{"city": "c", "latitude": "{text}", "longitude": "1"}}')
    assert a.latitude == value


@pytest.mark.parametrize(
    ("text", "finish", "status"),
    [
        ("I'm sorry, I cannot determine the location of this audio.", None, "refusal"),
        (
            '{"city": "Unknown", "country": "unknown", "latitude": null, "longitude": ""}',
            None,
            "refusal",
        ),
        ('{"city": "Rome", "country": "Italy"}', None, "partial"),
        ('{"city": "Rome", "latitude": 95, "longitude": 12}', None, "invalid"),
        ('{"city": "Rome", "latitude": 41.9, "longitude": 190}', None, "invalid"),
        ('{"city": "Rome", "latitude": 41.9}', None, "partial"),
        ("The recording sounds like a market.", None, "unparseable"),
        ("", None, "empty"),
        (None, None, "empty"),
        ('{"city": "Rome", "latitude": 41.9, "longitude": 12.5}', "content_filter", "blocked"),
    ],
)
def test_statuses(text, finish, status):
    assert parse_answer(text, finish).status == status
