"""The core's plain-dict types name the fields of the models they stand for, in the same
order: the core builds Turns, their parts, decisions and dead letters as dicts (what orjson
writes as they are), and the models are the contract those dicts are tested against."""

from __future__ import annotations

import typing
from typing import NotRequired

import pytest
from pydantic import BaseModel

from stream_app.models.dead_letter import DeadLetter, DeadLetterDict
from stream_app.models.decision import DecisionDict, DeveloperDecision
from stream_app.models.turn import (
    InferenceMessage,
    InferenceMessageDict,
    PartDict,
    ReasoningPart,
    ReasoningPartDict,
    TextPart,
    TextPartDict,
    ToolCallDict,
    ToolCallPart,
    ToolCallResponseDict,
    ToolCallResponsePart,
    Turn,
    TurnBodyDict,
    TurnDict,
)

PAIRS: list[tuple[type, type[BaseModel]]] = [
    (TextPartDict, TextPart),
    (ReasoningPartDict, ReasoningPart),
    (ToolCallDict, ToolCallPart),
    (ToolCallResponseDict, ToolCallResponsePart),
    (InferenceMessageDict, InferenceMessage),
    (TurnDict, Turn),
    (DecisionDict, DeveloperDecision),
    (DeadLetterDict, DeadLetter),
]


@pytest.mark.parametrize(("typed", "model"), PAIRS, ids=[t.__name__ for t, _ in PAIRS])
def test_a_dict_type_has_its_models_fields_in_order(typed: type, model: type[BaseModel]) -> None:
    assert list(typed.__annotations__) == list(model.model_fields)


@pytest.mark.parametrize(("typed", "model"), PAIRS, ids=[t.__name__ for t, _ in PAIRS])
def test_a_field_the_model_requires_is_a_key_the_dict_always_has(
    typed: type, model: type[BaseModel]
) -> None:
    """A model field with a default is one the contract lets be absent (a dead letter's
    truncation figures): the core leaves the key out rather than writing null."""
    hints = typing.get_type_hints(typed, include_extras=True)  # the module's annotations
    always = {name for name, hint in hints.items() if typing.get_origin(hint) is not NotRequired}
    assert always == {name for name, info in model.model_fields.items() if info.is_required()}


def test_the_parts_are_the_models_parts() -> None:
    """``PartDict`` and the model's ``Part`` are one-ofs of the same kinds."""
    (part,) = typing.get_args(InferenceMessage.model_fields["parts"].annotation)
    one_of, _ = typing.get_args(part)  # Annotated[the union, its discriminator]
    kinds = {typing.get_type_hints(m)["type"] for m in typing.get_args(one_of)}
    assert kinds == {typing.get_type_hints(d)["type"] for d in typing.get_args(PartDict)}


def test_a_turn_body_is_a_turn_without_its_decisions() -> None:
    assert list(TurnBodyDict.__annotations__) == [
        name for name in TurnDict.__annotations__ if name != "decisions"
    ]
