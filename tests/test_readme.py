"""Issue 23 item 1: the README is for users, short, in the order they need it.

It is also the wheel's long description, so it holds no development history (that is in
the commit messages) and installs only from what exists: a checkout or
a built wheel, not an index the package is not on.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
ORDER = [
    "What it does",
    "Run the demo",
    "Replay a file",
    "Run a worker",
    "Produce and consume",
    "Configuration",
    "Operate",
    "Deploy",
    "Develop",
]


def sections() -> dict[str, str]:
    """The README's second-level sections by title, in order."""
    parts = re.split(r"^## (.+)$", README, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_readme_is_at_most_250_lines_and_is_the_wheels_description() -> None:
    assert len(README.splitlines()) <= 250
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["readme"] == "README.md"


def test_the_sections_come_in_the_order_a_user_needs_them() -> None:
    titles = list(sections())
    assert [t for t in titles if t in ORDER] == ORDER
    assert titles[-1] == "Develop"
    picture = sections()["What it does"]
    for name in ("llm.messages", "developer.decisions", "assemble", "tables", "turns.dlq"):
        assert name in picture
    assert picture.isascii()


def test_develop_gives_the_commands_ci_runs_and_the_fast_subset() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.strip() for line in ci if line.strip().startswith("python -m p")]
    commands = [c.split(" ||")[0] for c in commands if "upgrade pip" not in c]
    assert commands == ["python -m pip install -e '.[dev]'", "python -m pytest"]
    develop = sections()["Develop"]
    blocks = re.findall(r"```\n(.*?)```", develop, flags=re.DOTALL)
    assert blocks[0].splitlines() == commands
    assert 'python -m pytest -m "not slow"' in develop


def test_it_installs_from_a_checkout_or_a_wheel_and_keeps_no_history() -> None:
    demo = sections()["Run the demo"]
    assert "python -m pip install '.[broker]'" in demo and "pip install dist/*.whl" in demo
    assert "pip install 'stream-app" not in README  # not on an index
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README)  # dated figures: docs/benchmarks.md
    assert not re.search(r"\(\b[0-9a-f]{7}\b\)", README)  # commit hashes: the git history
    assert not re.search(r"\brounds?\b", README)  # the rebalance rounds: the git history
    for history in ("before the memory work", "| hole"):
        assert history not in README


def test_every_performance_figure_says_the_command_that_measures_it() -> None:
    rows = [r for r in sections()["Performance"].splitlines() if r.startswith("| ")][1:]
    rows = [r for r in rows if not r.startswith("|---")]
    assert rows
    for row in rows:
        command = row.rstrip(" |").rsplit("|", 1)[-1].strip()
        assert command.startswith("`python -m bench"), row


def test_every_relative_link_resolves() -> None:
    for doc in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).exists(), (doc.name, target)


def test_the_replay_example_runs_as_written_and_writes_nothing_into_the_checkout(
    tmp_path: Path,
) -> None:
    """Issue 43 item 4: a newcomer pastes the replay block in the checkout; its files go to a
    temporary folder, not among the project's own."""
    (block,) = re.findall(r"```\n(.*?stream-app replay .*?)```", sections()["Replay a file"], re.S)
    before = sorted(p.name for p in ROOT.iterdir())
    script = block + 'echo "$out"\n'
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        ["bash", "-euc", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in ROOT.iterdir()) == before
    out = Path(done.stdout.splitlines()[-1])
    assert out.is_relative_to(tmp_path) and (out / "turns.jsonl").stat().st_size > 0
