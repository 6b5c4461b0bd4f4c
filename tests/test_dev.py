"""Issue 10 item 8: ``stream-app dev`` owns its children's lives and reports their failures.

Real ``stream-app dev`` processes, each with its own embedded broker and worker: a worker
that dies ends dev with one line naming its log; SIGTERM (like Ctrl-C) stops the worker and
the broker and leaves no process behind, also when a second signal hurries the stop; a web
port held by another process is refused at once, in one line, before anything says ready.
"""

from __future__ import annotations

import http.server
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stream_app.broker.embedded import free_port

pytestmark = pytest.mark.broker

READY_LINE = "worker web: http://127.0.0.1:"


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) and stat[1] == pid:
            found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class Dev:
    """A ``stream-app dev`` process; every descendant it showed is remembered for cleanup."""

    def __init__(self, web_port: int, *args: str, tmp: Path | None = None) -> None:
        env = {
            **os.environ,
            "STREAM_APP_WEB_PORT": str(web_port),
            "STREAM_APP_ID": f"dev-{uuid.uuid4().hex[:6]}",
        }
        if tmp is not None:  # dev's folder, kept when a test makes it fail, goes with pytest's
            env["TMPDIR"] = str(tmp)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stream_app", "dev", "--port", str(free_port()), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.stdout = ""
        self.seen: set[int] = set()

    def tree(self) -> list[int]:
        """dev's descendants now (its broker and its worker)."""
        found, todo = [], [self.process.pid]
        while todo:
            for child in _children(todo.pop()):
                found.append(child)
                todo.append(child)
        self.seen.update(found)
        return found

    def worker(self) -> int:
        (pid,) = [p for p in _children(self.process.pid) if "stream_app worker" in _cmdline(p)]
        return pid

    def wait_for_stdout(self, text: str, timeout: float = 90.0) -> None:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while text not in self.stdout:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} in {timeout} s; stdout: {self.stdout}"
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                assert chunk, f"dev closed stdout; {self.stdout}{self.stderr_after_exit()}"
                self.stdout += chunk.decode()

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.tree()
            raise AssertionError(f"dev still running after {timeout} s: {self.stdout}") from None

    def stderr_after_exit(self) -> str:
        assert self.process.stderr is not None
        if self.process.poll() is None:
            return ""
        return self.process.stderr.read().decode()

    def kill_all(self) -> None:
        if self.process.poll() is None:
            self.tree()
            self.process.kill()
            self.process.wait()
        for pid in self.seen:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def start_dev(tmp_path: Path) -> Iterator[Callable[..., Dev]]:
    started: list[Dev] = []

    def start(web_port: int, *args: str) -> Dev:
        started.append(Dev(web_port, *args, tmp=tmp_path))
        return started[-1]

    yield start
    for dev in started:
        dev.kill_all()


def _assert_gone(pids: list[int], timeout: float = 10.0) -> None:
    """Stopped children are reaped by dev; orphans would run on (or stay zombies of init)."""
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, [(p, _cmdline(p)) for p in left]


def test_dev_exits_1_with_one_line_naming_the_log_when_its_worker_dies(
    start_dev: Callable[[int], Dev],
) -> None:
    dev = start_dev(free_port())
    dev.wait_for_stdout(READY_LINE)
    children = dev.tree()
    assert len(children) == 2, [_cmdline(p) for p in children]  # the broker and the worker
    os.kill(dev.worker(), signal.SIGKILL)
    status = dev.wait(30)
    stderr = dev.stderr_after_exit()
    assert status == 1, stderr
    (line,) = stderr.splitlines()
    assert line.startswith("stream-app dev: the worker exited (killed by SIGKILL); its log: ")
    assert line.endswith("/worker.log") and Path(line.rsplit(" ", 1)[1]).is_file()
    _assert_gone(children)  # the broker was stopped too


def test_sigterm_stops_dev_its_worker_and_its_broker_and_exits_0(
    start_dev: Callable[[int], Dev],
) -> None:
    dev = start_dev(free_port())
    dev.wait_for_stdout(READY_LINE)
    children = dev.tree()
    assert len(children) == 2, [_cmdline(p) for p in children]
    dev.process.send_signal(signal.SIGTERM)
    status = dev.wait(60)
    stderr = dev.stderr_after_exit()
    assert status == 0, stderr
    assert stderr == ""
    _assert_gone(children)


def test_a_second_signal_while_dev_stops_kills_the_children_and_exits_quietly(
    start_dev: Callable[[int], Dev],
) -> None:
    dev = start_dev(free_port())
    dev.wait_for_stdout(READY_LINE)
    children = dev.tree()
    dev.process.send_signal(signal.SIGINT)
    dev.wait_for_stdout("stopping the worker and the broker", timeout=10)
    dev.process.send_signal(signal.SIGINT)
    status = dev.wait(30)
    stderr = dev.stderr_after_exit()
    assert status == 0, stderr
    assert stderr == ""  # no KeyboardInterrupt traceback
    _assert_gone(children)


class _Ready(http.server.BaseHTTPRequestHandler):
    """Someone else's web server, ready on every path."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"ready": true}')

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_dev_refuses_a_web_port_another_process_answers_on(
    start_dev: Callable[[int], Dev],
) -> None:
    other = http.server.HTTPServer(("127.0.0.1", 0), _Ready)
    port = other.server_address[1]
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        dev = start_dev(port)
        status = dev.wait(15)
        took = time.monotonic() - started
    finally:
        other.shutdown()
        other.server_close()
    assert dev.process.stdout is not None
    stdout = dev.process.stdout.read().decode()
    stderr = dev.stderr_after_exit()
    assert status == 2, stdout + stderr
    (line,) = stderr.splitlines()
    assert line.startswith(f"stream-app dev: port {port} (STREAM_APP_WEB_PORT) is in use")
    assert "ready" not in stdout and READY_LINE not in stdout
    assert took < 10  # refused before a broker or a worker was started


# -- issue 23 item 4 ---------------------------------------------------------------------


def _logs_folder(stdout: str) -> Path:
    (line,) = [x for x in stdout.splitlines() if x.startswith("logs: ")]
    return Path(line.removeprefix("logs: ").split(" (")[0])


def test_dev_demo_shows_revisions_and_dead_letters_and_removes_its_folder(
    start_dev: Callable[..., Dev], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A window shorter than the demo's own (20 s), so that the turns go final sooner.
    monkeypatch.setenv("STREAM_APP_LATE_DECISION_WINDOW_SECONDS", "8")
    dev = start_dev(free_port(), "--demo")
    dev.wait_for_stdout("starting the embedded broker (tansu)...\n", timeout=10)  # at once
    assert dev.stdout.startswith("starting the embedded broker")  # the first line
    dev.wait_for_stdout(READY_LINE)
    # Where an agent sends its telemetry: the worker's POST /v1/logs (issue 51).
    dev.wait_for_stdout("agents: export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:")
    # What replay shows for the same file (README): the late decision's revision, and the
    # four dead letters, each printed as the worker writes it.
    dev.wait_for_stdout('turn ["sess-7f3a","msg-a4"], revision 2: ')
    for reason in ("invalid_json", "schema", "tenant_mismatch", "unattributable_decision"):
        dev.wait_for_stdout(f"dead letter: {reason} (")
    # The session's retry, a fork at the file read: its other edit, rejected after its turn.
    dev.wait_for_stdout('turn ["sess-7f3a-retry","msg-b2"], revision 2: ')
    dev.wait_for_stdout("  decisions: dec-110 rejected (claude-code)\n")
    # Then the agent's telemetry (examples/telemetry.jsonl, issue 51), sent to POST /v1/logs:
    # its Claude Code tool_decision for toolu_03 joins msg-a3's turn as a revision.
    assert "(1 OTLP export to POST /v1/logs)" in dev.stdout
    dev.wait_for_stdout('turn ["sess-7f3a","msg-a3"], revision 2: ')
    dev.wait_for_stdout("  decisions: otlp-")
    assert "accepted (claude-code)" in dev.stdout.split('"msg-a3"], revision 2: ')[1]
    # Each turn once more, when its window has passed: final, at its latest revision.
    assert "8 s after it" in dev.stdout
    for session, call, revision in (
        ("sess-7f3a", "msg-a1", 1),
        ("sess-7f3a", "msg-a2", 1),
        ("sess-7f3a", "msg-a3", 2),
        ("sess-7f3a", "msg-a4", 2),
        ("sess-7f3a-retry", "msg-a1", 1),
        ("sess-7f3a-retry", "msg-b2", 2),
    ):
        dev.wait_for_stdout(
            f'final: turn ["{session}","{call}"] at revision {revision} (its late-decision '
            "window has passed)"
        )
    folder = _logs_folder(dev.stdout)
    assert (folder / "worker.log").is_file()
    dev.process.send_signal(signal.SIGTERM)
    status = dev.wait(60)
    assert status == 0, dev.stderr_after_exit()
    assert not folder.exists()  # removed on exit


def test_dev_keep_leaves_its_folder_of_logs(start_dev: Callable[..., Dev]) -> None:
    dev = start_dev(free_port(), "--keep")
    dev.wait_for_stdout(READY_LINE)
    dev.wait_for_stdout("(--keep: kept on exit)")
    folder = _logs_folder(dev.stdout)
    dev.process.send_signal(signal.SIGTERM)
    try:
        assert dev.wait(60) == 0, dev.stderr_after_exit()
        assert (folder / "worker.log").is_file() and (folder / "broker.log").is_file()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
