"""Properties of the core over generated sessions (SPEC §3, §4, §6).

Redeliveries, the interleaving of sessions, where a decision lands relative to its turn,
and which of a Codex decision and its pathless resend comes first, or which of two acts
under one decision_id, are delivery accidents; none of them may change the final revision
of any turn.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.factories import Run, assistant, decision, message, tool_call

Record = tuple[str, dict[str, Any]]
Session = tuple[list[dict[str, Any]], list[dict[str, Any]]]

words = st.text(alphabet="abc xyz\n", max_size=8)


@st.composite
def sessions(draw: st.DrawFn) -> list[Session]:
    """Per session: its messages in publication order, and its decisions."""
    out = []
    for s in range(draw(st.integers(1, 3))):
        sid = f"s{s}"
        with_sequence = draw(st.booleans())
        messages: list[dict[str, Any]] = []
        reachable: list[str] = []
        seq = 0
        for _ in range(draw(st.integers(1, 4))):
            for _ in range(draw(st.integers(0, 2))):
                seq += 1
                role = draw(st.sampled_from(["ROLE_USER", "ROLE_TOOL", "ROLE_ASSISTANT"]))
                messages.append(
                    message(
                        sid,
                        role,
                        draw(words),
                        message_id=f"{sid}-m{seq}",
                        sequence=seq if with_sequence else None,
                    )
                )
            seq += 1
            tools = [
                draw(st.sampled_from([f"{sid}-t{seq}-{i}", "shared"]))
                for i in range(draw(st.integers(0, 2)))
            ]
            messages.append(
                assistant(
                    sid,
                    draw(words),
                    message_id=f"{sid}-a{seq}",
                    sequence=seq if with_sequence else None,
                    tool_calls=[tool_call(t, arguments={"x": t}) for t in tools],
                )
            )
            reachable += [f"{sid}-a{seq}", *tools]
        decisions = [
            decision(
                sid,
                draw(st.sampled_from([*reachable, "nowhere", None])),
                decision_id=f"{sid}-d{d}",
                occurred_at=f"2026-01-01T10:00:{d:02d}Z",
                harness=draw(st.sampled_from(["claude-code", "pi", "copilot", "codex"])),
                accepted=draw(st.booleans()),
            )
            for d in range(draw(st.integers(0, 4)))
        ]
        out.append((messages, decisions))
    return out


Pair = tuple[dict[str, Any], dict[str, Any]]


@st.composite
def with_pairs(draw: st.DrawFn) -> tuple[list[Session], list[Pair]]:
    """``sessions``, each with Codex pairs (a decision with its path and its pathless resend,
    under the same decision_id or a new one) and second acts under the decision_id of one
    of its decisions (``accepted`` the other way: a conflict); and those pairs."""
    out: list[Session] = []
    pairs: list[Pair] = []
    for s, (messages, decisions) in enumerate(draw(sessions())):
        sid = f"s{s}"
        reachable = [m["message"]["messageId"] for m in messages if "finishReason" in m["message"]]
        reachable += [c["id"] for m in messages for c in m["message"].get("toolCalls", [])]
        extra: list[dict[str, Any]] = []
        for p in range(draw(st.integers(0, 2))):
            with_path = decision(
                sid,
                draw(st.sampled_from([*reachable, "nowhere"])),
                decision_id=f"{sid}-codex{p}",
                occurred_at=f"2026-01-01T11:00:{p:02d}Z",
                harness="codex",
                file_path="src/b.py",
                accepted=draw(st.booleans()),
            )
            resent_as = draw(st.sampled_from([with_path["decision_id"], f"{sid}-resend{p}"]))
            resend = with_path | {"file_path": "", "decision_id": resent_as}
            extra += [with_path, resend]
            pairs.append((with_path, resend))
        # Not a resend under a new id: a copy that turns out a duplicate after it met a
        # conflict is not taken back (docs/semantics.md, "Collapse").
        firsts = [d for d in decisions + extra if "resend" not in d["decision_id"]]
        for _ in range(draw(st.integers(0, 2) if firsts else st.just(0))):
            first = draw(st.sampled_from(firsts))
            second = first | {"accepted": not first["accepted"]}
            extra.append(second)
            pairs.append((first, second))
        out.append((messages, decisions + extra))
    return out, pairs


def swapped(stream: list[Record], pairs: list[Pair]) -> list[Record]:
    """The stream with the two records of each pair in each other's place."""
    out = list(stream)
    for a, b in pairs:
        i = next(n for n, (_, v) in enumerate(out) if v is a)
        j = next(n for n, (_, v) in enumerate(out) if v is b)
        out[i], out[j] = out[j], out[i]
    return out


def arrange(generated: list[Session], rnd: random.Random) -> list[Record]:
    """One delivery order: sessions interleaved, each decision anywhere in the stream."""
    queues = [[("messages", m) for m in msgs] for msgs, _ in generated]
    stream: list[Record] = []
    while any(queues):
        stream.append(rnd.choice([q for q in queues if q]).pop(0))
    for _, decisions in generated:
        for d in decisions:
            stream.insert(rnd.randint(0, len(stream)), ("decisions", d))
    return stream


def run(stream: list[Record]) -> Run:
    r = Run()
    for kind, value in stream:
        r.feed(kind, value)  # validates every emitted Turn against the schema
    return r


def letters(r: Run) -> Counter[tuple[str, str]]:
    return Counter((d["reason"], d["value"]) for d in r.dead_letters)


def redeliver(stream: list[Record], rnd: random.Random, copies: int) -> list[Record]:
    out = list(stream)
    for _ in range(copies):
        i = rnd.randrange(len(stream))
        kind, value = stream[i]
        first = out.index(stream[i])
        if kind == "decisions" and rnd.random() < 0.5:  # a producer retry regenerates ids
            value = value | {
                "decision_id": value["decision_id"] + "-retry",
                "captured_at": "2026-01-02T00:00:00Z",
            }
        out.insert(rnd.randint(first + 1, len(out)), (kind, value))
    return out


COMMON = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@COMMON
@given(with_pairs(), st.randoms(use_true_random=False), st.integers(1, 12))
def test_redelivery_changes_no_final_turn_and_adds_no_revision(
    drawn: tuple[list[Session], list[Pair]], rnd: random.Random, copies: int
) -> None:
    stream = arrange(drawn[0], rnd)
    once, again = run(stream), run(redeliver(stream, rnd, copies))
    assert again.final() == once.final()
    assert len(again.revisions) == len(once.revisions)
    assert letters(again) == letters(once)


@COMMON
@given(sessions(), st.randoms(use_true_random=False), st.randoms(use_true_random=False))
def test_interleaving_and_decision_placement_change_no_final_turn(
    generated: list[Session], order_a: random.Random, order_b: random.Random
) -> None:
    a, b = run(arrange(generated, order_a)), run(arrange(generated, order_b))
    assert a.final() == b.final()
    assert letters(a) == letters(b)


@COMMON
@given(with_pairs(), st.randoms(use_true_random=False), st.integers(0, 8))
def test_every_record_is_accounted_for_exactly_once(
    drawn: tuple[list[Session], list[Pair]], rnd: random.Random, copies: int
) -> None:
    generated = drawn[0]
    stream = redeliver(arrange(generated, rnd), rnd, copies) if copies else arrange(generated, rnd)
    r = run(stream)
    fate = {offset: step.outcome for offset, step in enumerate(r.outputs)}
    assert None not in fate.values()
    dead = Counter(d["offset"] for d in r.dead_letters)
    replaced = Counter(offset for out in r.outputs for _, _, offset in out.replaced)
    assert all(n == 1 for n in (dead + replaced).values()), "a record's fate changed twice"
    for offset in dead:
        fate[offset] = "dead_lettered"
    for offset in replaced:
        assert fate[offset] == "contributed"
        fate[offset] = "duplicate"  # a resend, replaced by the copy with its path
    assert set(fate) == set(range(len(stream)))

    final = r.final()
    in_turns = {d["decision_id"] for t in final.values() for d in t["decisions"]}
    emitted = {
        p["content"]
        for t in final.values()
        for m in t["new_messages"]
        for p in m["parts"]
        if p["type"] == "text"
    }
    waiting = {
        d.decision["decision_id"]
        for sid in r.pipeline.store.session_ids()
        for d in r.pipeline.store.get(sid).waiting
    }  # type: ignore[union-attr]
    pending = {
        p.message["parts"][0]["content"]
        for sid in r.pipeline.store.session_ids()
        for p in r.pipeline.store.get(sid).pending
    }  # type: ignore[union-attr]
    for offset, (kind, value) in enumerate(stream):
        if fate[offset] != "contributed":
            continue
        if kind == "decisions":
            assert value["decision_id"] in in_turns | waiting
        else:
            assert value["message"]["content"][0]["text"] in emitted | pending
    counted = r.counts["duplicate:message"] + r.counts["duplicate:decision"]
    assert counted == sum(1 for f in fate.values() if f == "duplicate")


@COMMON
@given(with_pairs(), st.randoms(use_true_random=False), st.randoms(use_true_random=False))
def test_which_of_a_codex_pair_or_of_two_acts_under_one_id_comes_first_changes_no_final_turn(
    drawn: tuple[list[Session], list[Pair]], order_a: random.Random, order_b: random.Random
) -> None:
    generated, pairs = drawn
    stream = arrange(generated, order_a)
    runs = [run(stream), run(swapped(stream, pairs)), run(arrange(generated, order_b))]
    finals = [r.final() for r in runs]
    assert finals[1] == finals[0]
    assert finals[2] == finals[0]
    for turn in finals[0].values():  # a stable id at most once on a turn
        ids = [d["decision_id"] for d in turn["decisions"]]
        assert len(ids) == len(set(ids))
        joined = {(d["decision_id"], d["file_path"]) for d in turn["decisions"]}
        for with_path, resend in pairs:
            both = {(with_path["decision_id"], "src/b.py"), (resend["decision_id"], "")}
            assert not both <= joined, "a Codex resend beside the copy with its path"
