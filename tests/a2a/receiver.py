#!/usr/bin/env python3
"""A push notification receiver that reads each delivery with a2a-sdk's own types.

Each POST body is parsed as a2a-sdk 1.3.0's `StreamResponse` (its protobuf message, through
`google.protobuf.json_format.Parse`, which refuses unknown fields and wrong types): a body that
is not one is answered 400 and recorded as refused. It prints `listening on http://127.0.0.1:PORT`
once it accepts, and appends every request to `--record FILE` as one JSON line:
`{"ok", "status", "headers", "body", "error"?, "at"}` (`headers` lower-cased; `body` the parsed
StreamResponse back as ProtoJSON, or the raw text when refused). `--unavailable-for SECONDS`
answers 503 to everything during its first SECONDS (after the first request), to test retries.

Used by tests/it/support/a2a_sdk.rs; see tests/a2a/README.md.
"""

import argparse
import asyncio
import json
import socket
import sys
import time

import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a.types.a2a_pb2 import StreamResponse


def build_app(record_path: str, unavailable_for: float):
    record = open(record_path, 'a', encoding='utf-8')  # noqa: SIM115
    first_seen = []

    async def receive(request: Request) -> Response:
        raw = await request.body()
        now = time.monotonic()
        if not first_seen:
            first_seen.append(now)
        line = {
            'headers': {k.lower(): v for k, v in request.headers.items()},
            'at': time.time(),
        }
        if now - first_seen[0] < unavailable_for:
            line.update(ok=False, status=503, body=raw.decode('utf-8', 'replace'))
            record.write(json.dumps(line) + '\n')
            record.flush()
            return Response(status_code=503, headers={'retry-after': '1'})
        try:
            message = json_format.Parse(raw, StreamResponse())
        except (json_format.ParseError, ValueError, UnicodeDecodeError) as e:
            line.update(ok=False, status=400, body=raw.decode('utf-8', 'replace'), error=str(e))
            record.write(json.dumps(line) + '\n')
            record.flush()
            return Response(status_code=400)
        line.update(ok=True, status=200, body=json_format.MessageToDict(message))
        record.write(json.dumps(line) + '\n')
        record.flush()
        return Response(status_code=200)

    return Starlette(routes=[Route('/{path:path}', receive, methods=['POST'])])


async def serve(args) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', args.port))
    port = sock.getsockname()[1]
    app = build_app(args.record, args.unavailable_for)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level='warning', lifespan='off', access_log=False)
    )

    async def announce():
        while not server.started:
            await asyncio.sleep(0.01)
        print(f'listening on http://127.0.0.1:{port}', flush=True)

    announcer = asyncio.create_task(announce())
    await server.serve(sockets=[sock])
    announcer.cancel()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--port', type=int, default=0, help='0 picks a free port')
    p.add_argument('--record', required=True, help='append each request to FILE as a JSON line')
    p.add_argument(
        '--unavailable-for',
        type=float,
        default=0.0,
        help='answer 503 for this many seconds after the first request',
    )
    args = p.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == '__main__':
    main()
