#!/usr/bin/env python3
"""A scripted A2A 1.0 agent built on a2a-sdk's own server classes (not our imitation).

It serves exactly ONE binding (`--binding JSONRPC`, `HTTP+JSON` or `GRPC`) on 127.0.0.1,
with its card at `/.well-known/agent-card.json` naming only that binding. With GRPC the card is
still served over HTTP on the announced port, and a2a-sdk's gRPC server (grpc.aio and the SDK's
GrpcHandler) listens on a second port, which the card's interface names (`http://127.0.0.1:G`,
or `127.0.0.1:G` with `--grpc-url-form host-port`). What it does depends
on the text of the message (see `ScriptedExecutor`). It prints one line, `listening on
http://127.0.0.1:PORT`, once it accepts connections, and with `--record FILE` writes every
request it receives as one JSON line (method, path, query, headers with credential values
redacted, body), so tests can assert what reached the agent. With `--push` the card says
`capabilities.pushNotifications: true` and the handler gets a2a-sdk's own push config store and
sender, so the agent itself POSTs each task event to the push configs clients create.

Used by tests/it/support/a2a_sdk.rs; see tests/a2a/README.md.
"""

import argparse
import asyncio
import json
import socket
import sys

import httpx
import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    Task,
    TaskState,
    TaskStatus,
)

# Where each binding is mounted: a path, so that a gateway must keep the interface's path.
JSONRPC_PATH = '/a2a/jsonrpc'
REST_PATH = '/a2a/rest'

# Headers whose values are credentials: recorded as present, never with their value.
SECRET_HEADERS = {'authorization', 'proxy-authorization', 'cookie', 'x-api-key'}

# How long "slow" works before it would complete (tests cancel it long before).
SLOW_SECONDS = 20.0
# The pause between the progress reports of "ticks" (wider than the gateway's poll interval in
# the tests that poll it, so every tick is seen).
TICK_SECONDS = 0.6
# The pause between streamed events, so that a stream is observably a stream.
STEP_SECONDS = 0.05


class ScriptedExecutor(AgentExecutor):
    """What the agent does, by the text of the message.

    - "hello": a task, WORKING, a text artifact "Hello, world!", COMPLETED.
    - "hello slowly": the same, with half a second between the steps (1.5 s in all: for
      SubscribeToTask, and for attaching a push config before it completes).
    - "need input": INPUT_REQUIRED; the next message on that task completes it, with an
      artifact "got: {text}".
    - "fail": FAILED. "reject": REJECTED.
    - "slow": WORKING for SLOW_SECONDS, then COMPLETED; cancellable (CANCELED).
    - "ticks": WORKING three times, each with a new status message ("tick 1", "tick 2",
      "tick 3"), TICK_SECONDS apart, then an artifact "ticked" and COMPLETED.
    - "ticks then wait": the three ticks, then WORKING for SLOW_SECONDS (to be canceled).
    - "message": a Message answer ("you said: message"), no task.
    - anything else: COMPLETED with an artifact echoing the text.
    """

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        current = context.current_task
        if text == 'message' and current is None:
            await event_queue.enqueue_event(
                new_text_message(
                    'you said: message',
                    context_id=context.context_id,
                    role=Role.ROLE_AGENT,
                )
            )
            return

        if current is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message else [],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)

        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.start_work()
            await updater.add_artifact([new_text_part(f'got: {text}')], name='answer')
            await updater.complete()
            return

        if text in ('hello', 'hello slowly'):
            pause = 0.5 if text == "hello slowly" else STEP_SECONDS
            await asyncio.sleep(pause)
            await updater.start_work()
            await asyncio.sleep(pause)
            await updater.add_artifact([new_text_part('Hello, world!')], name='greeting')
            await asyncio.sleep(pause)
            await updater.complete()
        elif text == 'need input':
            await updater.requires_input(
                new_text_message(
                    'what else?',
                    context_id=context.context_id,
                    task_id=context.task_id,
                    role=Role.ROLE_AGENT,
                )
            )
        elif text == 'fail':
            await updater.failed(
                new_text_message(
                    'it failed',
                    context_id=context.context_id,
                    task_id=context.task_id,
                    role=Role.ROLE_AGENT,
                )
            )
        elif text == 'reject':
            await updater.reject()
        elif text == 'slow':
            await updater.start_work()
            await asyncio.sleep(SLOW_SECONDS)
            await updater.complete()
        elif text in ('ticks', 'ticks then wait'):
            for n in (1, 2, 3):
                await asyncio.sleep(TICK_SECONDS)
                await updater.update_status(
                    TaskState.TASK_STATE_WORKING,
                    new_text_message(
                        f'tick {n}',
                        context_id=context.context_id,
                        task_id=context.task_id,
                        role=Role.ROLE_AGENT,
                    ),
                )
            await asyncio.sleep(TICK_SECONDS)
            if text == 'ticks then wait':
                await asyncio.sleep(SLOW_SECONDS)
            await updater.add_artifact([new_text_part('ticked')], name='ticks')
            await updater.complete()
        else:
            await updater.add_artifact([new_text_part(f'echo: {text}')], name='echo')
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


class Recorder:
    """Pure ASGI middleware writing each HTTP request as one JSON line (body read as it passes)."""

    def __init__(self, app, path):
        self.app = app
        self.file = open(path, 'a', encoding='utf-8') if path else None  # noqa: SIM115

    async def __call__(self, scope, receive, send):
        if scope['type'] != 'http' or self.file is None:
            await self.app(scope, receive, send)
            return
        # Read the whole body first, then replay it: a handler that never reads its body (REST
        # cancel ignores it) must still have it recorded.
        chunks = []
        more = True
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
            value = v.decode('latin-1')
            headers[name] = '<redacted>' if name in SECRET_HEADERS else value
        line = {
            'method': scope['method'],
            'path': scope.get('raw_path', b'').decode('latin-1') or scope['path'],
            'query': scope.get('query_string', b'').decode('latin-1'),
            'headers': headers,
            'body': body,
        }
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


def build_card(
    binding: str, base_url: str, push: bool = False, streaming: bool = True, grpc_url: str = ''
) -> AgentCard:
    if binding == 'GRPC':
        url = grpc_url
    else:
        url = f'{base_url}{JSONRPC_PATH if binding == "JSONRPC" else REST_PATH}'
    return AgentCard(
        name='sdk-scripted-agent',
        description='a2a-sdk agent scripted by message text, for a2a-gateway tests',
        version='1.0.0',
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=binding,
                protocol_version='1.0',
            )
        ],
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=push),
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


def build_handler(
    card: AgentCard, push: bool = False, executor: AgentExecutor | None = None
) -> DefaultRequestHandler:
    push_args = {}
    if push:
        # a2a-sdk's own store and sender (on a plain httpx client: 5 s timeout, redirects not
        # followed): the agent POSTs every Task, status and artifact event to each config of
        # the task. No push_url_validator: the receivers are on 127.0.0.1.
        store = InMemoryPushNotificationConfigStore()
        push_args = {
            'push_config_store': store,
            'push_sender': BasePushNotificationSender(httpx.AsyncClient(), store),
        }
    return DefaultRequestHandler(
        agent_executor=executor or ScriptedExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        **push_args,
    )


def build_app(binding: str, card: AgentCard, handler, record: str | None, context_builder=None):
    routes = list(create_agent_card_routes(card))
    if binding == 'GRPC':
        pass
    elif binding == 'JSONRPC':
        routes += create_jsonrpc_routes(
            handler, rpc_url=JSONRPC_PATH, context_builder=context_builder
        )
    else:
        routes += create_rest_routes(
            handler, path_prefix=REST_PATH, context_builder=context_builder
        )
    return Recorder(Starlette(routes=routes), record)


def grpc_recorder(path: str):
    """A grpc.aio server interceptor writing each call as --record writes an HTTP request: the
    method's path, the metadata (credentials redacted), no body (it is protobuf)."""
    import grpc

    class GrpcRecorder(grpc.aio.ServerInterceptor):
        def __init__(self):
            self.file = open(path, 'a', encoding='utf-8')

        async def intercept_service(self, continuation, details):
            headers = {}
            for k, v in details.invocation_metadata or ():
                name = k.lower()
                headers[name] = '<redacted>' if name in SECRET_HEADERS else (
                    v if isinstance(v, str) else '<binary>')
            line = {'method': 'POST', 'path': details.method, 'query': '', 'headers': headers,
                    'body': None}
            self.file.write(json.dumps(line) + '\n')
            self.file.flush()
            return await continuation(details)

    return GrpcRecorder()


async def grpc_server(handler, record: str | None):
    """a2a-sdk's gRPC service on a free port of 127.0.0.1: (server, port)."""
    import grpc
    from a2a.server.request_handlers import GrpcHandler
    from a2a.types import a2a_pb2_grpc

    interceptors = [grpc_recorder(record)] if record else []
    server = grpc.aio.server(interceptors=interceptors)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    port = server.add_insecure_port('127.0.0.1:0')
    await server.start()
    return server, port


async def serve(args, executor=None, context_builder=None, wrap=None) -> None:
    """Serve as the flags say; caller_agent.py passes its own executor, ServerCallContext
    builder and an ASGI middleware (`wrap(app)`) for the JSON and REST bindings."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', args.port))
    port = sock.getsockname()[1]
    host = args.public_host or '127.0.0.1'
    grpc = None
    grpc_url = ''
    if args.binding == 'GRPC':
        # The handler needs the card, and the card the gRPC port: the port first, the
        # servicer's handler set once the card is made.
        holder = {}

        class Late:
            def __getattr__(self, name):
                return getattr(holder['h'], name)

        grpc, gport = await grpc_server(Late(), args.record)
        grpc_url = f'http://{host}:{gport}' if args.grpc_url_form == 'url' else f'{host}:{gport}'
    card = build_card(
        args.binding, f'http://{host}:{port}', args.push, not args.no_streaming, grpc_url
    )
    handler = build_handler(card, args.push, executor)
    if grpc is not None:
        holder['h'] = handler
    app = build_app(args.binding, card, handler, args.record, context_builder)
    if wrap is not None:
        app = wrap(app)
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
    p.add_argument('--binding', choices=['JSONRPC', 'HTTP+JSON', 'GRPC'], required=True)
    p.add_argument(
        '--grpc-url-form',
        choices=['url', 'host-port'],
        default='url',
        help="how the card writes the gRPC interface's address",
    )
    p.add_argument('--public-host', help="host name the card's interface URL names")
    p.add_argument('--record', help='append each received request to FILE as a JSON line')
    p.add_argument(
        '--push',
        action='store_true',
        help='pushNotifications: true, with the SDK push config store and sender',
    )
    p.add_argument(
        '--no-streaming',
        action='store_true',
        help='capabilities.streaming: false (the SDK still serves the streaming methods)',
    )
    args = p.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == '__main__':
    main()
