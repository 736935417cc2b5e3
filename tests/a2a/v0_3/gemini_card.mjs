#!/usr/bin/env node
// Prints the agent card of Google's Gemini CLI A2A server (@google/gemini-cli-a2a-server
// 0.25.2), read from the pinned npm package at test time: its `coderAgentCard` object in
// dist/src/http/app.js, evaluated alone in an empty context (its values are literals), as JSON.
// The server itself needs Gemini credentials, so the tests serve this card from a scripted
// agent. The package tarball is fetched by scripts/test (`npm pack` into tests/node/packs);
// nothing of it is copied into the repository.
//
//     node gemini_card.mjs [TARBALL]

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import vm from 'node:vm';

const here = path.dirname(fileURLToPath(import.meta.url));
const tarball = process.argv[2] ??
  path.join(here, '..', '..', 'node', 'packs', 'google-gemini-cli-a2a-server-0.25.2.tgz');
if (!existsSync(tarball)) {
  process.stderr.write(`${tarball} is missing: run \`npm pack --pack-destination tests/node/packs @google/gemini-cli-a2a-server@0.25.2\` (scripts/test does)\n`);
  process.exit(3);
}
const source = execFileSync('tar', ['-xzOf', tarball, 'package/dist/src/http/app.js'], { encoding: 'utf8' });
const start = source.indexOf('const coderAgentCard = {');
const end = source.indexOf('\n};\n', start);
if (start < 0 || end < 0) {
  process.stderr.write('no `const coderAgentCard = {...};` in dist/src/http/app.js\n');
  process.exit(4);
}
const literal = source.slice(start + 'const coderAgentCard = '.length, end + 2);
const card = vm.runInNewContext(`(${literal})`, Object.create(null), { timeout: 1000 });
process.stdout.write(JSON.stringify(card) + '\n');
