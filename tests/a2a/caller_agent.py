#!/usr/bin/env python3
"""An a2a-sdk 1.3.0 agent that checks who is calling: the `A2A-Caller` assertion a gateway signs.

agent.py's server (one binding, `--binding JSONRPC` or `HTTP+JSON`, its card, `--record`), with
another executor: for each message it reads the request's `A2A-Caller` headers (a2a-sdk hands the
executor the request's headers in `context.call_context.state['headers']`; the ServerCallContext
builder here adds every value of the header, `state['a2a_callers']`, as a dict keeps only one),
verifies the one value with PyJWT against the gateway's published keys
(`jwt.PyJWKClient(f'{gateway}/.well-known/jwks.json')`, ES256 or EdDSA, `aud` = `--audience`,
`iss` = `--gateway`, `exp`, `iat`, `sub` and `jti` required) and answers with the JSON of what it
verified: `{"sub", "client_kind", "idp_sub", "idp_iss", "alg", "kid", "lifetime", "jti"}`
(`idp_*` null when absent, `lifetime` = exp - iat), or `{"error": "no caller"}`,
`{"error": "invalid caller: <why>"}`. The answer is a Message; for the text `task`, a completed
Task whose artifact `caller` holds that JSON; for `slow task`, the same Task WORKING for
SLOW_SECONDS first (for the gateway's own calls: GetTask while it works).

`--caller-log FILE` appends, for every HTTP request the agent receives (card fetches included),
one JSON line `{"method", "path", "callers": [every A2A-Caller value, raw], "verified": [what
each says, as above]}`, so a test can check that a value never arrived, and who the requests
no message is in (GetTask...) were made for. `--ca-file` is the CA the gateway's https certificate is
checked against when the keys are fetched.

Used by tests/it/identity.rs; see tests/a2a/README.md.
"""

import argparse
import asyncio
import json
import ssl
import sys

import jwt

from a2a.helpers.proto_helpers import new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Role, Task, TaskState, TaskStatus

import agent

HEADER = 'a2a-caller'
# How long "slow task" stays WORKING before it completes.
SLOW_SECONDS = 3.0
ALGORITHMS = ['ES256', 'EdDSA']


class CallerContextBuilder(DefaultServerCallContextBuilder):
    """a2a-sdk's own builder (headers in `state['headers']`), plus every `A2A-Caller` value."""

    def build(self, request):
        context = super().build(request)
        context.state['a2a_callers'] = request.headers.getlist(HEADER)
        return context


class CallerExecutor(AgentExecutor):
    """Answers each message with the verified claims of its `A2A-Caller`."""

    def __init__(self, gateway: str, audience: str, ca_file: str | None):
        self.gateway = gateway
        self.audience = audience
        context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self.keys = jwt.PyJWKClient(
            f"{gateway.rstrip('/')}/.well-known/jwks.json", timeout=5, ssl_context=context
        )

    def verify(self, state: dict) -> dict:
        values = state.get('a2a_callers')
        if values is None:
            # Not built by CallerContextBuilder: what a2a-sdk gives every executor.
            one = state.get('headers', {}).get(HEADER)
            values = [] if one is None else [one]
        if not values:
            return {'error': 'no caller'}
        if len(values) > 1:
            return {'error': f'invalid caller: {len(values)} A2A-Caller headers'}
        return self.verify_one(values[0])

    def verify_one(self, token: str) -> dict:
        """What one A2A-Caller value says, verified, or why it is refused."""
        try:
            key = self.keys.get_signing_key_from_jwt(token)
            header = jwt.get_unverified_header(token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                audience=self.audience,
                issuer=self.gateway,
                options={'require': ['exp', 'iat', 'sub', 'iss', 'aud', 'jti']},
            )
        except Exception as e:  # noqa: BLE001 - every failure is the answer
            return {'error': f'invalid caller: {type(e).__name__}: {e}'}
        return {
            'sub': claims['sub'],
            'client_kind': claims.get('client_kind'),
            'idp_sub': claims.get('idp_sub'),
            'idp_iss': claims.get('idp_iss'),
            'alg': header.get('alg'),
            'kid': header.get('kid'),
            'lifetime': claims['exp'] - claims['iat'],
            'jti': claims['jti'],
        }

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        # PyJWKClient fetches with urllib: off the event loop.
        answer = json.dumps(await asyncio.to_thread(self.verify, context.call_context.state))
        text = context.get_user_input().strip()
        if text not in ('task', 'slow task'):
            await event_queue.enqueue_event(
                new_text_message(answer, context_id=context.context_id, role=Role.ROLE_AGENT)
            )
            return
        await event_queue.enqueue_event(
            Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message] if context.message else [],
            )
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if text == 'slow task':
            await updater.start_work()
            await asyncio.sleep(SLOW_SECONDS)
        await updater.add_artifact([new_text_part(answer)], name='caller')
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class CallerLog:
    """Pure ASGI middleware: one JSON line per HTTP request with every A2A-Caller value, raw,
    and what each says, verified as the executor verifies (for the requests that reach no
    executor: GetTask, SubscribeToTask, the gateway's own calls)."""

    def __init__(self, app, path: str | None, executor: CallerExecutor):
        self.app = app
        self.file = open(path, 'a', encoding='utf-8') if path else None  # noqa: SIM115
        self.executor = executor

    async def __call__(self, scope, receive, send):
        if scope['type'] == 'http' and self.file is not None:
            callers = [
                v.decode('latin-1')
                for k, v in scope.get('headers', [])
                if k.decode('latin-1').lower() == HEADER
            ]
            line = {
                'method': scope['method'],
                'path': scope.get('raw_path', b'').decode('latin-1') or scope['path'],
                'callers': callers,
                'verified': [
                    await asyncio.to_thread(self.executor.verify_one, c) for c in callers
                ],
            }
            self.file.write(json.dumps(line) + '\n')
            self.file.flush()
        await self.app(scope, receive, send)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--port', type=int, default=0, help='0 picks a free port')
    p.add_argument('--binding', choices=['JSONRPC', 'HTTP+JSON'], required=True)
    p.add_argument(
        '--gateway',
        required=True,
        help="the gateway's public_url: the assertions' iss, and where its keys are",
    )
    p.add_argument('--audience', required=True, help="this agent's route name at the gateway")
    p.add_argument('--ca-file', help="CA of the gateway's https certificate")
    p.add_argument('--caller-log', help='append the A2A-Caller values of each request to FILE')
    p.add_argument('--record', help='append each received request to FILE as a JSON line')
    args = p.parse_args()
    # What agent.serve reads of agent.py's flags.
    args.public_host = None
    args.push = False
    args.no_streaming = False
    args.grpc_url_form = 'url'
    executor = CallerExecutor(args.gateway, args.audience, args.ca_file)
    try:
        asyncio.run(
            agent.serve(
                args,
                executor=executor,
                context_builder=CallerContextBuilder(),
                wrap=lambda app: CallerLog(app, args.caller_log, executor),
            )
        )
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == '__main__':
    main()
