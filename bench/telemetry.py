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
"""

from __future__ import annotations

import argparse
import asyncio
import time

import aiohttp
from aiohttp import web
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

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


def records(n: int) -> list[LogRecord]:
    out: list[LogRecord] = []
    for i in range(n):
        kind = i % 5
        session = f"sess-{i // 50}"
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


def batches(n: int, size: int) -> list[ExportLogsServiceRequest]:
    all_records = records(n)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400)
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


if __name__ == "__main__":
    main()
