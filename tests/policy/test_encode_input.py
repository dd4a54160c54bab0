"""The policy input as JSON: string keys as they are; a key or value YAML reads as a number, a date or a
boolean becomes what JSON can hold (a string key, an ISO date)."""

from __future__ import annotations

import datetime
import json

import yaml

from reconciler.policy.engine import encode_input


def test_an_input_of_string_keys_encodes_as_json_does() -> None:
    doc = {"objects": [{"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}}, "n": 3, "x": None}]}
    assert json.loads(encode_input(doc)) == doc


def test_keys_and_values_json_has_no_type_for_become_strings() -> None:
    body = yaml.safe_load("data:\n  1: one\n  2026-01-02: day\nflag: yes\nwhen: 2026-01-02\n")
    decoded = json.loads(encode_input({"objects": [body]}))
    assert decoded["objects"][0]["data"] == {"1": "one", "2026-01-02": "day"}
    assert decoded["objects"][0]["flag"] is True
    assert decoded["objects"][0]["when"] == str(datetime.date(2026, 1, 2))
