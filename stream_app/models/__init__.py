"""Pydantic models of every record that crosses the pipeline's edges."""

from stream_app.models.dead_letter import DeadLetter, Reason
from stream_app.models.decision import DecisionPayload, DeveloperDecision
from stream_app.models.message import LLMMessagePublishedEvent, Message
from stream_app.models.turn import InferenceMessage, Turn

__all__ = [
    "DeadLetter",
    "DecisionPayload",
    "DeveloperDecision",
    "InferenceMessage",
    "LLMMessagePublishedEvent",
    "Message",
    "Reason",
    "Turn",
]
