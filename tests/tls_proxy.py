"""A TLS-terminating proxy in front of the embedded broker, for the TLS tests.

tansu 0.6 does not serve TLS itself (its ``--cert`` and ``--key`` options refuse to be given
together, and with ``--cert`` alone it still speaks plaintext), so TLS is terminated here,
as a load balancer in front of a Kafka cluster would: clients speak TLS to the proxy, which
passes the bytes on to tansu's plaintext port. tansu advertises the proxy's address in its
metadata, so every connection a client opens after the bootstrap goes through the proxy too.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time


class TlsProxy:
    """Listens on ``port`` with ``context`` and forwards every connection to ``upstream``."""

    def __init__(self, port: int, upstream: int, context: ssl.SSLContext) -> None:
        self.port, self.upstream, self.context = port, upstream, context
        self.accepted = 0  # TLS connections that completed their handshake
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    def start(self, timeout: float = 10.0) -> TlsProxy:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        started.result(timeout)
        return self

    async def _listen(self) -> None:
        # The loop's handshake-failure reports are expected in tests that are refused.
        self._loop.set_exception_handler(lambda loop, context: None)
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, ssl=self.context
        )

    async def _serve(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        self.accepted += 1
        try:
            broker_in, broker_out = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            client_out.close()
            return
        for source, sink in ((client_in, broker_out), (broker_in, client_out)):
            task = asyncio.ensure_future(self._pipe(source, sink))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Copies until either side closes, then closes the other side too."""
        with contextlib.suppress(OSError, ssl.SSLError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
            sink.close()

    def stop(self, timeout: float = 10.0) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._pipes):
                task.cancel()
            await asyncio.gather(*self._pipes, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout)
            self._loop.call_soon_threadsafe(self._loop.stop)
            deadline = time.monotonic() + timeout
            self._thread.join(max(0.0, deadline - time.monotonic()))
        self._loop.close()
