"""The ``completion`` of a Turn: the model's output as plain text (SPEC §4)."""

from __future__ import annotations

from stream_app.models.json_types import Json
from stream_app.models.turn import InferenceMessageDict


def _string_leaves(value: Json, out: list[str]) -> None:
    """Appends the string leaves of ``value``: object keys in sorted order, arrays in order
    (recursion is bounded: a record nests at most ``core/limits.MAX_DEPTH`` levels)."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key in sorted(value):
            _string_leaves(value[key], out)
    elif isinstance(value, list):
        for item in value:
            _string_leaves(item, out)


def render_completion(message: InferenceMessageDict) -> str:
    """Text parts and tool-call argument strings, in part order; reasoning and results excluded."""
    pieces: list[str] = []
    for part in message["parts"]:
        if part["type"] == "text":
            pieces.append(part["content"])
        elif part["type"] == "tool_call":
            _string_leaves(part["arguments"], pieces)
    return "\n".join([piece for piece in pieces if piece])
