"""Kafka as this package talks to it: the tools' clients, the worker's record batches,
and the embedded broker the tests and ``stream-app dev`` start."""
