"""What a dataset's records are: chat messages and examples, preference rows, trajectories,
turn lines, and an item to write."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple, NotRequired, TypedDict

from stream_app.models.json_types import Json
from stream_app.models.turn import TurnDict


class ChatFunction(TypedDict):
    name: str
    arguments: Json  # openai: the arguments' JSON text; trl: the arguments object


class ChatToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: ChatFunction


class ChatMessage(TypedDict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    reasoning_content: NotRequired[str]  # with --reasoning, when the message has reasoning
    tool_calls: NotRequired[list[ChatToolCall]]  # assistant messages that call tools
    tool_call_id: NotRequired[str]  # tool messages: the call answered
    weight: NotRequired[int]  # openai chat, assistant messages: 1 the target, 0 history


class ToolFunction(TypedDict):
    name: str
    parameters: Json  # {"type": "object"}: a Turn names a tool, not its schema


class Tool(TypedDict):
    type: Literal["function"]
    function: ToolFunction


class ExampleMetadata(TypedDict):
    session_id: str
    inference_call_id: str
    agent_harness: str | None  # of the turn's first decision; None without decisions
    accepted_explicit: int  # the turn's explicit decisions with accepted: true
    rejected_explicit: int  # ... explicit, accepted: false
    accepted_implicit: int  # ... implicit (a config, a hook, retention), accepted: true
    rejected_implicit: int  # ... implicit, accepted: false
    retention_score: float | None  # the latest edit_retention_score observed, if any


class ChatExample(TypedDict):
    messages: list[ChatMessage]
    tools: NotRequired[list[Tool]]  # the functions the example's messages call


class KtoRow(TypedDict):
    prompt: list[ChatMessage]
    completion: list[ChatMessage]
    label: bool


class DpoRow(TypedDict):
    prompt: list[ChatMessage]
    chosen: list[ChatMessage]
    rejected: list[ChatMessage]


class OpenAIPreferenceInput(TypedDict):
    messages: list[ChatMessage]
    tools: NotRequired[list[Tool]]


class OpenAIPreference(TypedDict):
    input: OpenAIPreferenceInput
    preferred_output: list[ChatMessage]
    non_preferred_output: list[ChatMessage]


class Trajectory(TypedDict):
    session_id: str
    org_id: str
    turns: list[TurnDict]


class TurnsLine(TypedDict):
    key: str
    value: TurnDict


Record = TurnsLine | ChatExample | Trajectory | KtoRow | DpoRow | OpenAIPreference


class Item(NamedTuple):
    """A record, the key its split is drawn by (a session, or a prompt's hash for kto and
    dpo, so that a prompt lives in one split), the hash of the prompt it trains on (chat:
    the messages before its first target), and its metadata line (None: no sidecar)."""

    split_key: str
    record: Record
    prompt: str | None
    metadata: Mapping[str, object] | None
    keys: tuple[str, ...]  # the turn keys written in it
