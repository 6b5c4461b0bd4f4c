"""Where session state lives: an abstract store, kept in memory or in a Faust table."""

from stream_app.state.base import SessionStore
from stream_app.state.memory import MemoryStore

__all__ = ["MemoryStore", "SessionStore"]
