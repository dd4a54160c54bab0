"""The readers of loosely typed object fields that the cluster edge and the checklist share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from reconciler.model.readers import as_dict, as_list, parse_time


def test_a_field_of_another_shape_reads_as_empty() -> None:
    assert as_dict({"a": 1}) == {"a": 1}
    assert as_dict(None) == {} and as_dict(["a"]) == {} and as_dict("a") == {}
    assert as_list([1]) == [1]
    assert as_list(None) == [] and as_list({"a": 1}) == [] and as_list("ab") == []


def test_timestamps_of_the_api_server_and_of_records_parse_alike() -> None:
    assert parse_time("2026-01-02T03:04:05Z") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_time("2026-01-02T03:04:05.123456+02:00") == datetime(
        2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone(timedelta(hours=2))
    )
    assert parse_time("") is None and parse_time(None) is None and parse_time(1700000000) is None
    assert parse_time("yesterday") is None
