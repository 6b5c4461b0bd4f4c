"""The ``completion`` of a Turn: the model's output as plain text (SPEC §4)."""

from __future__ import annotations

from collections.abc import Iterator

from stream_app.models.json_types import Json
from stream_app.models.turn import InferenceMessageDict


def _string_leaves(value: Json) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from _string_leaves(value[key])
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)


def render_completion(message: InferenceMessageDict) -> str:
    """Text parts and tool-call argument strings, in part order; reasoning and results excluded."""
    pieces: list[str] = []
    for part in message["parts"]:
        if part["type"] == "text":
            pieces.append(part["content"])
        elif part["type"] == "tool_call":
            pieces.extend(_string_leaves(part["arguments"]))
    return "\n".join(piece for piece in pieces if piece)
