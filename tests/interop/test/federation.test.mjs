// Federated routes (issue 21) with the TypeScript SDK clients, both protocol generations:
// ONE gateway route over three real servers — the Python SDK server, the TypeScript SDK v2
// server and the demo server (`portcullis demo-upstream`, rmcp) — and routes over tiny
// upstreams of our own (below) for what the SDK servers do not do: list two tools a page,
// answer slowly. The same evidence with the Python SDK client: tests/python/test_federation.py.
//
// - TEAM (`team-tools`): python (prefix `py`), ts-v2 (prefix: its id), rooms.
// - PAGES: pagers pa, pb, pc (5, 3, 4 tools `t1…`, two a page; the same names from three upstreams).
// - FAULTS: rooms, dead (a port nothing listens on), slow (answers after SLOW_MS);
//   fanout_timeout = "1s", slow's response_timeout = "1s".
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { startGateway, startTsV2Server, startPythonServer, startDemoServer } from '../lib/harness.mjs';
import { connectV1, connectV2, acceptAll, flowOutcome, toolCalls } from '../lib/clients.mjs';

const MODERN = '2026-07-28';
const LEGACY = '2025-11-25';
const TEAM = '/fed/team';
const PAGES = '/fed/pages';
const FAULTS = '/fed/faults';
const TEAM_NAME = 'team-tools';
const MEMBERS = [
  ['python', 'py'],
  ['ts-v2', 'ts-v2'],
  ['rooms', 'rooms'],
];
const PREFIX = Object.fromEntries(MEMBERS);
const PAGERS = { pa: 5, pb: 3, pc: 4 };
const PAGE_SIZE = 2;
const SLOW_MS = 3000;
const PROVENANCE = 'dev.portcullis/upstream';
const FEDERATION = 'dev.portcullis/federation';
const WIZARD = { name: { title: 'Team offsite' }, size: { people: 2 }, confirm: { go: true } };
const BOOKING = { day: '2026-09-17', hour: 9, room_hint: 'a room' }; // names no room: the demo asks which
const TIMEOUT = { timeout: 30_000 };
const nameOf = (id) => `Interop ${id}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const servers = {};
let pagers, gateway, deadPort;

/** Tiny 2026-07-28 upstreams on one node:http server, one path each (/pa, /pb, /pc, /slow). */
async function startPagers() {
  const received = {};
  const issued = {};
  const answer = (id, count, message) => {
    const params = message.params ?? {};
    if (message.method === 'server/discover') {
      return {
        resultType: 'complete',
        supportedVersions: [MODERN],
        capabilities: { tools: {} },
        _meta: { 'io.modelcontextprotocol/serverInfo': { name: `pager-${id}`, version: '1' } },
        ttlMs: 0,
        cacheScope: 'public',
      };
    }
    if (message.method === 'tools/list') {
      const start = params.cursor === undefined ? 0 : Number(params.cursor.split('~').at(-1));
      const names = Array.from({ length: count }, (_, i) => `t${i + 1}`).slice(start, start + PAGE_SIZE);
      const page = {
        resultType: 'complete',
        tools: names.map((n) => ({
          name: n,
          description: `Tool ${n} of pager ${id}.`,
          inputSchema: { type: 'object' },
        })),
        ttlMs: 0,
        cacheScope: 'public',
      };
      if (start + PAGE_SIZE < count) {
        page.nextCursor = `${id}~from~${start + PAGE_SIZE}`;
        (issued[id] ??= new Set()).add(page.nextCursor);
      }
      return page;
    }
    if (message.method === 'tools/call') {
      return { resultType: 'complete', content: [{ type: 'text', text: `${id}:${params.name}` }] };
    }
    return { resultType: 'complete' };
  };
  const server = http.createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const id = req.url.slice(1);
    const message = JSON.parse(body || '{}');
    (received[id] ??= []).push(message);
    if (id === 'slow') await sleep(SLOW_MS);
    if (message.id === undefined) return res.writeHead(202).end();
    const result = answer(id, PAGERS[id] ?? 2, message);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: (id) => `http://127.0.0.1:${server.address().port}/${id}`,
    received,
    issued,
    stop: () => new Promise((resolve) => server.close(resolve).closeAllConnections()),
  };
}

async function unusedPort() {
  const probe = net.createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

function federationToml() {
  const upstream = (id, url, extra = {}) =>
    [
      '[[upstream]]',
      `id = "${id}"`,
      `name = "${nameOf(id)}"`,
      `url = "${url}"`,
      ...Object.entries(extra).map(([k, v]) => `${k} = "${v}"`),
      '',
    ].join('\n');
  const route = (path, members, extra = {}) =>
    [
      '[[route]]',
      `path = "${path}"`,
      `upstreams = [${members.map((m) => `"${m}"`).join(', ')}]`,
      ...Object.entries(extra).map(([k, v]) => `${k} = "${v}"`),
      '',
    ].join('\n');
  return [
    ...MEMBERS.map(([id, prefix]) => upstream(id, servers[id].url, prefix === id ? {} : { prefix })),
    ...Object.keys(PAGERS).map((id) => upstream(id, pagers.url(id))),
    upstream('dead', `http://127.0.0.1:${deadPort}/mcp`, { connect_timeout: '1s' }),
    upstream('slow', pagers.url('slow'), { response_timeout: '1s' }),
    route(TEAM, MEMBERS.map(([id]) => id), { name: TEAM_NAME }),
    route(PAGES, Object.keys(PAGERS)),
    route(FAULTS, ['rooms', 'dead', 'slow'], { fanout_timeout: '1s' }),
  ].join('\n');
}

before(async () => {
  [servers.python, servers['ts-v2'], servers.rooms, pagers, deadPort] = await Promise.all([
    startPythonServer(),
    startTsV2Server(),
    startDemoServer(),
    startPagers(),
    unusedPort(),
  ]);
  gateway = await startGateway({}, { extraToml: federationToml() });
});

after(async () => {
  await Promise.all([gateway?.stop(), pagers?.stop(), ...Object.values(servers).map((s) => s.stop())]);
});

/** Connect, run `body(session)`, close. */
async function withSession(connect, url, body, options = {}) {
  const session = await connect(url, options.answer ?? acceptAll(), options);
  try {
    return await body(session);
  } finally {
    await session.close();
  }
}

/**
 * tools/list as the v2 client does it without a cursor: it follows every nextCursor itself
 * and returns the pages' tools as one list; `cursors` are those it sent (from the wire).
 */
async function allTools(session) {
  const before = session.wire.length;
  const listing = await session.client.listTools();
  const lists = session.wire.slice(before).filter((w) => w.body?.method === 'tools/list');
  return { listing, tools: listing.tools, cursors: lists.map((w) => w.body.params?.cursor).filter(Boolean) };
}

/** The members a merged answer left out, {upstream id: reason}, checked against the contract's shape. */
function unavailable(meta) {
  const notes = meta?.[FEDERATION]?.unavailable ?? [];
  for (const note of notes) {
    assert.deepEqual(Object.keys(note).sort(), ['name', 'reason', 'upstream'], JSON.stringify(note));
    assert.equal(note.name, nameOf(note.upstream));
  }
  return Object.fromEntries(notes.map((n) => [n.upstream, n.reason]));
}

/** What a tool answered, without the `_meta` a server or the gateway adds. */
function answerOf(result) {
  const { _meta, ...rest } = result;
  return rest;
}

/**
 * The JSON-RPC error a request was refused with, as {code, data, status}. The v2 client
 * raises a JSON-RPC error as such on HTTP 200/4xx bodies it reads, but an answer with a
 * 5xx status (the gateway's upstream errors: 502, 504) as an SdkHttpError whose message
 * carries the body.
 */
async function refusal(promise) {
  const error = await promise.then(
    (result) => assert.fail(`expected a JSON-RPC error, got ${JSON.stringify(result)}`),
    (e) => e,
  );
  if (typeof error.code === 'number') return { code: error.code, data: error.data, status: undefined };
  const body = String(error.message).match(/\{"jsonrpc".*\}$/)?.[0];
  assert.ok(body && error.data?.status, `not a JSON-RPC error: ${error}`);
  const { code, data } = JSON.parse(body).error;
  return { code, data, status: error.data.status };
}

const directTools = {};
async function direct(id) {
  directTools[id] ??= await withSession(connectV2, servers[id].url, async (s) => (await s.client.listTools()).tools);
  return directTools[id];
}

describe('TS v2 client (2026-07-28) → one route over the Python, TypeScript and demo servers', () => {
  it('server/discover answers as one server: the route name, the members’ instructions under their names', async () => {
    await withSession(connectV2, gateway.at(TEAM), async (s) => {
      assert.equal(s.client.getNegotiatedProtocolVersion(), MODERN);
      assert.equal(s.wire[0].body.method, 'server/discover');
      const instructions = s.client.getInstructions() ?? '';
      assert.equal(instructions.split(`## ${nameOf('rooms')}`).length, 2, instructions);
      assert.match(instructions, /Demo room-booking server/);
      assert.doesNotMatch(instructions, /portcullis-demo-rooms/);
      // 2026-07-28 carries the server's name in the result's `_meta` (io.modelcontextprotocol/serverInfo).
      assert.equal(s.client.getServerVersion()?.name, TEAM_NAME);
    });
  });

  it('tools/list: every member’s tools under its prefix, in config order, with provenance', async () => {
    const expected = [];
    for (const [id, prefix] of MEMBERS) for (const t of await direct(id)) expected.push([id, `${prefix}_${t.name}`, t]);
    await withSession(connectV2, gateway.at(TEAM), async (s) => {
      const { listing, tools, cursors } = await allTools(s);
      assert.deepEqual(cursors, [], 'none of the three servers pages');
      assert.deepEqual(unavailable(listing._meta), {});
      assert.deepEqual(
        tools.map((t) => t.name),
        expected.map(([, name]) => name),
      );
      tools.forEach((tool, i) => {
        const [id, , original] = expected[i];
        assert.deepEqual(tool._meta?.[PROVENANCE], { id, name: nameOf(id) }, tool.name);
        assert.equal(tool.description, original.description, tool.name);
        assert.deepEqual(tool.inputSchema, original.inputSchema, tool.name);
      });
    });
  });

  for (const [id, tool, args] of [
    ['python', 'echo', { text: 'federated' }],
    ['ts-v2', 'echo', { text: 'federated' }],
    ['rooms', 'get_room', { room_id: 'nook' }],
  ]) {
    it(`a call reaches its member: ${PREFIX[id]}_${tool} answers as ${id}’s ${tool} does directly`, async () => {
      const expected = await withSession(connectV2, servers[id].url, (s) =>
        s.client.callTool({ name: tool, arguments: args }),
      );
      await withSession(connectV2, gateway.at(TEAM), async (s) => {
        const result = await s.client.callTool({ name: `${PREFIX[id]}_${tool}`, arguments: args });
        assert.deepEqual(answerOf(result), answerOf(expected));
        const [call] = toolCalls(s.wire, `${PREFIX[id]}_${tool}`);
        assert.equal(call.headers['mcp-name'], `${PREFIX[id]}_${tool}`);
      });
    });
  }

  for (const [id, tool, args, rounds] of [
    ['python', 'wizard', {}, 3],
    ['ts-v2', 'wizard', {}, 3],
    ['rooms', 'book_room', BOOKING, 1],
  ]) {
    it(`MRTR through the route: ${PREFIX[id]}_${tool}, ${rounds} round(s), the client holds the gateway’s state`, TIMEOUT, async () => {
      const exposed = `${PREFIX[id]}_${tool}`;
      await withSession(connectV2, gateway.at(TEAM), async (s) => {
        const result = await s.client.callTool({ name: exposed, arguments: args });
        assert.ok(!result.isError, JSON.stringify(result));
        assert.equal(s.asked.length, rounds);
        const calls = toolCalls(s.wire, exposed);
        assert.equal(calls.length, rounds + 1);
        for (const retry of calls.slice(1)) {
          assert.equal(retry.headers['mcp-name'], exposed);
          assert.ok(retry.body.params.requestState.startsWith('pcs1.'), retry.body.params.requestState);
        }
        if (id === 'rooms') assert.equal(result.structuredContent?.room_id, 'atrium');
        else assert.deepEqual(flowOutcome(result), { tool: 'wizard', answers: WIZARD });
      });
    });
  }

  it('pagination across three upstreams, two a page, behind a sealed cursor', async () => {
    for (const id of Object.keys(PAGERS)) pagers.received[id] = [];
    await withSession(connectV2, gateway.at(PAGES), async (s) => {
      const { tools, cursors } = await allTools(s);
      const names = tools.map((t) => t.name);
      const expected = Object.entries(PAGERS).flatMap(([id, n]) =>
        Array.from({ length: n }, (_, i) => `${id}_t${i + 1}`),
      );
      assert.deepEqual([...names].sort(), [...expected].sort(), 'every tool of every pager exactly once');
      assert.ok(cursors.length >= 2, `${cursors.length + 1} pages: the members' later pages were not followed`);
      for (const cursor of cursors) assert.ok(cursor.startsWith('pfc1.'), cursor);
      for (const [id, n] of Object.entries(PAGERS)) {
        assert.deepEqual(
          names.filter((x) => x.startsWith(`${id}_`)),
          Array.from({ length: n }, (_, i) => `${id}_t${i + 1}`),
        );
        const cursors = pagers.received[id].filter((m) => m.method === 'tools/list').map((m) => m.params?.cursor);
        assert.deepEqual(new Set(cursors.filter(Boolean)), pagers.issued[id] ?? new Set(), `${id} got other cursors`);
      }
      // One page at a time (an explicit cursor): the gateway's page, then forgeries of its cursor.
      const second = await s.client.listTools({ cursor: cursors[0] });
      assert.ok(second.tools.length > 0 && second.nextCursor?.startsWith('pfc1.'), JSON.stringify(second));
      const forged = cursors[0].slice(0, -2) + (cursors[0].endsWith('AA') ? 'BB' : 'AA');
      for (const cursor of [forged, 'pa~from~2', 'pfc1.']) {
        const error = await refusal(s.client.listTools({ cursor }));
        assert.equal(error.code, -32602, JSON.stringify(error));
        assert.equal(error.data?.reason, 'cursor_invalid', JSON.stringify(error.data));
      }
    });
  });

  it('the same tool name from three upstreams: each prefix reaches its own, the prefix removed', async () => {
    for (const id of Object.keys(PAGERS)) pagers.received[id] = [];
    await withSession(connectV2, gateway.at(PAGES), async (s) => {
      for (const id of Object.keys(PAGERS)) {
        const result = await s.client.callTool({ name: `${id}_t2`, arguments: {} });
        assert.deepEqual(result.content, [{ type: 'text', text: `${id}:t2` }]);
        const calls = pagers.received[id].filter((m) => m.method === 'tools/call');
        assert.deepEqual(calls.map((m) => m.params.name), ['t2']);
      }
    });
  });

  it('a dead and a slow member: left out of the list and named, calls to them refused naming them', TIMEOUT, async () => {
    await withSession(connectV2, gateway.at(FAULTS), async (s) => {
      const started = Date.now();
      const listing = await s.client.listTools();
      const took = Date.now() - started;
      assert.ok(took < SLOW_MS - 500, `the list waited for the slow member (${took} ms)`);
      assert.deepEqual(
        listing.tools.map((t) => t.name),
        (await direct('rooms')).map((t) => `rooms_${t.name}`),
      );
      assert.deepEqual(unavailable(listing._meta), { dead: 'upstream_unreachable', slow: 'upstream_timeout' });
      for (const [id, reason] of [
        ['dead', 'upstream_unreachable'],
        ['slow', 'upstream_timeout'],
      ]) {
        const error = await refusal(s.client.callTool({ name: `${id}_t1`, arguments: {} }));
        assert.equal(error.code, -32001, JSON.stringify(error));
        assert.equal(error.status, id === 'dead' ? 502 : 504);
        assert.equal(error.data?.reason, reason);
        assert.equal(error.data?.upstream, nameOf(id));
      }
      const served = await s.client.callTool({ name: 'rooms_get_room', arguments: { room_id: 'atrium' } });
      assert.ok(!served.isError);
    });
  });
});

for (const [label, connect, options] of [
  ['TS v2 client, legacy negotiation (2025-11-25)', connectV2, { negotiation: 'legacy' }],
  ['TS SDK 1.x client (2025-11-25)', connectV1, {}],
]) {
  describe(`${label} → one session over the route’s members`, () => {
    it('initialize opens one gateway session; every member listed and called (a 2026-07-28-only one bridged)', TIMEOUT, async () => {
      await withSession(
        connect,
        gateway.at(TEAM),
        async (s) => {
          assert.equal(s.wire[0].body.method, 'initialize');
          assert.equal(s.client.getServerVersion()?.name, TEAM_NAME);
          assert.ok(s.transport.sessionId?.startsWith('pss1.'), s.transport.sessionId);
          const listing = await s.client.listTools();
          const names = listing.tools.map((t) => t.name);
          for (const id of ['python', 'ts-v2']) {
            assert.deepEqual(
              names.filter((n) => n.startsWith(`${PREFIX[id]}_`)),
              (await direct(id)).map((t) => `${PREFIX[id]}_${t.name}`),
            );
          }
          for (const tool of listing.tools) {
            const [id] = MEMBERS.find(([, p]) => tool.name.startsWith(`${p}_`));
            assert.deepEqual(tool._meta?.[PROVENANCE], { id, name: nameOf(id) });
          }
          // The demo server speaks only 2026-07-28: its part of the session is bridged, so a
          // 2025-11-25 client sees its tools too.
          assert.deepEqual(
            names.filter((n) => n.startsWith('rooms_')),
            (await direct('rooms')).map((t) => `rooms_${t.name}`),
          );
          assert.ok(!('rooms' in unavailable(listing._meta)), JSON.stringify(listing._meta));
          for (const id of ['python', 'ts-v2']) {
            const result = await s.client.callTool({ name: `${PREFIX[id]}_echo`, arguments: { text: 'old' } });
            assert.deepEqual(result.content, [{ type: 'text', text: 'old' }]);
          }
        },
        options,
      );
    });

    it('pushed questions (three) go back to their member; the flow completes', TIMEOUT, async () => {
      await withSession(
        connect,
        gateway.at(TEAM),
        async (s) => {
          const result = await s.client.callTool({ name: 'py_wizard', arguments: {} });
          assert.deepEqual(flowOutcome(result), { tool: 'wizard', answers: WIZARD });
          assert.deepEqual(
            s.asked.map((p) => p.message),
            ['What is the event called?', 'How many people come?', 'Book it?'],
          );
          const answers = s.wire.filter((w) => w.body?.result?.action);
          assert.equal(answers.length, 3);
          for (const a of answers) assert.ok(String(a.body.id).startsWith('psr1.'), String(a.body.id));
        },
        options,
      );
    });

    it('DELETE ends the session; the old id is refused', TIMEOUT, async () => {
      const session = await connect(gateway.at(TEAM), acceptAll(), options);
      const id = session.transport.sessionId;
      await session.client.listTools();
      await session.transport.terminateSession();
      await session.close();
      const del = session.wire.find((w) => w.method === 'DELETE');
      assert.ok(del && del.status >= 200 && del.status < 300, `DELETE answered ${del?.status}`);
      const after = await fetch(gateway.at(TEAM), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-session-id': id,
          'mcp-protocol-version': LEGACY,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
      });
      assert.equal(after.status, 404);
      assert.equal((await after.json()).error?.data?.reason, 'session_expired');
    });
  });
}
