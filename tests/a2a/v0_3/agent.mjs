#!/usr/bin/env node
// A scripted A2A 0.3 agent built on @a2a-js/sdk 0.3.14's own server classes (installed in
// tests/node as `a2a-js-0.3`, on express): ONE binding (`--binding JSONRPC` at /a2a/jsonrpc,
// or `--binding HTTP+JSON` with its routes under /v1/), its 0.3 card at
// /.well-known/agent-card.json. Prints `listening on http://127.0.0.1:PORT`. `--push`: the card
// says pushNotifications and the SDK's own store and sender push. The script, by message text,
// is agent.py's (tests/a2a/README.md): hello, hello slowly, need input, fail, reject, slow,
// message, an echo of anything else.
//
//     node agent.mjs --binding JSONRPC|HTTP+JSON [--port N] [--push]

import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, '..', '..', 'node', 'node_modules');
const sdkRoot = path.join(modules, 'a2a-js-0.3');
const server = await import(pathToFileURL(path.join(sdkRoot, 'dist', 'server', 'index.js')).href);
const express = createRequire(path.join(modules, 'x.js'))('express');
const { jsonRpcHandler, restHandler, agentCardHandler, UserBuilder } = await import(
  pathToFileURL(path.join(sdkRoot, 'dist', 'server', 'express', 'index.js')).href
);
const { DefaultRequestHandler, InMemoryTaskStore } = server;

const args = { port: 0, push: false };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '--binding') args.binding = process.argv[++i];
  else if (a === '--port') args.port = Number(process.argv[++i]);
  else if (a === '--push') args.push = true;
}
if (!['JSONRPC', 'HTTP+JSON'].includes(args.binding)) {
  process.stderr.write('usage: agent.mjs --binding JSONRPC|HTTP+JSON [--port N] [--push]\n');
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => new Date().toISOString();
const text = (t) => [{ kind: 'text', text: t }];

class Scripted {
  constructor() {
    this.canceled = new Set();
  }

  async execute(ctx, bus) {
    const { taskId, contextId, userMessage, task } = ctx;
    const said = (userMessage.parts ?? []).filter((p) => p.kind === 'text').map((p) => p.text).join('').trim();
    const status = (state, message, final = false) =>
      bus.publish({
        kind: 'status-update', taskId, contextId, final,
        status: { state, timestamp: now(), ...(message ? { message: { kind: 'message', role: 'agent', messageId: randomUUID(), taskId, contextId, parts: text(message) } } : {}) },
      });
    const artifact = (name, t) =>
      bus.publish({ kind: 'artifact-update', taskId, contextId, artifact: { artifactId: randomUUID(), name, parts: text(t) } });
    if (said === 'message' && !task) {
      bus.publish({ kind: 'message', role: 'agent', messageId: randomUUID(), contextId, parts: text('you said: message') });
      bus.finished();
      return;
    }
    if (!task) {
      bus.publish({ kind: 'task', id: taskId, contextId, status: { state: 'submitted', timestamp: now() }, history: [userMessage] });
    }
    if (task && task.status.state === 'input-required') {
      status('working');
      artifact('answer', `got: ${said}`);
      status('completed', undefined, true);
    } else if (said === 'hello' || said === 'hello slowly') {
      const pause = said === 'hello slowly' ? 500 : 50;
      await sleep(pause);
      status('working');
      await sleep(pause);
      artifact('greeting', 'Hello, world!');
      await sleep(pause);
      status('completed', undefined, true);
    } else if (said === 'need input') {
      status('input-required', 'what else?', true);
    } else if (said === 'fail') {
      status('failed', 'it failed', true);
    } else if (said === 'reject') {
      status('rejected', undefined, true);
    } else if (said === 'slow') {
      status('working');
      for (let i = 0; i < 200 && !this.canceled.has(taskId); i++) await sleep(100);
      if (!this.canceled.has(taskId)) status('completed', undefined, true);
    } else {
      artifact('echo', `echo: ${said}`);
      status('completed', undefined, true);
    }
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    this.canceled.add(taskId);
    bus.publish({ kind: 'status-update', taskId, contextId: '', final: true, status: { state: 'canceled', timestamp: now() } });
    bus.finished();
  }
}

const app = express();
const listener = app.listen(args.port, '127.0.0.1', () => {
  const port = listener.address().port;
  const base = `http://127.0.0.1:${port}`;
  const card = {
    name: 'js-0.3-scripted-agent',
    description: '@a2a-js/sdk 0.3 agent scripted by message text, for a2a-gateway tests',
    version: '0.3.0',
    protocolVersion: '0.3.0',
    url: args.binding === 'JSONRPC' ? `${base}/a2a/jsonrpc` : base,
    preferredTransport: args.binding,
    capabilities: { streaming: true, pushNotifications: args.push },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 'script', name: 'Scripted replies', description: 'hello, need input, fail, reject, slow, message', tags: ['test'] }],
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Scripted());
  const userBuilder = UserBuilder.noAuthentication;
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
  if (args.binding === 'JSONRPC') app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder }));
  else app.use('/', restHandler({ requestHandler: handler, userBuilder }));
  process.stdout.write(`listening on ${base}\n`);
});
