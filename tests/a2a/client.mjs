#!/usr/bin/env node
// Drive an A2A 1.0 agent (or the gateway) with @a2a-js/sdk's own client, and print what it saw.
//
//     node client.mjs --card-url URL --binding JSONRPC|HTTP+JSON [--token T] SCENARIO [SCENARIO...]
//                     [--card-token T] [--task ID] [--text T] [--push-url URL] [--push-id ID]
//                     [--push-token T] [--push-auth "SCHEME CREDENTIALS"]
//
// The same scenarios and the same output document as client.py (a2a-sdk), so a Rust test can
// compare the two SDKs, and a run direct to the agent with one through the gateway. The client
// starts from the card at URL (DefaultAgentCardResolver) and is given only the transport of
// --binding, so it can never fall back to another binding of the card. Errors the SDK raises
// are printed as data ({"error": {...}}), not crashes. The push scenarios print configs and task
// ids as returned, not normalised: tests need them.
//
// @a2a-js/sdk is resolved from tests/node/node_modules (run `npm ci` in tests/node).

import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const sdkRoot = path.join(here, '..', 'node', 'node_modules', '@a2a-js', 'sdk');
if (!existsSync(path.join(sdkRoot, 'package.json'))) {
  process.stderr.write(`@a2a-js/sdk is not installed in ${sdkRoot}: run \`npm ci --prefix tests/node\`\n`);
  process.exit(3);
}
const sdk = await import(pathToFileURL(path.join(sdkRoot, 'dist', 'index.js')).href);
const sdkClient = await import(pathToFileURL(path.join(sdkRoot, 'dist', 'client', 'index.js')).href);

const {
  Message,
  SendMessageRequest,
  StreamResponse,
  Task,
  ListTasksRequest,
  ListTasksResponse,
  TaskPushNotificationConfig,
  GetTaskPushNotificationConfigRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  DeleteTaskPushNotificationConfigRequest,
} = sdk;
const {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} = sdkClient;

const SCENARIOS = [
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
];

// What each push scenario needs besides --card-url and --binding.
const PUSH_NEEDS = {
  'push-set': ['task', 'pushUrl'],
  'push-get': ['task', 'pushId'],
  'push-list': ['task'],
  'push-delete': ['task', 'pushId'],
  'send-push': ['pushUrl'],
};
const FLAGS = {
  '--card-url': 'cardUrl',
  '--binding': 'binding',
  '--token': 'token',
  '--card-token': 'cardToken',
  '--task': 'task',
  '--text': 'text',
  '--push-url': 'pushUrl',
  '--push-id': 'pushId',
  '--push-token': 'pushToken',
  '--push-auth': 'pushAuth',
};

function parseArgs(argv) {
  const out = { text: 'hello slowly' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (Object.hasOwn(FLAGS, a)) out[FLAGS[a]] = argv[++i];
    else (out.scenarios ??= []).push(a);
  }
  if (
    !out.cardUrl ||
    !['JSONRPC', 'HTTP+JSON'].includes(out.binding) ||
    !out.scenarios?.length ||
    !out.scenarios.every((s) => SCENARIOS.includes(s)) ||
    !out.scenarios.every((s) => (PUSH_NEEDS[s] ?? []).every((need) => out[need]))
  ) {
    process.stderr.write(
      `usage: client.mjs --card-url URL --binding JSONRPC|HTTP+JSON [--token T] ` +
        `[--card-token T] [--task ID] ` +
        `[--text T] [--push-url URL] [--push-id ID] [--push-token T] ` +
        `[--push-auth "SCHEME CREDENTIALS"] ` +
        `(${SCENARIOS.join('|')})...\n` +
        `  push-set needs --task and --push-url; push-get and push-delete --task and --push-id; ` +
        `push-list --task; send-push --push-url\n`,
    );
    process.exit(2);
  }
  return out;
}

const texts = (parts) => (parts ?? []).filter((p) => 'text' in p).map((p) => p.text).join('\n');

// The same normalisation as client.py's `summary`, over ProtoJSON.
function summary(d) {
  if (d.task) return summaryTask(d.task);
  if (d.message) return { kind: 'message', role: d.message.role, text: texts(d.message.parts) };
  if (d.statusUpdate) return { kind: 'status', state: d.statusUpdate.status?.state };
  if (d.artifactUpdate) return { kind: 'artifact', text: texts(d.artifactUpdate.artifact?.parts) };
  return summaryTask(d);
}

function summaryTask(t) {
  const status = t.status ?? {};
  const out = {
    kind: 'task',
    state: status.state,
    artifacts: (t.artifacts ?? []).map((a) => texts(a.parts)),
    has_id: Boolean(t.id),
    has_context: Boolean(t.contextId),
  };
  if (status.message) out.status_text = texts(status.message.parts);
  return out;
}

function errorData(e) {
  const out = { type: e?.name ?? typeof e, message: e?.message ?? String(e) };
  if (e?.reason && e.reason !== 'INTERNAL_ERROR') out.reason = e.reason;
  if (e?.envelopeCode !== undefined) out.code = e.envelopeCode;
  if (e?.statusCode !== undefined) out.status_code = e.statusCode;
  if (e?.metadata) out.data = e.metadata;
  return out;
}

// A Task or a Message from Client.sendMessage, as ProtoJSON in a SendMessageResponse shape.
function sendResult(r) {
  return 'messageId' in r ? { message: Message.toJSON(r) } : { task: Task.toJSON(r) };
}

// The TaskPushNotificationConfig the --push-* flags describe (for taskId, if given), as
// ProtoJSON.
function pushConfig(args, taskId) {
  const config = {
    ...(taskId ? { taskId } : {}),
    ...(args.pushId ? { id: args.pushId } : {}),
    ...(args.pushUrl ? { url: args.pushUrl } : {}),
    ...(args.pushToken ? { token: args.pushToken } : {}),
  };
  if (args.pushAuth) {
    const space = args.pushAuth.indexOf(' ');
    config.authentication =
      space < 0
        ? { scheme: args.pushAuth, credentials: '' }
        : { scheme: args.pushAuth.slice(0, space), credentials: args.pushAuth.slice(space + 1) };
  }
  return config;
}

// A TaskPushNotificationConfig as returned: ProtoJSON, camelCase, absent fields left out.
const configData = (c) => TaskPushNotificationConfig.toJSON(c);

function userMessage(text, taskId, contextId) {
  return Message.fromJSON({
    messageId: randomUUID(),
    role: 'ROLE_USER',
    parts: [{ text }],
    ...(taskId ? { taskId } : {}),
    ...(contextId ? { contextId } : {}),
  });
}

class Driver {
  constructor(client, args) {
    this.client = client;
    this.args = args;
    this.task = args.task;
  }

  async send(text, { taskId, contextId, immediately, push } = {}) {
    const configuration = {
      ...(immediately ? { returnImmediately: true } : {}),
      ...(push ? { taskPushNotificationConfig: push } : {}),
    };
    const params = SendMessageRequest.fromJSON({
      message: Message.toJSON(userMessage(text, taskId, contextId)),
      ...(Object.keys(configuration).length ? { configuration } : {}),
    });
    return sendResult(await this.client.sendMessage(params));
  }

  async get(id) {
    return Task.toJSON(await this.client.getTask({ id, tenant: '' }));
  }

  async cancel(id) {
    return Task.toJSON(await this.client.cancelTask({ id, tenant: '' }));
  }

  async run(scenario) {
    switch (scenario) {
      case 'send-hello':
        return { send: summary(await this.send('hello')) };
      case 'get': {
        const sent = await this.send('hello');
        const got = await this.get(sent.task.id);
        return { send: summary(sent), get: summary(got), same_id: got.id === sent.task.id };
      }
      case 'get-missing':
        return { get: await guarded(this.get('no-such-task')) };
      case 'cancel': {
        const sent = await this.send('slow', { immediately: true });
        const canceled = await this.cancel(sent.task.id);
        const got = await this.get(sent.task.id);
        return {
          send_state_is_live: ['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING'].includes(summary(sent).state),
          cancel: summary(canceled),
          get: summary(got),
        };
      }
      case 'cancel-final': {
        const sent = await this.send('hello');
        return { send: summary(sent), cancel: await guarded(this.cancel(sent.task.id)) };
      }
      case 'multi-turn': {
        const first = await this.send('need input');
        const second = await this.send('blue', {
          taskId: first.task.id,
          contextId: first.task.contextId,
        });
        return {
          first: summary(first),
          second: summary(second),
          same_task: second.task.id === first.task.id,
          same_context: second.task.contextId === first.task.contextId,
        };
      }
      case 'fail':
      case 'reject':
      case 'message':
        return { send: summary(await this.send(scenario)) };
      case 'list': {
        const sent = [await this.send('hello'), await this.send('fail')];
        const listed = ListTasksResponse.toJSON(
          await this.client.listTasks(ListTasksRequest.fromJSON({})),
        );
        const ids = new Set((listed.tasks ?? []).map((t) => t.id));
        return { sent_listed: sent.every((s) => ids.has(s.task.id)) };
      }
      case 'list-pages': {
        // Every COMPLETED task the caller may see, 7 a page, following the tokens.
        const ids = [];
        const totals = [];
        let pageToken = '';
        for (let n = 0; n < 1000; n++) {
          const page = ListTasksResponse.toJSON(
            await this.client.listTasks(
              ListTasksRequest.fromJSON({ status: 'TASK_STATE_COMPLETED', pageSize: 7, pageToken }),
            ),
          );
          ids.push(...(page.tasks ?? []).map((t) => t.id));
          totals.push(page.totalSize);
          pageToken = page.nextPageToken ?? '';
          if (!pageToken) break;
        }
        return { ids, totals };
      }
      case 'stream': {
        const params = SendMessageRequest.fromJSON({ message: Message.toJSON(userMessage('hello')) });
        const events = [];
        for await (const e of this.client.sendMessageStream(params)) {
          events.push(summary(StreamResponse.toJSON(e)));
        }
        return { events };
      }
      case 'subscribe': {
        const sent = await this.send('hello slowly', { immediately: true });
        const events = [];
        for await (const e of this.client.resubscribeTask({ id: sent.task.id, tenant: '' })) {
          events.push(summary(StreamResponse.toJSON(e)));
        }
        return { first: events.slice(0, 1), last: events.slice(-1), count_at_least_2: events.length >= 2 };
      }
      case 'follow': {
        // Subscribe to --task and read until the stream ends: the events, and the error the
        // SDK raised if it ended with one.
        const events = [];
        try {
          for await (const e of this.client.resubscribeTask({ id: this.task, tenant: '' })) {
            events.push(summary(StreamResponse.toJSON(e)));
          }
        } catch (e) {
          return { events, error: errorData(e) };
        }
        return { events };
      }
      case 'push-set': {
        const created = await this.client.createTaskPushNotificationConfig(
          TaskPushNotificationConfig.fromJSON(pushConfig(this.args, this.task)),
        );
        return configData(created);
      }
      case 'push-get': {
        const got = await this.client.getTaskPushNotificationConfig(
          GetTaskPushNotificationConfigRequest.fromJSON({
            taskId: this.task,
            id: this.args.pushId,
          }),
        );
        return configData(got);
      }
      case 'push-list': {
        const listed = ListTaskPushNotificationConfigsResponse.toJSON(
          await this.client.listTaskPushNotificationConfig(
            ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: this.task }),
          ),
        );
        return { configs: listed.configs ?? [], nextPageToken: listed.nextPageToken ?? '' };
      }
      case 'push-delete':
        await this.client.deleteTaskPushNotificationConfig(
          DeleteTaskPushNotificationConfigRequest.fromJSON({
            taskId: this.task,
            id: this.args.pushId,
          }),
        );
        return { deleted: true };
      case 'send-push': {
        // The config inline on SendMessage; the answer comes back while the task runs.
        const sent = await this.send(this.args.text, {
          immediately: true,
          push: pushConfig(this.args),
        });
        return { task_id: sent.task.id, state: summary(sent).state };
      }
      default:
        throw new Error(`unknown scenario ${scenario}`);
    }
  }
}

async function guarded(promise) {
  try {
    return { ok: summary(await promise) };
  } catch (e) {
    return { error: errorData(e) };
  }
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  }
  return v;
}

async function runOne(args, scenario, fetchImpl, resolver, card) {
  if (scenario === 'card') return { scenario: 'card', card: sdk.AgentCard.toJSON(card) };
  try {
    const transport =
      args.binding === 'JSONRPC'
        ? new JsonRpcTransportFactory({ fetchImpl })
        : new RestTransportFactory({ fetchImpl });
    const factory = new ClientFactory({
      transports: [transport],
      cardResolver: resolver,
      preferredTransports: [args.binding],
    });
    const client = await factory.createFromAgentCard(card);
    const result = await new Driver(client, args).run(scenario);
    return { scenario, binding: args.binding, result };
  } catch (e) {
    return { scenario, error: errorData(e) };
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  // Every call with --token; the card with --card-token instead when given ("" for none).
  const withToken = (token) => (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('Authorization', `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
  const fetchImpl = withToken(args.token);
  const resolver = new DefaultAgentCardResolver({
    fetchImpl: args.cardToken === undefined ? fetchImpl : withToken(args.cardToken),
  });
  let out;
  let card;
  try {
    // An empty path: the card URL is used as given (new URL('', cardUrl)).
    card = await resolver.resolve(args.cardUrl, '');
  } catch (e) {
    out = args.scenarios.length === 1
      ? { scenario: args.scenarios[0], error: errorData(e) }
      : { binding: args.binding, error: errorData(e) };
  }
  if (card && args.scenarios.length === 1) {
    out = await runOne(args, args.scenarios[0], fetchImpl, resolver, card);
  } else if (card) {
    const scenarios = {};
    for (const s of args.scenarios) scenarios[s] = await runOne(args, s, fetchImpl, resolver, card);
    out = { binding: args.binding, scenarios };
  }
  process.stdout.write(JSON.stringify(sortKeys(out)) + '\n');
}

await main();
