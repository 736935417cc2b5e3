#!/usr/bin/env python3
"""A push receiver that reads each delivery as a2a-sdk 0.3.26's own sender writes it: a bare
Task of a2a.json, parsed by a2a-sdk 0.3's pydantic `Task` (which refuses a wrong `kind`, an
unknown state, a missing field). Run with a2a-sdk 0.3 on the path. Prints `listening on
http://127.0.0.1:PORT`; appends every request to `--record FILE` as one JSON line:
`{"ok", "status", "headers", "body", "error"?}`. Used by tests/it/support/a2a_v0_3.rs.
"""

import argparse
import asyncio
import json
import socket
import sys

import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a.types import Task


def build_app(record_path):
    record = open(record_path, 'a', encoding='utf-8')  # noqa: SIM115

    async def receive(request: Request) -> Response:
        raw = await request.body()
        line = {'headers': {k.lower(): v for k, v in request.headers.items()}}
        try:
            task = Task.model_validate_json(raw)
        except (ValidationError, ValueError) as e:
            line.update(ok=False, status=400, body=raw.decode('utf-8', 'replace'), error=str(e))
            record.write(json.dumps(line) + '\n')
            record.flush()
            return Response(status_code=400)
        body = task.model_dump(mode='json', by_alias=True, exclude_none=True)
        line.update(ok=True, status=200, body=body)
        record.write(json.dumps(line) + '\n')
        record.flush()
        return Response(status_code=200)

    return Starlette(routes=[Route('/{path:path}', receive, methods=['POST'])])


async def serve(args):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', args.port))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(build_app(args.record), log_level='warning', lifespan='off', access_log=False)
    )

    async def announce():
        while not server.started:
            await asyncio.sleep(0.01)
        print(f'listening on http://127.0.0.1:{port}', flush=True)

    announcer = asyncio.create_task(announce())
    await server.serve(sockets=[sock])
    announcer.cancel()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--port', type=int, default=0)
    p.add_argument('--record', required=True)
    args = p.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == '__main__':
    main()
