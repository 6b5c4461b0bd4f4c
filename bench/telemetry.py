"""The agents' telemetry (issue 51): the translator's CPU per log record, and log records/s
through the OTLP/HTTP receiver.

``python -m bench.telemetry [--records 20000] [--batch 100] [--rounds 5] [--requests 400]``

- **translator**: requests of ``--batch`` log records (the OTel SDK's batches are up to 512),
  a mix as an agent sends them: Claude Code's ``tool_decision`` (with ``tool_parameters``)
  and ``api_request`` (ignored), Codex's ``tool_decision``, Copilot's feedback and survival,
  each record distinct. Each request goes through ``translate_value`` as the telemetry
  agent runs it (decode, translate, the intake's check of each decision); µs of process CPU
  per log record, protobuf and OTLP JSON, the best of ``--rounds``.
- **receiver**: ``--requests`` protobuf requests of ``--batch`` records POSTed, 8 at a time,
  to ``OtlpReceiver`` on a loopback aiohttp server in this process, its ``send`` answering
  at once (no broker: the receiver's own cost, an upper bound of what a worker takes in);
  requests/s and log records/s, wall clock, client and server on one event loop.
- **receiver on a broker** (``--turn-path``): ``--requests`` requests of ``--batch``
  decision log records POSTed, 8 at a time, to one idle worker's /v1/logs, each answered
  once the broker acknowledged its record (the worker translating them meanwhile).
- **turn path** (``--turn-path``, a broker: embedded, or ``--bootstrap``'s): one worker takes
  ``--turn-records`` of the bench workload paced at ``--rate`` records/s, with, beside it:
  (a) nothing; (b) ``--load`` decisions/s produced to the decisions topic as
  DeveloperDecisions (a team's own producer); (c) the same decisions as telemetry log
  records POSTed to its /v1/logs (requests of ``--batch``, every log record a decision);
  (d) the same requests written to its telemetry topic, as the Collector's ``otlp_proto``;
  (e) ``--load`` log records/s POSTed that are no decision (Claude Code's ``api_request``:
  the receiver's and translator's cost alone). Each variant on a fresh cluster, a round of
  them in turn, ``--turn-rounds`` rounds; the median of each figure: CPU per input (the
  workload's records and the decisions, not the log records), turn latency p50/p99, loop
  lag, and ratios between variants of the same run. The load's decisions are for sessions
  no turn has: the turns, and so the latency samples, are the workload's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import aiohttp
from aiohttp import web
from aiokafka import AIOKafkaProducer
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from bench import cluster, core, measure
from bench.workload import encoded, generate
from stream_app.cli.arguments import bootstrap_argument
from stream_app.config import Settings
from stream_app.core.policy import Policy
from stream_app.ingest import otlp
from stream_app.ingest.telemetry import translate, translate_value
from stream_app.worker.otlp_receiver import PROTOBUF, OtlpReceiver
from tests.ingest.otlp_records import (
    T0,
    claude_api_request,
    claude_code,
    codex,
    copilot_feedback,
    copilot_survival,
    request,
)

POLICY = Policy(org_id="bench")
TELEMETRY_TOPIC: str = Settings.model_fields["topic_telemetry"].default  # each cluster fresh


def records(n: int, sessions: str = "sess") -> list[LogRecord]:
    out: list[LogRecord] = []
    for i in range(n):
        kind = i % 5
        session = f"{sessions}-{i // 50}"
        if kind == 0:
            parameters = (
                f'{{"file_path": "/repo/src/mod_{i}.py", "old_string": "a", "new_string": "b"}}'
            )
            record = claude_code(
                session,
                f"toolu_{i}",
                "accept",
                "user_temporary",
                sequence=i,
                extra={"tool_parameters": parameters},
            )
        elif kind == 1:
            record = claude_api_request(session)
        elif kind == 2:
            record = codex(session, f"call_{i}", observed=T0 + i)
        elif kind == 3:
            record = copilot_feedback(f"req-{i}")
            record.attributes.add(key="session.id").value.string_value = session
        else:
            record = copilot_survival(f"req-{i}", delay_ms=1000 * i)
            record.attributes.add(key="session.id").value.string_value = session
        out.append(record)
    return out


def batches(n: int, size: int, sessions: str = "sess") -> list[ExportLogsServiceRequest]:
    all_records = records(n, sessions)
    return [request(all_records[i : i + size]) for i in range(0, n, size)]


def translator(requests: list[ExportLogsServiceRequest], rounds: int) -> dict[str, float]:
    n = sum(otlp_count(r) for r in requests)
    figures: dict[str, float] = {}
    for name, values in (
        ("protobuf", [r.SerializeToString() for r in requests]),
        ("json", [otlp.encode_json(r) for r in requests]),
    ):
        best = float("inf")
        for _ in range(rounds):
            start = time.process_time()
            for value in values:
                translate_value(value, POLICY)
            best = min(best, time.process_time() - start)
        figures[name] = best / n * 1e6
    return figures


def otlp_count(r: ExportLogsServiceRequest) -> int:
    return sum(len(s.log_records) for rl in r.resource_logs for s in rl.scope_logs)


async def post_eight_at_a_time(
    http: aiohttp.ClientSession, port: int, bodies: list[bytes], total: int
) -> float:
    """POSTs ``total`` protobuf requests to /v1/logs on ``port``, the ``bodies`` in turn, 8
    at a time, each to be answered 200; the wall clock seconds they took."""
    url = f"http://127.0.0.1:{port}/v1/logs"

    async def post(i: int) -> None:
        body = bodies[i % len(bodies)]
        async with http.post(url, data=body, headers={"Content-Type": PROTOBUF}) as r:
            assert r.status == 200, r.status

    start = time.perf_counter()
    for at in range(0, total, 8):
        await asyncio.gather(*(post(i) for i in range(at, min(at + 8, total))))
    return time.perf_counter() - start


async def receiver(requests: list[ExportLogsServiceRequest], total: int) -> tuple[float, float]:
    async def send(record: bytes) -> None:
        return None

    app = web.Application()
    OtlpReceiver(send).add_route(app)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    bodies = [r.SerializeToString() for r in requests]
    count = otlp_count(requests[0])
    try:
        async with aiohttp.ClientSession() as http:
            wall = await post_eight_at_a_time(http, port, bodies, total)
    finally:
        await runner.cleanup()
    return total / wall, total * count / wall


class Sent:
    """What a load sent while the workload ran: decisions among it, and refusals."""

    def __init__(self) -> None:
        self.log_records = 0
        self.decisions = 0
        self.refused = 0


async def paced(per_second: float, step: Callable[[int], Awaitable[None]]) -> None:
    """``step(i)`` for i = 0, 1, ... at ``per_second``, each awaited, until cancelled."""
    start, i = time.perf_counter(), 0
    while True:
        await step(i)
        i += 1
        await asyncio.sleep(max(0.0, start + i / per_second - time.perf_counter()))


class Load:
    """One variant's load beside the workload (see the module's docstring), a request's
    worth (``per_request`` log records, ``decisions`` of them decisions) a step: POSTed to
    the worker's /v1/logs (``bodies``), or written to a topic (``chunks``: (topic or kind,
    key, value) each: DeveloperDecisions to the decisions topic, or the request as one
    record to the telemetry topic, as the Collector writes it)."""

    def __init__(
        self,
        per_request: int,
        decisions: int,
        bodies: list[bytes] | None = None,
        chunks: list[list[tuple[str, bytes | None, bytes]]] | None = None,
    ) -> None:
        self.per_request, self.decisions = per_request, decisions
        self.bodies, self.chunks = bodies or [], chunks or []
        self.sent = Sent()

    async def run(
        self, on: cluster.Cluster, per_second: float, ports: list[int], topics: dict[str, str]
    ) -> None:
        if self.bodies:
            await self._post(per_second / self.per_request, ports[0])
        else:
            await self._produce(on, per_second / self.per_request, topics)

    def _count(self) -> None:
        self.sent.log_records += self.per_request
        self.sent.decisions += self.decisions

    async def _post(self, per_second: float, port: int) -> None:
        url = f"http://127.0.0.1:{port}/v1/logs"
        async with aiohttp.ClientSession() as http:

            async def step(i: int) -> None:
                body = self.bodies[i % len(self.bodies)]
                async with http.post(url, data=body, headers={"Content-Type": PROTOBUF}) as r:
                    if r.status == 200:
                        self._count()
                    else:
                        self.sent.refused += 1

            await paced(per_second, step)

    async def _produce(
        self, on: cluster.Cluster, per_second: float, topics: dict[str, str]
    ) -> None:
        producer = AIOKafkaProducer(**on.options, linger_ms=5, max_batch_size=262144)
        await producer.start()
        try:

            async def step(i: int) -> None:
                for topic, key, value in self.chunks[i % len(self.chunks)]:
                    await producer.send(topics.get(topic, topic), value, key=key)
                self._count()

            await paced(per_second, step)
        finally:
            await producer.stop()


VARIANTS = {
    "a": "the workload alone",
    "b": "+ decisions produced to the decisions topic",
    "c": "+ the same decisions POSTed to /v1/logs",
    "d": "+ the same decisions written to the telemetry topic (as the Collector)",
    "e": "+ ignored log records (api_request) POSTed to /v1/logs",
}


def loads(args: argparse.Namespace) -> dict[str, Load | None]:
    """Each variant's load: the same decisions (distinct, sessions no turn has) in (b), (c)
    and (d), as each way writes them; (e) as many log records a second, none a decision."""
    n = args.load * 40  # distinct for 40 s: longer than a run's load (the collapse)
    decision_records = [r for i, r in enumerate(records(n * 5 // 4, "otel")) if i % 5 != 1]
    requests = [request(decision_records[i : i + args.batch]) for i in range(0, n, args.batch)]
    bodies = [r.SerializeToString() for r in requests]
    chunks: list[list[tuple[str, bytes | None, bytes]]] = [
        [("decisions", d.session_id.encode(), d.value) for d in translate(r, POLICY).decisions]
        for r in requests
    ]
    assert all(len(c) == args.batch for c in chunks), "every log record a decision"
    ignored = [claude_api_request(f"otel-ignored-{i}") for i in range(args.batch)]
    return {
        "a": None,
        "b": Load(args.batch, args.batch, chunks=chunks),
        "c": Load(args.batch, args.batch, bodies=bodies),
        "d": Load(args.batch, args.batch, chunks=[[(TELEMETRY_TOPIC, None, b)] for b in bodies]),
        "e": Load(args.batch, 0, bodies=[request(ignored).SerializeToString()]),
    }


async def turn_path(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    """The worker's turn path, each variant on a fresh cluster, ``--turn-rounds`` rounds of
    them in turn (see the module's docstring)."""
    lines = list(generate(args.turn_records, args.sessions, seed=3))
    expected = core.core_rate(lines, rounds=1)[1]
    variants = [v for v in VARIANTS if v in args.variants]
    rows: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    each = loads(args)
    for round_ in range(args.turn_rounds):
        for name in variants:
            load = each[name]
            if load is not None:
                load.sent = Sent()
            log = args.workdir / f"broker-telemetry-{name}-{round_}.log"
            async with cluster.fresh(args.bootstrap, log) as on:
                along = None if load is None else partial(load.run, on, args.load)
                m = await measure.worker_rate(
                    on,
                    encoded(lines),
                    expected,
                    1,
                    args.workdir,
                    rate=args.rate,
                    alongside_topics=along,
                )
            sent = load.sent if load is not None else Sent()
            inputs = args.turn_records + sent.decisions
            m["inputs"] = inputs
            m["decisions"] = sent.decisions
            m["log_records"] = sent.log_records
            m["refused"] = sent.refused
            m["cpu_us_per_input"] = m["worker_cpu_seconds"] / inputs * 1e6
            rows[name].append(m)
            print(
                f"  round {round_ + 1} ({name}): p50 {m['p50_ms']:.1f} ms, p99 "
                f"{m['p99_ms']:.1f} ms, CPU {m['cpu_us_per_input']:.0f} µs/input, "
                f"{sent.decisions:,} decisions, {sent.log_records:,} log records, "
                f"{sent.refused} refused",
                flush=True,
            )
    return rows


async def receiver_on_broker(args: argparse.Namespace) -> tuple[float, float]:
    """Log records/s POSTed to one idle worker's /v1/logs (decisions, requests of
    ``--batch``, 8 at a time): each answered once the broker acknowledged its record, the
    worker translating them meanwhile; requests/s and log records/s, wall clock."""
    load = loads(args)["c"]
    assert load is not None
    total = args.requests
    log = args.workdir / "broker-telemetry-receiver.log"
    async with (
        cluster.fresh(args.bootstrap, log) as on,
        measure.running(on, 1, args.workdir) as (_, _, _, ports),
        aiohttp.ClientSession() as http,
    ):
        wall = await post_eight_at_a_time(http, ports[0], load.bodies, total)
    return total / wall, total * args.batch / wall


KEYS = ("cpu_us_per_input", "p50_ms", "p99_ms", "loop_lag_p99_ms", "loop_lag_max_ms")


def median(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in rows) for k in (*KEYS, "inputs", "decisions")}


def turn_path_lines(rows: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> list[str]:
    rounds = len(next(iter(rows.values())))
    out = [
        f"turn path: {args.turn_records:,} records at {args.rate:,.0f}/s, one worker; loads of "
        f"{args.load:,}/s in requests of {args.batch}; median of {rounds} rounds, each "
        "variant on a fresh cluster, in turn"
    ]
    out.append("     CPU µs/input  p50 ms  p99 ms  loop lag p99/max ms   inputs (decisions)")
    med = {name: median(r) for name, r in rows.items()}
    for name, m in med.items():
        out.append(
            f"  {name}  {m['cpu_us_per_input']:10.0f} {m['p50_ms']:7.1f} {m['p99_ms']:7.1f}"
            f"  {m['loop_lag_p99_ms']:8.1f} /{m['loop_lag_max_ms']:6.1f}   "
            f"{m['inputs']:8,.0f} ({m['decisions']:,.0f})  {VARIANTS[name]}"
        )
    for top, bottom in (("c", "b"), ("c", "a"), ("d", "b"), ("e", "a"), ("b", "a")):
        if top in med and bottom in med:
            ratio = {
                k: med[top][k] / med[bottom][k] if med[bottom][k] else 0.0
                for k in ("cpu_us_per_input", "p50_ms", "p99_ms", "loop_lag_p99_ms")
            }
            out.append(f"{top}/{bottom}: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratio.items()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--turn-path", action="store_true", help="also the broker part")
    parser.add_argument("--turn-records", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rate", type=float, default=1000.0, help="input records/s")
    parser.add_argument("--load", type=int, default=2000, help="decisions (log records)/s")
    parser.add_argument("--turn-rounds", type=int, default=3)
    parser.add_argument("--variants", default="abcde", help="of the turn path, e.g. abc")
    parser.add_argument("--bootstrap", type=bootstrap_argument, help="a broker of your own")
    args = parser.parse_args()
    requests = batches(args.records, args.batch)
    figures = translator(requests, args.rounds)
    print(
        f"translator: {figures['protobuf']:.1f} µs CPU per log record (protobuf), "
        f"{figures['json']:.1f} (OTLP JSON); {args.records} records in requests of {args.batch}"
    )
    per_second, records_per_second = asyncio.run(receiver(requests, args.requests))
    print(
        f"receiver: {per_second:.0f} requests/s, {records_per_second:.0f} log records/s "
        f"({args.requests} requests of {args.batch}, no broker)"
    )
    if args.turn_path:
        with tempfile.TemporaryDirectory(prefix="bench-telemetry-") as workdir:
            args.workdir = Path(workdir)
            per_second, records_per_second = asyncio.run(receiver_on_broker(args))
            print(
                f"receiver on a broker: {per_second:.0f} requests/s, {records_per_second:.0f} "
                f"log records/s ({args.requests} requests of {args.batch} decisions, one worker)",
                flush=True,
            )
            rows = asyncio.run(turn_path(args))
        print("\n".join(turn_path_lines(rows, args)))


if __name__ == "__main__":
    main()
