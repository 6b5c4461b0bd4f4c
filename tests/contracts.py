"""The project's JSON Schemas, loaded once, with format checking on."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


@cache
def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def assert_valid_turn(turn: Any) -> None:
    errors = sorted(validator("turn.v1.json").iter_errors(turn), key=str)
    assert not errors, f"Turn violates turn.v1.json: {errors[0].message} at {errors[0].json_path}"


def assert_valid_turn_key(key: bytes, turn: Any, session_id: str) -> None:
    """A turn's record key: the JSON ``[session_id, inference_call_id]`` (turn-key.v1.json)."""
    pair = json.loads(key)
    errors = sorted(validator("turn-key.v1.json").iter_errors(pair), key=str)
    assert not errors, f"key violates turn-key.v1.json: {errors[0].message}"
    assert pair == [session_id, turn["inference_call_id"]]


def assert_valid_dead_letter(letter: Any) -> None:
    errors = sorted(validator("dead-letter.v1.json").iter_errors(letter), key=str)
    assert not errors, f"dead letter violates dead-letter.v1.json: {errors[0].message}"
