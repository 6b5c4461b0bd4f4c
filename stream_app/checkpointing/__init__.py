"""Which input offsets a worker may commit: only those whose every effect is durable."""
