#!/usr/bin/env python3
"""Drive an A2A 1.0 agent (or the gateway) with a2a-sdk's own client, and print what it saw.

    client.py --card-url URL --binding JSONRPC|HTTP+JSON|GRPC [--token T] SCENARIO [SCENARIO...]
              [--card-token T] [--task ID] [--text T] [--push-url URL] [--push-id ID]
              [--push-token T] [--push-auth "SCHEME CREDENTIALS"]

The client starts from the card at URL (fetched with the SDK's A2ACardResolver), lets
ClientFactory pick the interface for the binding, runs the scenario, and prints ONE JSON
document on stdout: the results normalised for comparison (see `summary`), so that a Rust test
can compare a run direct to the agent with one through the gateway. With several scenarios the
document is `{"binding": B, "scenarios": {NAME: <that scenario's document>}}`, one client for all. Errors the SDK raises are
data (`{"error": {...}}`), not crashes. The same scenarios and the same output shape are in
client.mjs for @a2a-js/sdk. The push scenarios (`push-set`, `push-get`, `push-list`,
`push-delete`, `send-push`) print configs and task ids as returned, not normalised: tests need
them.
"""

import argparse
import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.utils.errors import A2A_ERROR_REASONS
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)

SCENARIOS = [
    'card',
    'send-hello',
    'get',
    'get-missing',
    'cancel',
    'cancel-final',
    'multi-turn',
    'fail',
    'reject',
    'message',
    'list',
    'list-pages',
    'stream',
    'subscribe',
    'follow',
    'push-set',
    'push-get',
    'push-list',
    'push-delete',
    'send-push',
]

# What each push scenario needs besides --card-url and --binding.
PUSH_NEEDS = {
    'push-set': ('task', 'push_url'),
    'push-get': ('task', 'push_id'),
    'push-list': ('task',),
    'push-delete': ('task', 'push_id'),
    'send-push': ('push_url',),
}


def texts(parts):
    return '\n'.join(p['text'] for p in parts or [] if 'text' in p)


def summary(d):
    """A ProtoJSON Task, Message, StreamResponse or SendMessageResponse, normalised.

    Ids are left out (they differ between runs); what a client acts on stays: kind, state,
    artifact texts, message texts.
    """
    if 'task' in d:
        return summary_task(d['task'])
    if 'message' in d:
        m = d['message']
        return {'kind': 'message', 'role': m.get('role'), 'text': texts(m.get('parts'))}
    if 'statusUpdate' in d:
        s = d['statusUpdate'].get('status', {})
        return {'kind': 'status', 'state': s.get('state')}
    if 'artifactUpdate' in d:
        a = d['artifactUpdate'].get('artifact', {})
        return {'kind': 'artifact', 'text': texts(a.get('parts'))}
    return summary_task(d)


def summary_task(t):
    status = t.get('status', {})
    out = {
        'kind': 'task',
        'state': status.get('state'),
        'artifacts': [texts(a.get('parts')) for a in t.get('artifacts', [])],
        'has_id': bool(t.get('id')),
        'has_context': bool(t.get('contextId')),
    }
    if status.get('message'):
        out['status_text'] = texts(status['message'].get('parts'))
    return out


def error_data(e):
    """An exception the SDK raised, as data: its class, the message, and what the SDK kept."""
    out = {'type': type(e).__name__, 'message': getattr(e, 'message', None) or str(e)}
    reason = A2A_ERROR_REASONS.get(type(e))
    if reason:
        out['reason'] = reason
    data = getattr(e, 'data', None)
    if data:
        out['data'] = data
    status = getattr(e, 'status_code', None)
    if status:
        out['status_code'] = status
    return out


def push_config(args, task_id=''):
    """The TaskPushNotificationConfig the --push-* flags describe (for `task_id`, if given)."""
    config = TaskPushNotificationConfig(
        task_id=task_id or '',
        id=args.push_id or '',
        url=args.push_url or '',
        token=args.push_token or '',
    )
    if args.push_auth:
        scheme, _, credentials = args.push_auth.partition(' ')
        config.authentication.scheme = scheme
        config.authentication.credentials = credentials
    return config


def config_data(config):
    """A TaskPushNotificationConfig as returned: ProtoJSON, camelCase, absent fields left out."""
    return MessageToDict(config)


def user_message(text, task_id=None, context_id=None):
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id or '',
        context_id=context_id or '',
    )


class Driver:
    def __init__(self, client, streaming_client, args):
        self.client = client
        self.streaming_client = streaming_client
        self.args = args
        self.task = args.task

    async def send(self, text, *, task_id=None, context_id=None, immediately=False, push=None):
        """The first (non-streaming: only) response of a send, as ProtoJSON."""
        req = SendMessageRequest(message=user_message(text, task_id, context_id))
        if immediately:
            req.configuration.return_immediately = True
        if push is not None:
            req.configuration.task_push_notification_config.CopyFrom(push)
        last = None
        async for resp in self.client.send_message(req):
            last = MessageToDict(resp)
        return last

    async def get(self, task_id):
        return MessageToDict(await self.client.get_task(GetTaskRequest(id=task_id)))

    async def cancel(self, task_id):
        return MessageToDict(await self.client.cancel_task(CancelTaskRequest(id=task_id)))

    async def run(self, scenario):  # noqa: PLR0911
        if scenario == 'send-hello':
            return {'send': summary(await self.send('hello'))}
        if scenario == 'get':
            sent = await self.send('hello')
            got = await self.get(sent['task']['id'])
            return {
                'send': summary(sent),
                'get': summary(got),
                'same_id': got.get('id') == sent['task']['id'],
            }
        if scenario == 'get-missing':
            return {'get': await guarded(self.get('no-such-task'))}
        if scenario == 'cancel':
            sent = await self.send('slow', immediately=True)
            task_id = sent['task']['id']
            canceled = await self.cancel(task_id)
            got = await self.get(task_id)
            return {
                'send_state_is_live': summary(sent)['state']
                in ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING'),
                'cancel': summary(canceled),
                'get': summary(got),
            }
        if scenario == 'cancel-final':
            sent = await self.send('hello')
            return {
                'send': summary(sent),
                'cancel': await guarded(self.cancel(sent['task']['id'])),
            }
        if scenario == 'multi-turn':
            first = await self.send('need input')
            task = first['task']
            second = await self.send(
                'blue', task_id=task['id'], context_id=task.get('contextId')
            )
            return {
                'first': summary(first),
                'second': summary(second),
                'same_task': second['task']['id'] == task['id'],
                'same_context': second['task'].get('contextId') == task.get('contextId'),
            }
        if scenario in ('fail', 'reject', 'message'):
            return {'send': summary(await self.send(scenario))}
        if scenario == 'list':
            sent = [await self.send('hello'), await self.send('fail')]
            listed = MessageToDict(await self.client.list_tasks(ListTasksRequest()))
            ids = {t['id'] for t in listed.get('tasks', [])}
            return {'sent_listed': all(s['task']['id'] in ids for s in sent)}
        if scenario == 'list-pages':
            # Every COMPLETED task the caller may see, 7 a page, following the tokens.
            ids, totals, token = [], [], ''
            for _ in range(1000):
                page = MessageToDict(
                    await self.client.list_tasks(
                        ListTasksRequest(
                            status='TASK_STATE_COMPLETED', page_size=7, page_token=token
                        )
                    ),
                    always_print_fields_with_no_presence=True,
                )
                ids += [t['id'] for t in page.get('tasks', [])]
                totals.append(page.get('totalSize'))
                token = page.get('nextPageToken', '')
                if not token:
                    break
            return {'ids': ids, 'totals': totals}
        if scenario == 'stream':
            req = SendMessageRequest(message=user_message('hello'))
            events = [
                summary(MessageToDict(e))
                async for e in self.streaming_client.send_message(req)
            ]
            return {'events': events}
        if scenario == 'subscribe':
            sent = await self.send('hello slowly', immediately=True)
            sub = SubscribeToTaskRequest(id=sent['task']['id'])
            events = [
                summary(MessageToDict(e)) async for e in self.streaming_client.subscribe(sub)
            ]
            return {'first': events[:1], 'last': events[-1:], 'count_at_least_2': len(events) >= 2}
        if scenario == 'follow':
            # Subscribe to --task and read until the stream ends: the events, and the error
            # the SDK raised if it ended with one.
            events = []
            try:
                async for e in self.streaming_client.subscribe(SubscribeToTaskRequest(id=self.task)):
                    events.append(summary(MessageToDict(e)))
            except Exception as e:  # noqa: BLE001 - the error is the result
                return {'events': events, 'error': error_data(e)}
            return {'events': events}
        if scenario == 'push-set':
            created = await self.client.create_task_push_notification_config(
                push_config(self.args, self.task)
            )
            return config_data(created)
        if scenario == 'push-get':
            got = await self.client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=self.task, id=self.args.push_id)
            )
            return config_data(got)
        if scenario == 'push-list':
            listed = await self.client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=self.task)
            )
            return {
                'configs': [config_data(c) for c in listed.configs],
                'nextPageToken': listed.next_page_token,
            }
        if scenario == 'push-delete':
            await self.client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=self.task, id=self.args.push_id)
            )
            return {'deleted': True}
        if scenario == 'send-push':
            # The config inline on SendMessage; the answer comes back while the task runs.
            sent = await self.send(self.args.text, immediately=True, push=push_config(self.args))
            return {'task_id': sent['task']['id'], 'state': summary(sent)['state']}
        raise SystemExit(f'unknown scenario {scenario!r}; known: {", ".join(SCENARIOS)}')


async def guarded(coro):
    try:
        return {'ok': summary(MessageToDict(await coro))}
    except Exception as e:  # noqa: BLE001 - every SDK error is data here
        return {'error': error_data(e)}


def grpc_channel_factory(token):
    """What a2a-sdk's gRPC client asks its user for: a channel for the interface's URL. The card's
    URL is absolute (`http://host:port`, as a2a.proto asks); grpc takes `host:port`. The client's
    bearer token goes on every call as `authorization` metadata (a channel interceptor)."""
    import grpc

    class Bearer(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
        async def _with_token(self, continuation, details, request):
            metadata = list(details.metadata or [])
            metadata.append(('authorization', f'Bearer {token}'))
            details = details._replace(metadata=metadata)
            return await continuation(details, request)

        async def intercept_unary_unary(self, continuation, details, request):
            return await self._with_token(continuation, details, request)

        async def intercept_unary_stream(self, continuation, details, request):
            return await self._with_token(continuation, details, request)

    def factory(url):
        target = url.split('://', 1)[-1].rstrip('/')
        return grpc.aio.insecure_channel(target, interceptors=[Bearer()] if token else None)

    return factory


async def run_one(args, scenario, http, card):
    if scenario == 'card':
        return {'scenario': 'card', 'card': MessageToDict(card)}

    def make(streaming):
        return ClientFactory(
            ClientConfig(
                streaming=streaming,
                httpx_client=http,
                supported_protocol_bindings=[args.binding],
                grpc_channel_factory=grpc_channel_factory(
                    args.token if args.grpc_token is None else args.grpc_token
                ),
            )
        ).create(card)

    try:
        client, streaming_client = make(False), make(True)
        result = await Driver(client, streaming_client, args).run(scenario)
    except Exception as e:  # noqa: BLE001
        return {'scenario': scenario, 'error': error_data(e)}
    return {'scenario': scenario, 'binding': args.binding, 'result': result}


def bearer(token):
    return {'Authorization': f'Bearer {token}'} if token else {}


async def fetch_card(args, http):
    """The card at --card-url, fetched with --token, or with --card-token when given."""
    if args.card_token is None:
        return await A2ACardResolver(http, args.card_url, agent_card_path='').get_agent_card()
    async with httpx.AsyncClient(headers=bearer(args.card_token), timeout=30.0) as card_http:
        resolver = A2ACardResolver(card_http, args.card_url, agent_card_path='')
        return await resolver.get_agent_card()


async def main_async(args):
    async with httpx.AsyncClient(headers=bearer(args.token), timeout=30.0) as http:
        try:
            card = await fetch_card(args, http)
        except Exception as e:  # noqa: BLE001
            failed = {'error': error_data(e)}
            if len(args.scenario) == 1:
                return {'scenario': args.scenario[0], **failed}
            return {'binding': args.binding, **failed}
        if len(args.scenario) == 1:
            return await run_one(args, args.scenario[0], http, card)
        return {
            'binding': args.binding,
            'scenarios': {s: await run_one(args, s, http, card) for s in args.scenario},
        }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--card-url', required=True, help='the full URL of the agent card')
    p.add_argument('--binding', choices=['JSONRPC', 'HTTP+JSON', 'GRPC'], required=True)
    p.add_argument('--token', help='send Authorization: Bearer TOKEN on every request')
    p.add_argument(
        '--grpc-token',
        help='over gRPC, this token instead of --token ("" for none): the card still with --token',
    )
    p.add_argument(
        '--card-token',
        help='fetch the card with this token instead of --token ("" for none): the calls still '
        'with --token',
    )
    p.add_argument('--task', help='the task id of `follow` and the push-config scenarios')
    p.add_argument('--text', default='hello slowly', help='the message text of `send-push`')
    p.add_argument('--push-url', help='the push config url (push-set, send-push)')
    p.add_argument('--push-id', help='the push config id (push-get, push-delete; optional else)')
    p.add_argument('--push-token', help='the push config token')
    p.add_argument('--push-auth', help='the push config authentication, "SCHEME CREDENTIALS"')
    p.add_argument('scenario', nargs='+', choices=SCENARIOS)
    args = p.parse_args()
    for s in args.scenario:
        for need in PUSH_NEEDS.get(s, ()):
            if not getattr(args, need):
                p.error(f'{s} needs --{need.replace("_", "-")}')
    out = asyncio.run(main_async(args))
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
