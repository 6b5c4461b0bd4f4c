"""A real worker process (``stream-app worker``) that a test can start, kill and restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from stream_app.broker.embedded import WORKER_SETTINGS, EmbeddedBroker, free_port, terminate


class WorkerProcess:
    def __init__(
        self,
        broker: EmbeddedBroker,
        settings: dict[str, str],
        workdir: Path,
        name: str = "worker",
    ) -> None:
        self.port = free_port()
        self.log = workdir / f"{name}.log"
        self.env = {
            **os.environ,
            **WORKER_SETTINGS,
            "STREAM_APP_BROKER_URL": broker.url,
            "STREAM_APP_WEB_PORT": str(self.port),
            "STREAM_APP_WEB_HOST": "127.0.0.1",
            # Its own RocksDB directory: a restarted worker of the same name reopens it.
            "STREAM_APP_DATA_DIR": str(workdir / f"{name}-data"),
            **settings,
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.command = [sys.executable, "-m", "stream_app", "worker", "--loglevel", "info"]

    def start(self) -> WorkerProcess:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def status(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=1) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None

    def wait_ready(self, timeout: float = 60.0) -> float:
        """Seconds until ``/ready`` answered 200."""
        started = time.monotonic()
        while self.status("/ready") != 200:
            assert self.process is not None and self.process.poll() is None, (
                f"worker exited: {self.log.read_text()[-3000:]}"
            )
            if time.monotonic() - started > timeout:
                raise AssertionError(
                    f"worker not ready in {timeout} s: {self.log.read_text()[-3000:]}"
                )
            time.sleep(0.05)
        return time.monotonic() - started

    def kill(self) -> None:
        """SIGKILL: no shutdown, no commit, no goodbye to the group."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, grace=30)
