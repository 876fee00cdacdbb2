// Issue 23: the official TypeScript SDK clients through the gateway in front of stdio
// upstreams (`[[upstream]] command = [...]`), real programs the gateway starts itself:
//
// - `@modelcontextprotocol/server-everything` (`dist/index.js stdio`, 2025-11-25 only), its
//   `trigger-elicitation-request` form pushed during the call: to a TS SDK 1.x client in its
//   own session, and to a TS SDK v2 client (2026-07-28) through the era bridge as
//   `input_required` (answer key `answer`, sealed `pbh1.` requestState);
// - `@modelcontextprotocol/server-memory` (2025-11-25 only), both client kinds;
// - the Python SDK stdio server (servers/py_stdio_server.py, 2026-07-28 natively), the
//   TS SDK 1.x client in a bridged session (questions pushed to it);
// - two API-key principals on one server-memory upstream: each gets its own program
//   process (`portcullis_stdio_processes`, `portcullis_stdio_starts_total`).
//
// One gateway process serves every case (lib/bridge.mjs's startGatewayToml, port 0).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { gatewayBinary, pythonBinary } from '../lib/harness.mjs';
import { connectV1, connectV2, acceptAll, flowOutcome, fieldsOf } from '../lib/clients.mjs';
import { startGatewayToml, eventually, LEGACY, MODERN } from '../lib/bridge.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const INTEROP = join(HERE, '..');
const MODULES = join(INTEROP, 'node_modules');
const NODE = join(MODULES, '.bin', 'node');
const EVERYTHING = join(MODULES, '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const MEMORY = join(MODULES, '@modelcontextprotocol', 'server-memory', 'dist', 'index.js');
const PY_STDIO = join(INTEROP, 'servers', 'py_stdio_server.py');
const TIMEOUT = { timeout: 30_000 };
const name = (id) => `Interop ${id}`;

// The form server-everything pushes (its dist/tools/trigger-elicitation-request.js).
const ELICIT_TOOL = 'trigger-elicitation-request';
const ELICIT_MESSAGE = 'Please provide inputs for the following fields:';
const ELICIT_FIELDS = [
  'name', 'check', 'firstLine', 'email', 'homepage', 'birthdate', 'integer', 'number',
  'untitledSingleSelectEnum', 'untitledMultipleSelectEnum', 'titledSingleSelectEnum',
  'titledMultipleSelectEnum', 'legacyTitledEnum',
];
const EVERYTHING_TOOLS = ['echo', 'get-sum', 'get-env', 'get-tiny-image', ELICIT_TOOL];
const MEMORY_TOOLS = [
  'create_entities', 'create_relations', 'add_observations', 'delete_entities',
  'delete_observations', 'delete_relations', 'read_graph', 'search_nodes', 'open_nodes',
];
// The field whose description ("Your favorite integer (do not give us your phone number,
// pin, or other sensitive info)") asks for no PIN: both presets deliver the form.

const KEYS = { alice: 'pcl-interop-stdio-alice-7f3c1a', bob: 'pcl-interop-stdio-bob-91d2e4' };

let gateway, dir;

/** `portcullis hash-key` of `key` (the gateway's own hashing; keys are never stored). */
const hashKey = (key) => execFileSync(gatewayBinary(), ['hash-key'], { input: key, encoding: 'utf8' }).trim();

function upstreamToml(id, command, extra = []) {
  return [
    '[[upstream]]',
    `id = "${id}"`,
    `name = "${name(id)}"`,
    `command = [${command.map((c) => JSON.stringify(c)).join(', ')}]`,
    'response_timeout = "10s"',
    'stop_timeout = "1s"',
    ...extra,
    '',
  ].join('\n');
}

const routeToml = (id, extra = []) => ['[[route]]', `path = "/mcp/${id}"`, `upstream = "${id}"`, ...extra, ''].join('\n');

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'portcullis-interop-stdio-'));
  const policies = join(dir, 'policies');
  mkdirSync(policies);
  // Both presets deliver server-everything's form now; this policy
  // tells the secret-field check that its `integer` field is not a secret.
  writeFileSync(
    join(policies, 'everything-form.toml'),
    ['extends = "trusted"', '[secret_fields]', 'allow_names = ["integer"]', ''].join('\n'),
  );
  const everything = [NODE, EVERYTHING, 'stdio'];
  const memory = [NODE, MEMORY];
  const memoryEnv = (file) => `env = { MEMORY_FILE_PATH = ${JSON.stringify(join(dir, file))} }`;
  const body = [
    '[state]',
    'max_rounds = 3',
    '',
    '[policies]',
    `dir = ${JSON.stringify(policies)}`,
    '',
    '[[auth]]',
    'name = "keys"',
    'type = "api_key"',
    ...Object.entries(KEYS).flatMap(([principal, key]) => ['[[auth.key]]', `principal = "${principal}"`, `hash = "${hashKey(key)}"`]),
    '',
    upstreamToml('everything-form', everything, ['policy = "everything-form"']),
    upstreamToml('everything-trusted', everything, ['policy = "trusted"']),
    upstreamToml('everything', everything),
    upstreamToml('memory', memory, [memoryEnv('memory.jsonl')]),
    upstreamToml('memory-keyed', memory, [memoryEnv('memory-keyed.jsonl'), 'max_processes = 4']),
    upstreamToml('py', [pythonBinary(), PY_STDIO]),
    ...['everything-form', 'everything-trusted', 'everything', 'memory', 'py'].map((id) => routeToml(id)),
    routeToml('memory-keyed', ['auth = ["keys"]', 'allow_anonymous = false']),
  ].join('\n');
  gateway = await startGatewayToml(body);
});

after(async () => {
  await gateway?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const url = (id) => gateway.at(`/mcp/${id}`);

/** One labelled sample of the gateway's /metrics (`upstream="<id>"`), 0 when absent. */
async function stdioMetric(metricName, upstream) {
  const text = await (await fetch(`${gateway.admin}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${metricName}{`) && l.includes(`upstream="${upstream}"`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

const processes = (upstream) => stdioMetric('portcullis_stdio_processes', upstream);
const starts = (upstream) => stdioMetric('portcullis_stdio_starts_total', upstream);

/** Texts of a tool result's text blocks. */
const texts = (result) => (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);

/** The person answering server-everything's form. */
const FORM_ANSWER = { action: 'accept', content: { name: 'Ada Lovelace', check: true, integer: 7 } };

const KINDS = [
  ['TS SDK v2 client (2026-07-28)', 'v2'],
  ['TS SDK 1.x client (2025-11-25)', 'v1'],
];

/** Connect a client of `kind`, run `body(session)`, end the session (DELETE for 1.x) and close. */
async function withClient(kind, target, answer, body) {
  const session = kind === 'v2' ? await connectV2(target, answer) : await connectV1(target, answer);
  try {
    return await body(session);
  } finally {
    if (kind === 'v1') await session.transport.terminateSession().catch(() => {});
    await session.close();
  }
}

/**
 * The answer a 1.x client POSTed to a pushed question, once its POST is answered (the
 * tool's result may come back on the call's stream before the answer's own 202 does).
 */
async function postedAnswer(session) {
  const answer = session.wire.find((w) => w.body && !w.body.method && w.body.result);
  assert.ok(answer, 'no answer was POSTed');
  await eventually(() => answer.status !== undefined, 5_000);
  return answer;
}

const versionOf = (kind, session) =>
  kind === 'v2' ? session.client.getNegotiatedProtocolVersion() : session.transport.protocolVersion;

for (const [title, kind] of KINDS) {
  describe(`${title} → server-everything over stdio`, () => {
    it('tools/list gives the program\'s tools, the elicitation tool included (the client declared elicitation)', TIMEOUT, async () => {
      await withClient(kind, url('everything'), acceptAll(), async (session) => {
        assert.equal(versionOf(kind, session), kind === 'v2' ? MODERN : LEGACY);
        const names = (await session.client.listTools()).tools.map((t) => t.name);
        for (const tool of EVERYTHING_TOOLS) assert.ok(names.includes(tool), `${tool} missing from ${names}`);
      });
    });

    it('tools/call echo', TIMEOUT, async () => {
      await withClient(kind, url('everything'), acceptAll(), async (session) => {
        const result = await session.client.callTool({ name: 'echo', arguments: { message: `hello from ${kind}` } });
        assert.deepEqual(result.content, [{ type: 'text', text: `Echo: hello from ${kind}` }]);
        assert.ok(!result.isError);
      });
    });

    it(`${ELICIT_TOOL} under a policy that allows the form: the handler gets the question, its accept reaches the program`, TIMEOUT, async () => {
      await withClient(kind, url('everything-form'), () => FORM_ANSWER, async (session) => {
        const result = await session.client.callTool({ name: ELICIT_TOOL, arguments: {} });
        assert.equal(session.asked.length, 1);
        const [question] = session.asked;
        assert.equal(question.message, ELICIT_MESSAGE);
        assert.deepEqual(fieldsOf(question), ELICIT_FIELDS);
        assert.deepEqual(question.requestedSchema.required, ['name']);
        const provenance = question._meta?.['dev.portcullis/provenance'];
        assert.equal(provenance?.upstream?.name, name('everything-form'));
        assert.equal(provenance?.policy, 'everything-form');
        // What the program made of the answer it got.
        const [done, inputs, raw] = texts(result);
        assert.ok(!result.isError, JSON.stringify(result));
        assert.equal(done, '✅ User provided the requested information!');
        assert.equal(inputs, 'User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Favorite Integer: 7');
        assert.deepEqual(JSON.parse(raw.replace(/^\s*Raw result: /, '')), FORM_ANSWER);
        const calls = session.wire.filter((w) => w.body?.method === 'tools/call');
        if (kind === 'v2') {
          // Through the bridge: asked as input_required, the retry carries the answer
          // under the key `answer` and the gateway's sealed state.
          assert.equal(calls.length, 2);
          assert.deepEqual(calls[1].body.params.inputResponses, { answer: FORM_ANSWER });
          assert.match(calls[1].body.params.requestState, /^pbh1\./);
        } else {
          // Pushed in the session; the answer POSTed back as a JSON-RPC response.
          assert.equal(calls.length, 1);
          const answer = await postedAnswer(session);
          assert.deepEqual(answer.body.result, FORM_ANSWER);
          assert.equal(answer.status, 202);
        }
      });
    });

    it(`${ELICIT_TOOL} under the default untrusted policy: the form is delivered (it tells people not to give a PIN)`, TIMEOUT, async () => {
      await withClient(kind, url('everything'), () => FORM_ANSWER, async (session) => {
        const result = await session.client.callTool({ name: ELICIT_TOOL, arguments: {} });
        assert.equal(session.asked.length, 1, texts(result)[0]);
        assert.equal(texts(result)[0], '✅ User provided the requested information!');
      });
    });

    it(
      `${ELICIT_TOOL} under the trusted preset: the form is delivered`,
      TIMEOUT,
      async () => {
        await withClient(kind, url('everything-trusted'), () => FORM_ANSWER, async (session) => {
          const result = await session.client.callTool({ name: ELICIT_TOOL, arguments: {} });
          assert.equal(session.asked.length, 1, texts(result)[0]);
          assert.equal(texts(result)[0], '✅ User provided the requested information!');
        });
      },
    );
  });

  describe(`${title} → server-memory over stdio`, () => {
    it('create_entities, then read_graph has the entity (and the program wrote it to its MEMORY_FILE_PATH)', TIMEOUT, async () => {
      await withClient(kind, url('memory'), acceptAll(), async (session) => {
        const names = (await session.client.listTools()).tools.map((t) => t.name);
        assert.deepEqual(names, MEMORY_TOOLS);
        const entity = { name: `ada-${kind}`, entityType: 'person', observations: [`met through the ${kind} client`] };
        const created = await session.client.callTool({ name: 'create_entities', arguments: { entities: [entity] } });
        assert.ok(!created.isError, JSON.stringify(created));
        assert.deepEqual(created.structuredContent, { entities: [entity] });
        const graph = await session.client.callTool({ name: 'read_graph', arguments: {} });
        assert.ok(!graph.isError, JSON.stringify(graph));
        assert.deepEqual(graph.structuredContent.entities.find((e) => e.name === entity.name), entity);
        assert.deepEqual(JSON.parse(texts(graph)[0]), graph.structuredContent);
        const stored = readFileSync(join(dir, 'memory.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
        assert.ok(stored.some((e) => e.name === entity.name && e.entityType === 'person'), JSON.stringify(stored));
      });
    });
  });
}

describe('TS SDK 1.x client → Python SDK stdio server (2026-07-28 natively: a bridged session)', () => {
  it('initialize answered by the bridge: the configured name, a pss1. session', TIMEOUT, async () => {
    await withClient('v1', url('py'), acceptAll(), async (session) => {
      assert.equal(session.transport.protocolVersion, LEGACY);
      assert.match(session.transport.sessionId, /^pss1\./);
      assert.equal(session.client.getServerVersion().name, name('py'));
      const names = (await session.client.listTools()).tools.map((t) => t.name);
      assert.deepEqual(names, ['book', 'endless', 'wizard', 'profile', 'signin', 'vault', 'styled', 'echo']);
    });
  });

  it('book: the question pushed to the handler, accepted, the program gets the room', TIMEOUT, async () => {
    await withClient('v1', url('py'), acceptAll({ pick: { room_id: 'nook' } }), async (session) => {
      const result = await session.client.callTool({ name: 'book', arguments: { hint: 'the quiet one' } });
      assert.deepEqual(flowOutcome(result), { tool: 'book', answers: { room: { room_id: 'nook' } } });
      assert.equal(session.asked.length, 1);
      assert.equal(session.asked[0].message, 'Which room do you mean by the quiet one?');
      assert.deepEqual(session.asked[0].requestedSchema.properties.room_id.enum, ['atrium', 'studio-b', 'nook']);
      assert.equal(session.asked[0]._meta?.['dev.portcullis/provenance']?.upstream?.name, name('py'));
      const answer = await postedAnswer(session);
      assert.deepEqual(answer.body.result, { action: 'accept', content: { room_id: 'nook' } });
      assert.equal(answer.status, 202);
    });
  });

  for (const action of ['decline', 'cancel']) {
    it(`book: ${action} reaches the program`, TIMEOUT, async () => {
      await withClient('v1', url('py'), () => ({ action }), async (session) => {
        const result = await session.client.callTool({ name: 'book', arguments: { hint: 'x' } });
        assert.deepEqual(flowOutcome(result), { tool: 'book', stopped: { key: 'room', action } });
        assert.equal(session.asked.length, 1);
      });
    });
  }

  it('echo', TIMEOUT, async () => {
    await withClient('v1', url('py'), acceptAll(), async (session) => {
      const result = await session.client.callTool({ name: 'echo', arguments: { text: 'over stdio' } });
      assert.deepEqual(result.content, [{ type: 'text', text: 'over stdio' }]);
      assert.deepEqual(result.structuredContent, { result: 'over stdio' });
      assert.equal(result.isError, false);
      assert.equal(session.asked.length, 0);
    });
  });
});

/** A TS SDK 1.x client with an API key (`Authorization: Bearer`). */
async function keyedV1(principal) {
  const client = new ClientV1({ name: `portcullis-interop-stdio-${principal}`, version: '1.0.0' }, { capabilities: {} });
  const transport = new TransportV1(new URL(url('memory-keyed')), {
    requestInit: { headers: { authorization: `Bearer ${KEYS[principal]}` } },
  });
  await client.connect(transport);
  const entity = { name: `${principal}-${Math.random().toString(36).slice(2, 8)}`, entityType: 'person', observations: [`${principal}'s`] };
  const created = await client.callTool({ name: 'create_entities', arguments: { entities: [entity] } });
  assert.deepEqual(created.structuredContent, { entities: [entity] });
  return {
    client,
    transport,
    end: async () => {
      await transport.terminateSession();
      await client.close();
    },
  };
}

describe('two API-key principals on server-memory (2025-11-25): a process each', () => {
  const UP = 'memory-keyed';
  const settle = async (p, s) => {
    const ok = await eventually(async () => (await processes(UP)) === p && (await starts(UP)) === s, 3_000);
    assert.ok(ok, `expected ${p} processes / ${s} starts, got ${await processes(UP)} / ${await starts(UP)}`);
  };

  it('no key: 401, no program started', TIMEOUT, async () => {
    const response = await fetch(url(UP), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'anon', version: '1' } },
      }),
    });
    assert.equal(response.status, 401);
    assert.ok(response.headers.get('www-authenticate'));
    await settle(0, 0);
  });

  it('alice and bob at once: two processes; a second session of bob\'s never gets alice\'s idle one; alice\'s next session does', TIMEOUT, async () => {
    const alice1 = await keyedV1('alice');
    await settle(1, 1);
    const bob1 = await keyedV1('bob');
    await settle(2, 2);
    // alice's session ends: her process stays, idle, hers.
    await alice1.end();
    await settle(2, 2);
    // bob's second session (his first still open) gets a new process, not alice's.
    const bob2 = await keyedV1('bob');
    await settle(3, 3);
    // alice's next session: her own idle process, nothing started.
    const alice2 = await keyedV1('alice');
    await settle(3, 3);
    // Each session still works on its own process.
    for (const s of [alice2, bob1, bob2]) {
      const graph = await s.client.callTool({ name: 'read_graph', arguments: {} });
      assert.ok(!graph.isError, JSON.stringify(graph));
    }
    await Promise.all([alice2, bob1, bob2].map((s) => s.end()));
    await settle(3, 3);
  });
});
