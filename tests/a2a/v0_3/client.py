#!/usr/bin/env python3
"""Drive an A2A 0.3 agent (or the gateway) with a2a-sdk 0.3.26's own client; print what it saw.

    PYTHONPATH=<0.3 site> client.py --card-url URL --binding JSONRPC|HTTP+JSON [--token T]
              [--task ID] [--push-url URL] [--push-id ID] [--push-token T] SCENARIO...

The client reads the card at URL with the SDK's A2ACardResolver (0.3 fields: `url`,
`preferredTransport`, `additionalInterfaces`), ClientFactory picks the interface of the binding,
and it prints ONE JSON document: `{"binding", "scenarios": {NAME: {"result"} | {"error"}}}`,
results normalised in 0.3's own words (states `completed`, `input-required`...; kinds; texts; no
ids), so that a run direct to a 0.3 agent and one through the gateway compare with `==`. The
push scenarios print ids as returned. client.mjs in this folder is the same for @a2a-js/sdk 0.3.
"""

import argparse
import asyncio
import json
import sys
import uuid

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.types import (
    GetTaskPushNotificationConfigParams,
    Message,
    MessageSendConfiguration,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TextPart,
)

SCENARIOS = [
    'card', 'send-hello', 'get', 'get-missing', 'cancel', 'multi-turn', 'fail', 'message',
    'stream', 'subscribe', 'follow', 'push-set', 'push-get', 'send-push',
]


def dump(model):
    return model.model_dump(mode='json', by_alias=True, exclude_none=True)


def texts(parts):
    return '\n'.join(p['text'] for p in parts or [] if p.get('kind') == 'text')


def summary(d):
    """A 0.3 Task, Message, status or artifact update (a2a.json), normalised."""
    kind = d.get('kind')
    if kind == 'message':
        return {'kind': 'message', 'role': d.get('role'), 'text': texts(d.get('parts'))}
    if kind == 'status-update':
        return {'kind': 'status', 'state': d['status']['state'], 'final': d.get('final')}
    if kind == 'artifact-update':
        return {'kind': 'artifact', 'text': texts(d['artifact'].get('parts'))}
    status = d.get('status', {})
    out = {
        'kind': 'task',
        'state': status.get('state'),
        'artifacts': [texts(a.get('parts')) for a in d.get('artifacts') or []],
        'has_id': bool(d.get('id')),
        'has_context': bool(d.get('contextId')),
    }
    if status.get('message'):
        out['status_text'] = texts(status['message'].get('parts'))
    return out


def event_summary(e):
    """What send_message / resubscribe yield: a Message, or (task, update)."""
    if isinstance(e, Message):
        return summary(dump(e))
    task, update = e
    return summary(dump(update if update is not None else task))


def error_data(e):
    out = {'type': type(e).__name__}
    if isinstance(e, A2AClientJSONRPCError):
        out['code'] = e.error.code
        out['message'] = e.error.message
        if e.error.data is not None:
            out['data'] = e.error.data
    elif isinstance(e, A2AClientHTTPError):
        # Its message names the URL called: left out, so direct and gateway runs compare.
        out['status_code'] = e.status_code
    else:
        out['message'] = str(e)
    return out


def user_message(text, task_id=None, context_id=None):
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        task_id=task_id,
        context_id=context_id,
    )


class Driver:
    def __init__(self, make, args):
        self.make, self.args = make, args
        self.client, self.streaming = make(False), make(True)

    async def send(self, text, *, task_id=None, context_id=None, blocking=True, push=None):
        # A push config goes in the client's config, not the call's: a2a-sdk 0.3.26 merges a
        # call's configuration with model_copy, leaving a dict where its REST and gRPC
        # transports want a model ('dict' object has no attribute 'authentication').
        client = self.client if push is None else self.make(False, push)
        config = MessageSendConfiguration(blocking=blocking)
        last = None
        async for e in client.send_message(
            user_message(text, task_id, context_id), configuration=config
        ):
            last = e
        return last

    @staticmethod
    def task_of(sent):
        return sent[0] if isinstance(sent, tuple) else None

    async def run(self, scenario):  # noqa: PLR0911
        if scenario == 'send-hello':
            return {'send': event_summary(await self.send('hello'))}
        if scenario == 'get':
            task = self.task_of(await self.send('hello'))
            got = await self.client.get_task(TaskQueryParams(id=task.id))
            return {'get': summary(dump(got)), 'same_id': got.id == task.id}
        if scenario == 'get-missing':
            return {'get': await guarded(self.client.get_task(TaskQueryParams(id='no-such-task')))}
        if scenario == 'cancel':
            task = self.task_of(await self.send('slow', blocking=False))
            canceled = await self.client.cancel_task(TaskIdParams(id=task.id))
            got = await self.client.get_task(TaskQueryParams(id=task.id))
            return {
                'send_state_is_live': task.status.state.value in ('submitted', 'working'),
                'cancel': summary(dump(canceled)),
                'get': summary(dump(got)),
            }
        if scenario == 'multi-turn':
            first = self.task_of(await self.send('need input'))
            second = self.task_of(
                await self.send('blue', task_id=first.id, context_id=first.context_id)
            )
            return {
                'first': summary(dump(first)),
                'second': summary(dump(second)),
                'same_task': second.id == first.id,
                'same_context': second.context_id == first.context_id,
            }
        if scenario in ('fail', 'message'):
            return {'send': event_summary(await self.send(scenario))}
        if scenario == 'stream':
            events = [
                event_summary(e)
                async for e in self.streaming.send_message(user_message('hello'))
            ]
            return {'events': events}
        if scenario == 'subscribe':
            task = self.task_of(await self.send('hello slowly', blocking=False))
            events = [
                event_summary(e)
                async for e in self.streaming.resubscribe(TaskIdParams(id=task.id))
            ]
            then = await self.client.get_task(TaskQueryParams(id=task.id))
            return {
                'last': events[-1:],
                'count_at_least_2': len(events) >= 2,
                'then': then.status.state.value,
            }
        if scenario == 'follow':
            events = []
            try:
                async for e in self.streaming.resubscribe(TaskIdParams(id=self.args.task)):
                    events.append(event_summary(e))
            except Exception as e:  # noqa: BLE001 - the error is the result
                return {'events': events, 'error': error_data(e)}
            return {'events': events}
        if scenario == 'push-set':
            made = await self.client.set_task_callback(
                TaskPushNotificationConfig(
                    task_id=self.args.task,
                    push_notification_config=PushNotificationConfig(
                        id=self.args.push_id, url=self.args.push_url, token=self.args.push_token
                    ),
                )
            )
            return dump(made)
        if scenario == 'push-get':
            got = await self.client.get_task_callback(
                GetTaskPushNotificationConfigParams(
                    id=self.args.task, push_notification_config_id=self.args.push_id
                )
            )
            return dump(got)
        if scenario == 'send-push':
            push = PushNotificationConfig(url=self.args.push_url, token=self.args.push_token)
            task = self.task_of(await self.send('hello slowly', blocking=False, push=push))
            return {'task_id': task.id, 'state': task.status.state.value}
        raise SystemExit(f'unknown scenario {scenario!r}')


async def guarded(coro):
    try:
        got = await coro
        return {'ok': summary(dump(got))}
    except Exception as e:  # noqa: BLE001 - every SDK error is data here
        return {'error': error_data(e)}


async def run_one(args, scenario, http, card):
    if scenario == 'card':
        return {'result': dump(card)}

    def make(streaming, push=None):
        return ClientFactory(
            ClientConfig(
                streaming=streaming,
                httpx_client=http,
                supported_transports=[args.binding],
                push_notification_configs=[push] if push else [],
            )
        ).create(card)

    try:
        return {'result': await Driver(make, args).run(scenario)}
    except Exception as e:  # noqa: BLE001
        return {'error': error_data(e)}


async def main_async(args):
    headers = {'Authorization': f'Bearer {args.token}'} if args.token else {}
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as http:
        try:
            # 0.3's resolver joins base and path with a `/`.
            base, _, path = args.card_url.partition('/.well-known/')
            card = await A2ACardResolver(
                http, base, agent_card_path=f'.well-known/{path}'
            ).get_agent_card()
        except Exception as e:  # noqa: BLE001
            return {'binding': args.binding, 'error': error_data(e)}
        return {
            'binding': args.binding,
            'scenarios': {s: await run_one(args, s, http, card) for s in args.scenario},
        }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--card-url', required=True)
    p.add_argument('--binding', choices=['JSONRPC', 'HTTP+JSON'], required=True)
    p.add_argument('--token')
    p.add_argument('--task')
    p.add_argument('--push-url')
    p.add_argument('--push-id')
    p.add_argument('--push-token')
    p.add_argument('scenario', nargs='+', choices=SCENARIOS)
    args = p.parse_args()
    out = asyncio.run(main_async(args))
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
