#!/usr/bin/env python3
"""Drives many A2A 1.0 tasks at one JSON-RPC endpoint that fronts several replicas of an agent
(tests/a2a/agent.py with a2a-sdk's default InMemoryTaskStore: a task lives on one replica only),
and counts what was lost.

Plain JSON-RPC over httpx (not a2a-sdk's client), so every call and every error is counted as it
came back. Per task (`--tasks N`):

1. SendMessage "need input" (a new task), which must end TASK_STATE_INPUT_REQUIRED;
2. GetTask of it;
3. every `--every`-th task, with `--push-url`: CreateTaskPushNotificationConfig on it (id
   `p{n}`) and GetTaskPushNotificationConfig of that config;
4. the second turn, a message with the task's taskId and contextId, which must end
   TASK_STATE_COMPLETED: SendMessage, or for every `--every`-th task SendStreamingMessage read
   to its end;
5. every `--every`-th task also: SendMessage "slow" with `returnImmediately` (a new task),
   SubscribeToTask on it (the first event read, which must be that task), CancelTask of it
   (must end TASK_STATE_CANCELED), and a SendMessage naming only the first task's contextId
   (a new task in that context, which must end TASK_STATE_COMPLETED).

`--new-only N`: N SendMessage calls, each a new task (text `--text`, default "hello"), nothing
else: for counting where new tasks go.

It prints one JSON line: `calls` (by method) and `calls_total`, `task_not_found` (JSON-RPC
error -32001, TaskNotFoundError) and `task_not_found_by_method`, `other_errors` (any other
JSON-RPC error, an HTTP status other than 200, a transport failure, or a result not as
expected) and `other_errors_by_method`, `samples` (the first 20 other errors), `tasks` (every
task made: `{"id", "context", "kind", "message_id"}`, kind `multi`, `slow`, `context` or `new`;
`message_id` is the messageId of the message that made it, for finding the replica that
received it) and `seconds`. It exits 0 whatever it counted (2 on a usage error).

Used by tests/it/replicas.rs; see tests/a2a/README.md.
"""

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections import Counter

import httpx

TASK_NOT_FOUND = -32001

INPUT_REQUIRED = 'TASK_STATE_INPUT_REQUIRED'
COMPLETED = 'TASK_STATE_COMPLETED'
CANCELED = 'TASK_STATE_CANCELED'


class Run:
    def __init__(self, args):
        self.url = args.url
        self.headers = {'A2A-Version': '1.0', 'Content-Type': 'application/json'}
        if args.token:
            self.headers['Authorization'] = f'Bearer {args.token}'
        self.calls = Counter()
        self.not_found = Counter()
        self.other = Counter()
        self.samples = []
        self.tasks = []
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(args.timeout),
            limits=httpx.Limits(
                max_connections=args.concurrency * 2,
                max_keepalive_connections=args.concurrency * 2,
            ),
        )

    def fail(self, method, what):
        self.other[method] += 1
        if len(self.samples) < 20:
            self.samples.append({'method': method, 'error': what})

    def error(self, method, err):
        """Counts a JSON-RPC error object."""
        if isinstance(err, dict) and err.get('code') == TASK_NOT_FOUND:
            self.not_found[method] += 1
        else:
            self.fail(method, err)

    def body(self, method, params):
        return {'jsonrpc': '2.0', 'id': str(uuid.uuid4()), 'method': method, 'params': params}

    async def call(self, method, params):
        """One unary call: its result, or None (the error counted)."""
        self.calls[method] += 1
        try:
            r = await self.client.post(
                self.url, headers=self.headers, json=self.body(method, params)
            )
        except httpx.HTTPError as e:
            self.fail(method, f'transport: {type(e).__name__}: {e}')
            return None
        try:
            doc = r.json()
        except ValueError:
            self.fail(method, f'HTTP {r.status_code}, not JSON: {r.text[:200]}')
            return None
        if isinstance(doc, dict) and 'error' in doc:
            self.error(method, doc['error'])
            return None
        if r.status_code != 200:
            self.fail(method, f'HTTP {r.status_code}: {r.text[:200]}')
            return None
        if not isinstance(doc, dict) or 'result' not in doc:
            self.fail(method, f'no result: {r.text[:200]}')
            return None
        return doc['result']

    async def stream(self, method, params, first_only=False):
        """One streaming call: the results of its events (until the stream ends, or the first),
        or None (the error counted). An error before the first event comes as plain JSON."""
        self.calls[method] += 1
        events = []
        headers = dict(self.headers, Accept='text/event-stream')
        try:
            async with self.client.stream(
                'POST', self.url, headers=headers, json=self.body(method, params)
            ) as r:
                kind = r.headers.get('content-type', '')
                if not kind.startswith('text/event-stream'):
                    raw = await r.aread()
                    try:
                        doc = json.loads(raw)
                    except ValueError:
                        self.fail(method, f'HTTP {r.status_code}, not JSON: {raw[:200]!r}')
                        return None
                    if isinstance(doc, dict) and 'error' in doc:
                        self.error(method, doc['error'])
                    else:
                        self.fail(method, f'HTTP {r.status_code}, not a stream: {raw[:200]!r}')
                    return None
                data = []
                async for line in r.aiter_lines():
                    if line.startswith('data:'):
                        data.append(line[5:].lstrip())
                        continue
                    if line or not data:
                        continue
                    doc = json.loads('\n'.join(data))
                    data = []
                    if 'error' in doc:
                        self.error(method, doc['error'])
                        return None
                    events.append(doc.get('result'))
                    if first_only:
                        return events
                if data:
                    doc = json.loads('\n'.join(data))
                    if 'error' in doc:
                        self.error(method, doc['error'])
                        return None
                    events.append(doc.get('result'))
        except (httpx.HTTPError, ValueError) as e:
            self.fail(method, f'stream: {type(e).__name__}: {e}')
            return None
        if not events:
            self.fail(method, 'the stream ended without an event')
            return None
        return events

    async def send(self, text, *, task=None, context=None, immediately=False):
        """SendMessage: (the Task answered or None, the messageId sent)."""
        mid = str(uuid.uuid4())
        result = await self.call('SendMessage', send_params(text, mid, task, context, immediately))
        if result is None:
            return None, mid
        t = result.get('task')
        if not isinstance(t, dict) or not t.get('id'):
            self.fail('SendMessage', f'not a task: {json.dumps(result)[:200]}')
            return None, mid
        return t, mid

    def expect(self, method, task, state):
        got = ((task or {}).get('status') or {}).get('state')
        if got != state:
            self.fail(method, f'{state} expected, got {got}: {json.dumps(task)[:200]}')

    async def one(self, n, extras, push_url):
        first, mid = await self.send('need input')
        if first is None:
            return
        tid, cid = first['id'], first.get('contextId', '')
        self.tasks.append({'id': tid, 'context': cid, 'kind': 'multi', 'message_id': mid})
        self.expect('SendMessage', first, INPUT_REQUIRED)

        got = await self.call('GetTask', {'id': tid})
        if got is not None:
            self.expect('GetTask', got, INPUT_REQUIRED)

        if extras and push_url:
            pid = f'p{n}'
            made = await self.call(
                'CreateTaskPushNotificationConfig', {'taskId': tid, 'id': pid, 'url': push_url}
            )
            if made is not None and made.get('taskId') != tid:
                self.fail('CreateTaskPushNotificationConfig', f'another task: {made}')
            read = await self.call('GetTaskPushNotificationConfig', {'taskId': tid, 'id': pid})
            if read is not None and (read.get('id'), read.get('url')) != (pid, push_url):
                self.fail('GetTaskPushNotificationConfig', f'another config: {read}')

        params = send_params('more', str(uuid.uuid4()), tid, cid, False)
        if extras:
            events = await self.stream('SendStreamingMessage', params)
            if events is not None:
                last = events[-1] or {}
                state = (
                    (last.get('statusUpdate') or last.get('task') or {}).get('status') or {}
                ).get('state')
                if state != COMPLETED:
                    self.fail('SendStreamingMessage', f'ended {state}: {json.dumps(last)[:200]}')
        else:
            result = await self.call('SendMessage', params)
            if result is not None:
                self.expect('SendMessage', result.get('task'), COMPLETED)

        if not extras:
            return
        slow, mid = await self.send('slow', immediately=True)
        if slow is not None:
            sid = slow['id']
            self.tasks.append(
                {'id': sid, 'context': slow.get('contextId', ''), 'kind': 'slow', 'message_id': mid}
            )
            events = await self.stream('SubscribeToTask', {'id': sid}, first_only=True)
            if events is not None and ((events[0] or {}).get('task') or {}).get('id') != sid:
                self.fail('SubscribeToTask', f'not the task first: {json.dumps(events[0])[:200]}')
            canceled = await self.call('CancelTask', {'id': sid})
            if canceled is not None:
                self.expect('CancelTask', canceled, CANCELED)

        more, mid = await self.send('again', context=cid)
        if more is not None:
            self.tasks.append(
                {'id': more['id'], 'context': more.get('contextId', ''), 'kind': 'context',
                 'message_id': mid}
            )
            self.expect('SendMessage', more, COMPLETED)
            if more.get('contextId') != cid:
                self.fail('SendMessage', f'context {cid} asked, {more.get("contextId")} answered')

    async def new(self, text):
        task, mid = await self.send(text)
        if task is not None:
            self.tasks.append(
                {'id': task['id'], 'context': task.get('contextId', ''), 'kind': 'new',
                 'message_id': mid}
            )

    def report(self, seconds):
        return {
            'calls': dict(sorted(self.calls.items())),
            'calls_total': sum(self.calls.values()),
            'task_not_found': sum(self.not_found.values()),
            'task_not_found_by_method': dict(sorted(self.not_found.items())),
            'other_errors': sum(self.other.values()),
            'other_errors_by_method': dict(sorted(self.other.items())),
            'samples': self.samples,
            'tasks': self.tasks,
            'seconds': round(seconds, 3),
        }


def send_params(text, mid, task, context, immediately):
    message = {'messageId': mid, 'role': 'ROLE_USER', 'parts': [{'text': text}]}
    if task:
        message['taskId'] = task
    if context:
        message['contextId'] = context
    configuration = {'returnImmediately': True} if immediately else {}
    return {'message': message, 'configuration': configuration}


async def main_async(args):
    run = Run(args)
    gate = asyncio.Semaphore(args.concurrency)
    started = time.monotonic()

    async def bounded(job):
        async with gate:
            await job

    if args.new_only is not None:
        jobs = [bounded(run.new(args.text)) for _ in range(args.new_only)]
    else:
        every = max(args.every, 1)
        jobs = [
            bounded(run.one(n, n % every == every - 1, args.push_url)) for n in range(args.tasks)
        ]
    await asyncio.gather(*jobs)
    await run.client.aclose()
    return run.report(time.monotonic() - started)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--url', required=True, help="the JSON-RPC endpoint's URL")
    p.add_argument('--tasks', type=int, default=300, help='tasks in the multi-turn mode')
    p.add_argument('--new-only', type=int, help='only this many SendMessage calls, new tasks')
    p.add_argument('--text', default='hello', help="--new-only's message text")
    p.add_argument('--concurrency', type=int, default=16, help='tasks driven at once')
    p.add_argument('--every', type=int, default=5, help='every k-th task also streams, '
                   'cancels, pushes and writes in its context')
    p.add_argument('--push-url', help="the push receiver's URL (no push calls without it)")
    p.add_argument('--token', help='Authorization: Bearer TOKEN on every call')
    p.add_argument('--timeout', type=float, default=60.0, help='seconds for one call')
    args = p.parse_args()
    if args.concurrency < 1 or args.tasks < 0 or (args.new_only is not None and args.new_only < 0):
        p.error('counts must not be negative, concurrency at least 1')
    print(json.dumps(asyncio.run(main_async(args))), flush=True)


if __name__ == '__main__':
    main()
