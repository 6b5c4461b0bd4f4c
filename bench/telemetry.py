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
- **turn path** (``--turn-path``, a broker: embedded, or ``--bootstrap``'s): one worker takes
  ``--turn-records`` of the bench workload paced at ``--rate`` records/s, twice in the same
  run, each on a fresh cluster: without telemetry, then with ``--load`` log records/s POSTed
  to its ``/v1/logs`` meanwhile (requests of ``--batch``, sessions of their own), which it
  writes to its telemetry topic, reads back and translates. The turn latency (p50, p99), the
  loop lag and the CPU per input record of both, and their ratios (with / without).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from bench import cluster, core, measure
from bench.workload import encoded, generate
from stream_app.cli.arguments import bootstrap_argument
from stream_app.core.policy import Policy
from stream_app.ingest import otlp
from stream_app.ingest.telemetry import translate_value
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
    url = f"http://127.0.0.1:{port}/v1/logs"
    try:
        async with aiohttp.ClientSession() as http:

            async def post(i: int) -> None:
                body = bodies[i % len(bodies)]
                async with http.post(url, data=body, headers={"Content-Type": PROTOBUF}) as r:
                    assert r.status == 200, r.status

            start = time.perf_counter()
            for at in range(0, total, 8):
                await asyncio.gather(*(post(i) for i in range(at, min(at + 8, total))))
            wall = time.perf_counter() - start
    finally:
        await runner.cleanup()
    return total / wall, total * count / wall


async def post_load(ports: list[int], bodies: list[bytes], per_second: float) -> None:
    """``bodies`` POSTed to the first worker's /v1/logs, paced at ``per_second`` requests,
    until cancelled; each must be answered 200."""
    url = f"http://127.0.0.1:{ports[0]}/v1/logs"
    async with aiohttp.ClientSession() as http:
        start, i = time.perf_counter(), 0
        while True:
            async with http.post(
                url, data=bodies[i % len(bodies)], headers={"Content-Type": PROTOBUF}
            ) as r:
                assert r.status == 200, r.status
            i += 1
            await asyncio.sleep(max(0.0, start + i / per_second - time.perf_counter()))


async def turn_path(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """The worker's turn path without, then with, telemetry load (see the docstring)."""
    lines = list(generate(args.turn_records, args.sessions, seed=3))
    expected = core.core_rate(lines, rounds=1)[1]
    # Distinct records (the same one twice would collapse), sessions no turn has.
    bodies = [r.SerializeToString() for r in batches(args.load * 60, args.batch, sessions="otel")]
    per_second = args.load / args.batch
    rows: dict[str, dict[str, float]] = {}
    for name in ("without", "with"):
        load = None if name == "without" else lambda ports: post_load(ports, bodies, per_second)
        log = args.workdir / f"broker-telemetry-{name}.log"
        async with cluster.fresh(args.bootstrap, log) as on:
            rows[name] = await measure.worker_rate(
                on, encoded(lines), expected, 1, args.workdir, rate=args.rate, alongside=load
            )
    return rows


def turn_path_lines(rows: dict[str, dict[str, float]], args: argparse.Namespace) -> list[str]:
    keys = ("p50_ms", "p99_ms", "loop_lag_p99_ms", "loop_lag_max_ms", "worker_cpu_us_per_record")
    out = [
        f"turn path: {args.turn_records:,} records at {args.rate:,.0f}/s, one worker; "
        f"telemetry load {args.load:,} log records/s in requests of {args.batch}"
    ]
    out.append("             p50 ms  p99 ms  loop lag p99/max ms  CPU µs/record")
    for name, m in rows.items():
        out.append(
            f"{name:>9}  {m['p50_ms']:7.1f} {m['p99_ms']:7.1f}  {m['loop_lag_p99_ms']:8.1f} /"
            f"{m['loop_lag_max_ms']:6.1f}     {m['worker_cpu_us_per_record']:8.0f}"
        )
    ratio = {k: rows["with"][k] / rows["without"][k] if rows["without"][k] else 0.0 for k in keys}
    out.append("with/without: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratio.items()))
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
    parser.add_argument("--load", type=int, default=2000, help="telemetry log records/s")
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
            rows: dict[str, Any] = asyncio.run(turn_path(args))
        print("\n".join(turn_path_lines(rows, args)))


if __name__ == "__main__":
    main()
