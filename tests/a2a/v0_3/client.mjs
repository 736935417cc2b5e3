#!/usr/bin/env node
// Drive an A2A 0.3 agent (or the gateway) with @a2a-js/sdk 0.3.14's own client (installed in
// tests/node as `a2a-js-0.3`), and print what it saw: the same scenarios and the same output
// document as client.py in this folder (a2a-sdk 0.3), results normalised in 0.3's words.
//
//     node client.mjs --card-url URL --binding JSONRPC|HTTP+JSON [--token T] [--task ID]
//                     [--push-url URL] [--push-id ID] [--push-token T] SCENARIO...

import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const sdkRoot = path.join(here, '..', '..', 'node', 'node_modules', 'a2a-js-0.3');
if (!existsSync(path.join(sdkRoot, 'package.json'))) {
  process.stderr.write(`@a2a-js/sdk 0.3 is not installed in ${sdkRoot}: run \`npm ci --prefix tests/node\`\n`);
  process.exit(3);
}
const { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } =
  await import(pathToFileURL(path.join(sdkRoot, 'dist', 'client', 'index.js')).href);

const SCENARIOS = [
  'card', 'send-hello', 'get', 'get-missing', 'cancel', 'multi-turn', 'fail', 'message',
  'stream', 'subscribe', 'follow', 'push-set', 'push-get', 'send-push',
];
const FLAGS = {
  '--card-url': 'cardUrl', '--binding': 'binding', '--token': 'token', '--task': 'task',
  '--push-url': 'pushUrl', '--push-id': 'pushId', '--push-token': 'pushToken',
};

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    if (Object.hasOwn(FLAGS, argv[i])) out[FLAGS[argv[i]]] = argv[++i];
    else (out.scenarios ??= []).push(argv[i]);
  }
  if (!out.cardUrl || !['JSONRPC', 'HTTP+JSON'].includes(out.binding) || !out.scenarios?.every((s) => SCENARIOS.includes(s))) {
    process.stderr.write(`usage: client.mjs --card-url URL --binding JSONRPC|HTTP+JSON (${SCENARIOS.join('|')})...\n`);
    process.exit(2);
  }
  return out;
}

const texts = (parts) => (parts ?? []).filter((p) => p.kind === 'text').map((p) => p.text).join('\n');

// client.py's `summary`, over a2a.json's objects.
function summary(d) {
  if (d.kind === 'message') return { kind: 'message', role: d.role, text: texts(d.parts) };
  if (d.kind === 'status-update') return { kind: 'status', state: d.status.state, final: d.final };
  if (d.kind === 'artifact-update') return { kind: 'artifact', text: texts(d.artifact?.parts) };
  const status = d.status ?? {};
  const out = {
    kind: 'task',
    state: status.state,
    artifacts: (d.artifacts ?? []).map((a) => texts(a.parts)),
    has_id: Boolean(d.id),
    has_context: Boolean(d.contextId),
  };
  if (status.message) out.status_text = texts(status.message.parts);
  return out;
}

function errorData(e) {
  const out = { type: e?.constructor?.name ?? typeof e, message: e?.message ?? String(e) };
  const code = e?.errorResponse?.error?.code;
  if (code !== undefined) out.code = code;
  return out;
}

const userMessage = (text, taskId, contextId) => ({
  kind: 'message',
  messageId: randomUUID(),
  role: 'user',
  parts: [{ kind: 'text', text }],
  ...(taskId ? { taskId } : {}),
  ...(contextId ? { contextId } : {}),
});

class Driver {
  constructor(client, args) {
    this.client = client;
    this.args = args;
  }

  send(text, { taskId, contextId, blocking = true, push } = {}) {
    return this.client.sendMessage({
      message: userMessage(text, taskId, contextId),
      configuration: { blocking, ...(push ? { pushNotificationConfig: push } : {}) },
    });
  }

  async run(scenario) {
    switch (scenario) {
      case 'send-hello':
        return { send: summary(await this.send('hello')) };
      case 'get': {
        const task = await this.send('hello');
        const got = await this.client.getTask({ id: task.id });
        return { get: summary(got), same_id: got.id === task.id };
      }
      case 'get-missing':
        try {
          return { get: { ok: summary(await this.client.getTask({ id: 'no-such-task' })) } };
        } catch (e) {
          return { get: { error: errorData(e) } };
        }
      case 'cancel': {
        const task = await this.send('slow', { blocking: false });
        const canceled = await this.client.cancelTask({ id: task.id });
        const got = await this.client.getTask({ id: task.id });
        return {
          send_state_is_live: ['submitted', 'working'].includes(task.status.state),
          cancel: summary(canceled),
          get: summary(got),
        };
      }
      case 'multi-turn': {
        const first = await this.send('need input');
        const second = await this.send('blue', { taskId: first.id, contextId: first.contextId });
        return {
          first: summary(first),
          second: summary(second),
          same_task: second.id === first.id,
          same_context: second.contextId === first.contextId,
        };
      }
      case 'fail':
      case 'message':
        return { send: summary(await this.send(scenario)) };
      case 'stream': {
        const events = [];
        for await (const e of this.client.sendMessageStream({ message: userMessage('hello') })) events.push(summary(e));
        return { events };
      }
      case 'subscribe': {
        const task = await this.send('hello slowly', { blocking: false });
        const events = [];
        for await (const e of this.client.resubscribeTask({ id: task.id })) events.push(summary(e));
        const then = await this.client.getTask({ id: task.id });
        return { last: events.slice(-1), count_at_least_2: events.length >= 2, then: then.status.state };
      }
      case 'follow': {
        const events = [];
        try {
          for await (const e of this.client.resubscribeTask({ id: this.args.task })) events.push(summary(e));
        } catch (e) {
          return { events, error: errorData(e) };
        }
        return { events };
      }
      case 'push-set':
        return this.client.setTaskPushNotificationConfig({
          taskId: this.args.task,
          pushNotificationConfig: {
            url: this.args.pushUrl,
            ...(this.args.pushId ? { id: this.args.pushId } : {}),
            ...(this.args.pushToken ? { token: this.args.pushToken } : {}),
          },
        });
      case 'push-get':
        return this.client.getTaskPushNotificationConfig({ id: this.args.task, pushNotificationConfigId: this.args.pushId });
      case 'send-push': {
        const push = { url: this.args.pushUrl, ...(this.args.pushToken ? { token: this.args.pushToken } : {}) };
        const task = await this.send('hello slowly', { blocking: false, push });
        return { task_id: task.id, state: task.status.state };
      }
      default:
        throw new Error(`unknown scenario ${scenario}`);
    }
  }
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const fetchImpl = (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (args.token) headers.set('Authorization', `Bearer ${args.token}`);
    return fetch(url, { ...init, headers });
  };
  let out;
  try {
    const card = await new DefaultAgentCardResolver({ fetchImpl }).resolve(args.cardUrl, '');
    const transport = args.binding === 'JSONRPC' ? new JsonRpcTransportFactory({ fetchImpl }) : new RestTransportFactory({ fetchImpl });
    const factory = new ClientFactory({ transports: [transport], preferredTransports: [args.binding] });
    const scenarios = {};
    for (const s of args.scenarios) {
      if (s === 'card') {
        scenarios[s] = { result: card };
        continue;
      }
      try {
        const client = await factory.createFromAgentCard(card);
        scenarios[s] = { result: await new Driver(client, args).run(s) };
      } catch (e) {
        scenarios[s] = { error: errorData(e) };
      }
    }
    out = { binding: args.binding, scenarios };
  } catch (e) {
    out = { binding: args.binding, error: errorData(e) };
  }
  process.stdout.write(JSON.stringify(sortKeys(out)) + '\n');
}

await main();
