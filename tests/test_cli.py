"""The commands a person types: replay on a terminal, dev --demo, tail."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid
from pathlib import Path

import orjson
import pytest

from stream_app.broker.embedded import EmbeddedBroker, free_port
from stream_app.cli.main import _parser
from stream_app.console.wording import counted
from tests.kafka_io import create_topics, publish
from tests.terminal import on_a_terminal

ROOT = Path(__file__).resolve().parent.parent


def test_replay_on_a_terminal_draws_a_summary_table(tmp_path: Path) -> None:
    status, text = on_a_terminal(replay_the_example(tmp_path))
    assert status == 0
    assert "replay summary" in text and "turns emitted" in text
    assert "dead letters: tenant_mismatch" in text


@pytest.mark.broker
def test_dev_demo_runs_a_broker_and_a_worker_and_prints_the_turns() -> None:
    env = {
        **os.environ,
        "STREAM_APP_WEB_PORT": str(free_port()),
        "STREAM_APP_ID": f"dev-{uuid.uuid4().hex[:6]}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", "dev", "--demo", "--turns", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broker (Kafka protocol): 127.0.0.1:" in done.stdout
    # A line to paste, after which every client command finds the broker (issue 43 item 2).
    assert "clients: export STREAM_APP_BROKER_URL=kafka://127.0.0.1:" in done.stdout
    for call in ("msg-a1", "msg-a2", "msg-a3", "msg-a4"):
        assert f'turn ["sess-7f3a","{call}"]:' in done.stdout  # the key: [session, call]


@pytest.mark.broker
def test_tail_prints_turns_as_json_lines(broker: EmbeddedBroker) -> None:
    topic = f"turns-{uuid.uuid4().hex[:6]}"
    create_topics(broker.bootstrap, [topic], 2)
    turn = {
        "new_messages": [],
        "completion": "ok",
        "decisions": [],
        "inference_call_id": "c1",
        "tool_calls": [],
    }
    publish(broker.bootstrap, [{"topic": "t", "key": "c1", "value": turn}], {"t": topic})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stream_app",
            "tail",
            "--json",
            "--limit",
            "1",
            "--bootstrap",
            broker.bootstrap,
            "--topic",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [orjson.loads(line) for line in done.stdout.splitlines()] == [
        {"key": "c1", "headers": {}, "value": turn}
    ]


# -- issue 23 item 5: the text a newcomer reads, and the exit statuses ---------------------


def replay_the_example(out: Path) -> list[str]:
    """``stream-app replay``'s arguments for the example, its outputs in ``out``."""
    example = str(ROOT / "examples" / "session.jsonl")
    return ["replay", example, "--out", str(out / "t"), "--dlq", str(out / "d")]


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``stream-app ARGS`` as a user runs it, what it printed captured."""
    return subprocess.run(
        [sys.executable, "-m", "stream_app", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def test_the_help_is_plain_text_and_every_command_says_what_it_does() -> None:
    top = run("--help")
    assert top.returncode == 0
    assert "``" not in top.stdout and "stream-app dev --demo" in top.stdout
    (commands,) = (a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        assert sub.description and len(sub.description) > 80, name  # more than the one-liner
        assert "``" not in sub.description, name
    assert "Ctrl-C" in commands.choices["tail"].description
    assert "until Ctrl-C" in top.stdout  # tail's one line says it never ends by itself


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["worker", "--loglevel", "loud"], "argument --loglevel: invalid choice: 'loud'"),
        (
            ["tail", "--bootstrap", "http://x:1"],
            "argument --bootstrap: http:// is not a Kafka address",
        ),
        (
            ["publish", "f", "--bootstrap", "http://x:1"],
            "argument --bootstrap: http:// is not a Kafka address",
        ),
        (
            ["export", "--out", "o", "--bootstrap", "ftp://x:1"],
            "argument --bootstrap: ftp:// is not a Kafka address",
        ),
        (["replay", "in.jsonl"], "the following arguments are required: --out, --dlq"),
        (["launch"], "argument COMMAND: invalid choice: 'launch'"),
    ],
)
def test_a_usage_error_is_one_line_naming_the_command_and_exit_2(
    args: list[str], said: str
) -> None:
    done = run(*args)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    command = "stream-app" if args[0] == "launch" else f"stream-app {args[0]}"
    assert line.startswith(f"{command}: {said}"), line
    assert line.endswith(f"; see {command} --help")


def test_a_kafka_url_is_a_bootstrap_address_too(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    example = (ROOT / "examples" / "session.jsonl").read_text().splitlines()
    source.write_text(example[0] + "\n")
    port = free_port()  # nothing listens there
    done = run("publish", str(source), "--bootstrap", f"kafka://127.0.0.1:{port}")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"stream-app publish: no Kafka broker answers at 127.0.0.1:{port} ")


@pytest.mark.parametrize("command", ["publish", "export", "tail"])
def test_every_client_command_finds_the_broker_as_the_worker_does_and_says_how_to_point_it(
    command: str, tmp_path: Path
) -> None:
    """Issue 43 item 2: with no ``--bootstrap`` a client command connects where
    ``STREAM_APP_BROKER_URL`` says, as the worker does, and its "no broker" error names both
    ways to point it at a broker."""
    source = tmp_path / "in.jsonl"
    source.write_text((ROOT / "examples" / "session.jsonl").read_text().splitlines()[0] + "\n")
    args = {"publish": [str(source)], "export": ["--out", str(tmp_path / "out.jsonl")], "tail": []}
    port = free_port()  # nothing listens there
    env = {**os.environ, "STREAM_APP_BROKER_URL": f"kafka://127.0.0.1:{port}"}
    done = run(command, *args[command], env=env)
    assert done.returncode == 2, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"stream-app {command}: "), last
    assert f"no Kafka broker answers at 127.0.0.1:{port}" in last
    assert "--bootstrap" in last and "STREAM_APP_BROKER_URL" in last


def test_publish_of_a_file_whose_every_line_is_rejected_fails_without_a_broker(
    tmp_path: Path,
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"topic": "users", "value": {}}\n{not json\n')
    done = run("publish", str(source), "--bootstrap", f"127.0.0.1:{free_port()}")
    assert done.returncode == 2, done.stderr
    *rejected, last = done.stderr.splitlines()
    assert [line.split(": ", 2)[1] for line in rejected] == [f"{source}:1", f"{source}:2"]
    assert last == (
        "stream-app publish: nothing sent: every line was rejected "
        "(2 lines: invalid_json 1, schema 1)"
    )
    (tmp_path / "empty.jsonl").write_text("\n")
    done = run("publish", str(tmp_path / "empty.jsonl"))
    assert done.returncode == 2
    assert done.stderr == "stream-app publish: nothing sent: the file holds no records\n"


def test_replay_counts_in_words_with_the_prefix_its_errors_have(tmp_path: Path) -> None:
    done = run(*replay_the_example(tmp_path))
    assert done.returncode == 0
    (summary,) = done.stderr.splitlines()
    assert summary.startswith("stream-app replay: 17 messages, 6 decisions read; ")
    for said in ("6 turns emitted, 2 revisions;", "1 duplicate decision;", "2 parts skipped"):
        assert said in summary
    assert summary.endswith("; 2 sessions in state")
    missing = run("replay", str(tmp_path / "nope"), "--out", "o", "--dlq", "d")
    assert missing.stderr.startswith("stream-app replay: cannot read ")


def test_counted_says_one_and_many_apart() -> None:
    assert [counted(n, "revision") for n in (0, 1, 2)] == [
        "0 revisions",
        "1 revision",
        "2 revisions",
    ]
    assert counted(1, "entry", "entries") == "1 entry" and counted(3, "entry", "entries") == (
        "3 entries"
    )


def test_an_interrupt_anywhere_in_the_command_is_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during the imports (the command's first second) or in a subcommand that has
    no word of its own for it: no traceback. The console script and ``python -m
    stream_app`` both enter through ``cli.run``."""
    import tomllib

    import stream_app.cli.main
    from stream_app.cli import run

    def interrupted(argv: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(stream_app.cli.main, "main", interrupted)
    assert run(["replay", "x"]) == 130
    assert capsys.readouterr().err == "stream-app: interrupted\n"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["stream-app"] == "stream_app.cli:run"
    assert "from stream_app.cli import run" in (ROOT / "stream_app" / "__main__.py").read_text()
