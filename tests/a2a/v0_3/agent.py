#!/usr/bin/env python3
"""A scripted A2A 0.3 agent built on a2a-sdk 0.3.26's own server classes (not our imitation).

Run with a2a-sdk 0.3 on the path (`PYTHONPATH=<the 0.3 site, see tests/a2a/v0_3/README.md>`).
It serves ONE binding (`--binding JSONRPC` at `/a2a/jsonrpc`, or `--binding HTTP+JSON` with its
routes under `/v1/`), its 0.3 card (`url`, `preferredTransport`, `protocolVersion: 0.3.0`, no
`supportedInterfaces`) at `/.well-known/agent-card.json`. It prints `listening on
http://127.0.0.1:PORT` once it accepts connections; `--record FILE` appends every request as a
JSON line (method, path, headers with credentials redacted, body); `--push` gives it the SDK's
own push config store and sender. The script, by message text, is agent.py's (tests/a2a/README.md).
"""

import argparse
import asyncio
import json
import socket
import sys

import httpx
import uvicorn

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2ARESTFastAPIApplication, A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)
from a2a.utils import new_agent_text_message

JSONRPC_PATH = '/a2a/jsonrpc'
SECRET_HEADERS = {'authorization', 'proxy-authorization', 'cookie', 'x-api-key'}
SLOW_SECONDS = 20.0
STEP_SECONDS = 0.05


def text_part(text):
    return Part(root=TextPart(text=text))


class ScriptedExecutor(AgentExecutor):
    """agent.py's script in 0.3's types: hello, hello slowly, need input, fail, reject, slow,
    message, and an echo of anything else."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        current = context.current_task
        if text == 'message' and current is None:
            await event_queue.enqueue_event(
                new_agent_text_message('you said: message', context_id=context.context_id)
            )
            return
        if current is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.submitted),
                    history=[context.message] if context.message else [],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)

        def says(words):
            return new_agent_text_message(words, context.context_id, context.task_id)

        if current is not None and current.status.state == TaskState.input_required:
            await updater.start_work()
            await updater.add_artifact([text_part(f'got: {text}')], name='answer')
            await updater.complete()
            return
        if text in ('hello', 'hello slowly'):
            pause = 0.5 if text == 'hello slowly' else STEP_SECONDS
            await asyncio.sleep(pause)
            await updater.start_work()
            await asyncio.sleep(pause)
            await updater.add_artifact([text_part('Hello, world!')], name='greeting')
            await asyncio.sleep(pause)
            await updater.complete()
        elif text == 'need input':
            await updater.requires_input(says('what else?'), final=True)
        elif text == 'fail':
            await updater.failed(says('it failed'))
        elif text == 'reject':
            await updater.reject()
        elif text == 'slow':
            await updater.start_work()
            await asyncio.sleep(SLOW_SECONDS)
            await updater.complete()
        else:
            await updater.add_artifact([text_part(f'echo: {text}')], name='echo')
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class Recorder:
    """ASGI middleware writing each HTTP request as one JSON line (the body replayed)."""

    def __init__(self, app, path):
        self.app = app
        self.file = open(path, 'a', encoding='utf-8') if path else None  # noqa: SIM115

    async def __call__(self, scope, receive, send):
        if scope['type'] != 'http' or self.file is None:
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message['type'] != 'http.request':
                break
            chunks.append(message.get('body', b''))
            more = message.get('more_body', False)
        raw = b''.join(chunks)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode('utf-8', 'replace')
        headers = {}
        for k, v in scope.get('headers', []):
            name = k.decode('latin-1').lower()
            headers[name] = '<redacted>' if name in SECRET_HEADERS else v.decode('latin-1')
        line = {'method': scope['method'], 'path': scope['path'], 'headers': headers, 'body': body}
        self.file.write(json.dumps(line) + '\n')
        self.file.flush()
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {'type': 'http.request', 'body': raw, 'more_body': False}
            return await receive()

        await self.app(scope, replay, send)


def build_card(binding, base_url, push):
    url = f'{base_url}{JSONRPC_PATH}' if binding == 'JSONRPC' else base_url
    return AgentCard(
        name='sdk-0.3-scripted-agent',
        description='a2a-sdk 0.3 agent scripted by message text, for a2a-gateway tests',
        version='0.3.0',
        url=url,
        preferred_transport=binding,
        protocol_version='0.3.0',
        capabilities=AgentCapabilities(streaming=True, push_notifications=push),
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[
            AgentSkill(
                id='script',
                name='Scripted replies',
                description='hello, need input, fail, reject, slow, message',
                tags=['test'],
            )
        ],
    )


def build_app(binding, card, record, push):
    extra = {}
    if push:
        store = InMemoryPushNotificationConfigStore()
        extra = {
            'push_config_store': store,
            'push_sender': BasePushNotificationSender(httpx.AsyncClient(), store),
        }
    handler = DefaultRequestHandler(
        agent_executor=ScriptedExecutor(), task_store=InMemoryTaskStore(), **extra
    )
    if binding == 'JSONRPC':
        app = A2AStarletteApplication(agent_card=card, http_handler=handler).build(
            rpc_url=JSONRPC_PATH
        )
    else:
        app = A2ARESTFastAPIApplication(agent_card=card, http_handler=handler).build()
    return Recorder(app, record)


async def serve(args):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', args.port))
    port = sock.getsockname()[1]
    card = build_card(args.binding, f'http://127.0.0.1:{port}', args.push)
    app = build_app(args.binding, card, args.record, args.push)
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--port', type=int, default=0)
    p.add_argument('--binding', choices=['JSONRPC', 'HTTP+JSON'], required=True)
    p.add_argument('--record', help='append each received request to FILE as a JSON line')
    p.add_argument('--push', action='store_true', help='pushNotifications: true, with the SDK store')
    args = p.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == '__main__':
    main()
