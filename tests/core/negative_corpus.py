"""Content with no credential but what it plants, for redaction's false positives: the
example session (two planted: an API key and a bearer token), and every string of a value."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from typing import Any

import orjson

from stream_app.core.redaction import redact_text


def example_lines() -> list[dict[str, Any]]:
    text = resources.files("stream_app.examples").joinpath("session.jsonl").read_text()
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a JSON value, keys too, with where it is."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield f"{path}/{k} (key)", k
            yield from _strings(v, f"{path}/{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}/{i}")


def changed_strings(values: list[Any]) -> dict[str, Any]:
    """How many strings the values hold, keys too, and where redaction changes one."""
    strings = [s for i, v in enumerate(values) for s in _strings(v, f"record {i}")]
    changed = [where for where, s in strings if redact_text(s) != s]
    return {"strings": len(strings), "changed": len(changed), "where": changed}
