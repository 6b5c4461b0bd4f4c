"""Issue 54, know the release: ``stream-app --version``, the ``startup`` line and
``stream_app_build_info`` name the package version (pyproject.toml's, bumped per release,
read from the installed package's metadata) and the commit it was built from when known."""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import faust
import pytest

import stream_app
from stream_app.observability import metrics

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _commit_asked_again() -> Any:
    stream_app.commit.cache_clear()
    yield
    stream_app.commit.cache_clear()


def head() -> str | None:
    """This checkout's commit as git abbreviates it (None: no git, or no checkout)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else None


def version_line(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_the_version_is_pyprojects_read_from_the_installed_metadata() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert stream_app.__version__ == importlib.metadata.version("stream-app")
    # A stale editable install (made before the bump) says otherwise: pip install -e . again.
    assert stream_app.__version__ == pyproject["version"] != "0.1.0"


def test_version_names_the_commit_of_a_checkout_or_of_an_image_or_none() -> None:
    version = importlib.metadata.version("stream-app")
    env = {k: v for k, v in os.environ.items() if k != stream_app.COMMIT_VARIABLE}
    at = head()
    if at is not None:  # this checkout: its HEAD, as a local version label
        assert version_line(env) == f"stream-app {version}+g{at}\n"
    # An image: no .git, the commit it was built with (the Dockerfile's SOURCE_COMMIT).
    image = {**env, "SOURCE_COMMIT": "0123abc"}
    assert version_line(image) == f"stream-app {version}+g0123abc\n"
    # No git to ask (nor a variable): the version alone, and no error.
    assert version_line({**env, "PATH": ""}) == f"stream-app {version}\n"
    # A variable that is no commit is not printed as one.
    assert version_line({**env, "SOURCE_COMMIT": "main; rm -rf"}) == f"stream-app {version}\n"


def test_commit_is_none_whatever_git_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stream_app.COMMIT_VARIABLE, raising=False)

    def hangs(*args: Any, **kwargs: Any) -> Any:
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    monkeypatch.setattr(subprocess, "run", hangs)
    assert stream_app.commit() is None and stream_app.release() == stream_app.__version__
    stream_app.commit.cache_clear()

    def elsewhere(*args: Any, **kwargs: Any) -> Any:
        # The package inside some other repository's tree (a virtualenv in a checkout).
        return subprocess.CompletedProcess(args[0], 0, "/somewhere/else\nabc1234\n", "")

    monkeypatch.setattr(subprocess, "run", elsewhere)
    assert stream_app.commit() is None
    stream_app.commit.cache_clear()

    def fails(*args: Any, **kwargs: Any) -> Any:
        return subprocess.CompletedProcess(args[0], 128, "", "fatal: not a git repository")

    monkeypatch.setattr(subprocess, "run", fails)
    assert stream_app.commit() is None


def test_the_release_is_asked_of_git_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stream_app.COMMIT_VARIABLE, raising=False)
    calls: list[list[str]] = []
    package = Path(stream_app.__file__).resolve().parent

    def run(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        assert kwargs["timeout"] <= 5 and Path(kwargs["cwd"]) == package
        return subprocess.CompletedProcess(args[0], 0, f"{package.parent}\n7092ffb\n", "")

    monkeypatch.setattr(subprocess, "run", run)
    assert stream_app.release() == f"{stream_app.__version__}+g7092ffb"
    assert stream_app.release() == f"{stream_app.__version__}+g7092ffb"
    assert len(calls) == 1


def test_build_info_is_one_series_at_1_naming_version_and_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(stream_app.COMMIT_VARIABLE, "7092ffb")
    labels = metrics.build_info()
    assert labels == {"version": stream_app.__version__, "commit": "7092ffb"}
    assert metrics.REGISTRY.get_sample_value("stream_app_build_info", labels) == 1
    samples = [
        s
        for m in metrics.REGISTRY.collect()
        if m.name == "stream_app_build_info"
        for s in m.samples
    ]
    assert len(samples) == 1
    stream_app.commit.cache_clear()
    monkeypatch.setenv(stream_app.COMMIT_VARIABLE, "")
    monkeypatch.setenv("PATH", "")  # no git either: the commit label is empty
    assert metrics.build_info()["commit"] in ("", head())


def test_the_startup_line_names_the_release(monkeypatch: pytest.MonkeyPatch) -> None:
    from stream_app import app as worker_app
    from stream_app.observability import logs

    monkeypatch.setenv(stream_app.COMMIT_VARIABLE, "7092ffb")
    lines: list[tuple[str, dict[str, Any]]] = []

    async def declared(self: faust.Topic) -> None:
        pass

    monkeypatch.setattr(faust.Topic, "maybe_declare", declared)
    monkeypatch.setattr(logs, "quiet_root_logger", lambda: None)
    monkeypatch.setattr(logs, "event", lambda name, *a, **fields: lines.append((name, fields)))
    (on_startup,) = (t for t in worker_app.app._app_tasks if t.__name__ == "on_startup")
    asyncio.run(inspect.unwrap(on_startup)())
    ((name, fields),) = lines
    assert name == "startup"
    assert fields["version"] == stream_app.__version__ and fields["commit"] == "7092ffb"
    sample = {"version": stream_app.__version__, "commit": "7092ffb"}
    assert metrics.REGISTRY.get_sample_value("stream_app_build_info", sample) == 1
