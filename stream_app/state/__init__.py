"""Where session state lives: an abstract store; in memory for replay, in memory and a
changelog topic for the worker."""

from stream_app.state.base import SessionStore
from stream_app.state.memory import MemorySessions

__all__ = ["MemorySessions", "SessionStore"]
