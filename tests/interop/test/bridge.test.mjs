// Issue 22, direction A: 2025-11-25 clients in front of upstreams that speak only
// 2026-07-28, bridged by the gateway (crates/pipeline/src/pipeline/bridge). The clients: the MCP Inspector
// CLI 2.12.0 and the TypeScript SDK 1.x client. The upstreams: the demo server
// (`portcullis demo-upstream`, rmcp, 2026-07-28 only) and a TypeScript SDK v2 server
// serving 2026-07-28 only (servers/ts_v2_modern_server.mjs, `legacy: 'reject'`), which
// asks several rounds and several questions a round, and records what it received.
//
// Each flow is shown failing straight at the 2026-only server (the client's `initialize`
// is refused) and working through the gateway, which answers `initialize` itself, carries
// each request upstream as a 2026-07-28 request and pushes each `input_required` question
// to the client as `elicitation/create` on the call's stream.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDemoServer, startPythonServer, keygen, GATEWAY_MAX_ROUNDS } from '../lib/harness.mjs';
import { acceptAll, flowOutcome, fieldsOf } from '../lib/clients.mjs';
import {
  LEGACY,
  MODERN,
  FORM_AND_URL,
  startGatewayToml,
  runInspector,
  connectLegacy,
  isAnswer,
  eventually,
  sseMessages,
  rawSession,
  metric,
} from '../lib/bridge.mjs';
import { serveModernOnly } from '../servers/ts_v2_modern_server.mjs';
import { decodeState } from '../servers/flows.mjs';

const TIMEOUT = { timeout: 30_000 };
const INSPECTOR_TIMEOUT = { timeout: 90_000 };
const PUSH_TIMEOUT_S = 2;
const PROVENANCE = 'dev.portcullis/provenance';
const IN_FLIGHT = 'portcullis_in_flight_requests';
const DAY = '2026-09-17';
const name = (id) => `Interop ${id}`;

let demo, modern, python, gatewayA, gatewayB;

/** Routes /mcp/<id> → upstream <id>; `generations` per upstream id, when configured. */
function routesToml(upstreams, generations = {}) {
  const lines = [];
  for (const [id, url] of Object.entries(upstreams)) {
    lines.push('[[upstream]]', `id = "${id}"`, `name = "${name(id)}"`, `url = "${url}"`);
    if (generations[id]) lines.push(`generations = [${generations[id].map((g) => `"${g}"`).join(', ')}]`);
    lines.push('', '[[route]]', `path = "/mcp/${id}"`, `upstream = "${id}"`, '');
  }
  return lines.join('\n');
}

before(async () => {
  [demo, modern, python] = await Promise.all([startDemoServer(), serveModernOnly(), startPythonServer()]);
  const keys = await keygen('bridge');
  const env = { PORTCULLIS_STATE_KEYS: keys };
  const state = (extra = []) =>
    ['[state]', `max_rounds = ${GATEWAY_MAX_ROUNDS}`, 'keys_env = "PORTCULLIS_STATE_KEYS"', ...extra, ''].join('\n');
  const upstreams = { rooms: demo.url, modern: modern.url, python: python.url, 'python-native': python.url };
  const generations = { 'python-native': [LEGACY, MODERN] };
  [gatewayA, gatewayB] = await Promise.all([
    startGatewayToml(state() + routesToml(upstreams, generations), { env }),
    // B: the same keys (a session opened at A goes on at B), a short push_timeout.
    startGatewayToml(state([`push_timeout = "${PUSH_TIMEOUT_S}s"`]) + routesToml(upstreams, generations), { env }),
  ]);
});

after(async () => {
  await Promise.all([gatewayA, gatewayB, demo, modern, python].map((p) => p?.stop()));
});

/** A 2026-07-28 request straight to a server (what the upstream itself answers). */
async function modernRequest(url, method, params = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': method,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method,
      params: {
        ...params,
        _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} },
      },
    }),
  });
  const message = await response.json();
  assert.ok(message.result, `${method} straight at the server: ${JSON.stringify(message)}`);
  return message.result;
}

/** The capabilities a bridged initialize should offer: the discovered ones less listChanged/subscribe. */
function withoutStreams(capabilities) {
  return Object.fromEntries(
    Object.entries(capabilities).map(([k, v]) => {
      const { listChanged, subscribe, ...rest } = v ?? {};
      return [k, rest];
    }),
  );
}

/** Connect, run `body(session)`, close. */
async function withLegacy(url, answer, body, options) {
  const session = await connectLegacy(url, answer, options);
  try {
    return await body(session);
  } finally {
    await session.close();
  }
}

/** The McpError a promise rejects with (the SDK raises a JSON-RPC error as one). */
async function mcpError(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('the call succeeded');
}

/** The text of a tool result's first text block. */
const textOf = (result) => result.content?.find((c) => c.type === 'text')?.text;

/** The requests the modern server received since `mark` (an index into its `seen`) for tool `tool`. */
const callsSince = (mark, tool) => modern.seen.slice(mark).filter((s) => s.method === 'tools/call' && s.name === tool);

const BOOK = (hint) => ({ name: 'book_room', arguments: { day: DAY, hour: 9, room_hint: hint } });

describe('MCP Inspector CLI 2.12.0 (--cli, 2025-11-25) → demo server (rmcp, 2026-07-28 only)', () => {
  const inspect = (url, ...args) => runInspector([url, '--transport', 'http', '--format', 'json', ...args]);

  it('straight at the demo server: "Unsupported protocol version", nothing listed or called', INSPECTOR_TIMEOUT, async () => {
    const list = await inspect(demo.url, '--method', 'tools/list');
    assert.notEqual(list.code, 0);
    assert.equal(list.result, undefined);
    assert.match(list.error?.message ?? list.stderr, /Unsupported protocol version/);
    const call = await inspect(demo.url, '--method', 'tools/call', '--tool-name', 'get_room', '--tool-arg', 'room_id=studio-b');
    assert.notEqual(call.code, 0);
    assert.match(call.error?.message ?? call.stderr, /Unsupported protocol version/);
  });

  it('through the gateway: tools/list gives the demo server\'s own tools', INSPECTOR_TIMEOUT, async () => {
    const listed = await inspect(gatewayA.at('/mcp/rooms'), '--method', 'tools/list');
    assert.equal(listed.code, 0, listed.stderr);
    const direct = await modernRequest(demo.url, 'tools/list');
    assert.deepEqual(
      listed.result.tools.map((t) => t.name),
      ['book_room', 'cancel_booking', 'get_room', 'room_report'],
    );
    // The same tools a 2026-07-28 client gets from the demo server itself.
    assert.deepEqual(listed.result.tools, direct.tools);
    assert.equal(listed.result.resultType, undefined);
  });

  it('through the gateway: tools/call get_room', INSPECTOR_TIMEOUT, async () => {
    const called = await inspect(
      gatewayA.at('/mcp/rooms'),
      '--method', 'tools/call', '--tool-name', 'get_room', '--tool-arg', 'room_id=studio-b',
    );
    assert.equal(called.code, 0, called.stderr);
    assert.equal(textOf(called.result), 'Studio B (studio-b) has 12 seats.');
    assert.deepEqual(called.result.structuredContent, { room_id: 'studio-b', seats: 12 });
  });

  it('through the gateway: book_room with a hint naming one room ("studio-b") books at once', INSPECTOR_TIMEOUT, async () => {
    const called = await inspect(
      gatewayA.at('/mcp/rooms'),
      '--method', 'tools/call', '--tool-name', 'book_room',
      '--tool-arg', `day=${DAY}`, 'hour=9', 'room_hint=studio-b',
    );
    assert.equal(called.code, 0, called.stderr);
    assert.equal(textOf(called.result), `Booked studio-b (Studio B) on ${DAY} at 09:00.`);
    assert.deepEqual(called.result.structuredContent, { booked: true, room_id: 'studio-b', day: DAY, hour: 9 });
  });

  it('book_room "the big room": the CLI declares no elicitation, so the question cannot be asked; the upstream sees the CLI\'s capabilities', INSPECTOR_TIMEOUT, async () => {
    // The Inspector's CLI mode builds its client with `elicit: false`: no form can be answered.
    const called = await inspect(
      gatewayA.at('/mcp/rooms'),
      '--method', 'tools/call', '--tool-name', 'book_room',
      '--tool-arg', `day=${DAY}`, 'hour=9', 'room_hint=the big room',
    );
    assert.notEqual(called.code, 0);
    assert.equal(called.result, undefined);
    // The demo server's -32021 for a client without form elicitation, passed on.
    assert.match(called.error?.message ?? called.stderr, /Missing required client capability/);
    // What the upstream got: the session's (empty) capabilities in `_meta`, as 2026-07-28.
    const mark = modern.seen.length;
    const asked = await inspect(gatewayA.at('/mcp/modern'), '--method', 'tools/call', '--tool-name', 'book', '--tool-arg', 'hint=x');
    assert.notEqual(asked.code, 0);
    const [call] = callsSince(mark, 'book');
    assert.ok(call, 'the call never reached the upstream');
    assert.equal(call.version, MODERN);
    assert.equal(call.methodHeader, 'tools/call');
    assert.equal(call.nameHeader, 'book');
    assert.equal(call.capabilities?.elicitation, undefined);
    assert.match(asked.error?.message ?? asked.stderr, /client capabilities do not declare/);
  });
});

describe('TS SDK 1.x client (2025-11-25) → demo server (rmcp, 2026-07-28 only)', () => {
  const url = () => gatewayA.at('/mcp/rooms');

  it('straight at the demo server: initialize is refused (-32022 Unsupported protocol version)', TIMEOUT, async () => {
    const e = await mcpError(connectLegacy(demo.url, acceptAll()));
    assert.equal(e.code, -32022);
    assert.match(e.message, /Unsupported protocol version/);
  });

  it('initialize is answered by the gateway: the configured name, the discovered capabilities and instructions, a sealed session', TIMEOUT, async () => {
    const discovered = await modernRequest(demo.url, 'server/discover');
    await withLegacy(url(), acceptAll(), async (s) => {
      assert.equal(s.transport.protocolVersion, LEGACY);
      assert.match(s.transport.sessionId, /^pss1\./);
      assert.deepEqual(s.client.getServerVersion(), {
        name: name('rooms'),
        version: discovered._meta['io.modelcontextprotocol/serverInfo'].version,
      });
      assert.deepEqual(s.client.getServerCapabilities(), withoutStreams(discovered.capabilities));
      assert.equal(s.client.getInstructions(), discovered.instructions);
      // The client's GET for a server stream: none in a bridged session.
      assert.ok(await eventually(() => s.wire.some((w) => w.method === 'GET' && w.status)), 'no GET');
      const get = s.wire.find((w) => w.method === 'GET');
      assert.equal(get.status, 405);
      assert.equal(JSON.parse(get.text).error.data.reason, 'method_not_allowed');
    });
  });

  it('tools/list and a plain call (get_room)', TIMEOUT, async () => {
    const direct = await modernRequest(demo.url, 'tools/list');
    await withLegacy(url(), acceptAll(), async (s) => {
      const listing = await s.client.listTools();
      assert.deepEqual(listing.tools, direct.tools);
      const result = await s.client.callTool({ name: 'get_room', arguments: { room_id: 'nook' } });
      assert.equal(textOf(result), 'The Nook (nook) has 4 seats.');
      assert.deepEqual(result.structuredContent, { room_id: 'nook', seats: 4 });
      const call = s.wire.find((w) => w.body?.method === 'tools/call');
      assert.equal(call.contentType, 'application/json');
      assert.equal(call.headers['mcp-method'], undefined);
    });
  });

  it('book_room "the big room": one question pushed on the call\'s stream, accepted → booked', TIMEOUT, async () => {
    await withLegacy(url(), acceptAll({ pick: { room_id: 'studio-b' } }), async (s) => {
      const result = await s.client.callTool(BOOK('the big room'));
      assert.equal(textOf(result), `Booked studio-b (Studio B) on ${DAY} at 09:00.`);
      assert.deepEqual(result.structuredContent, { booked: true, room_id: 'studio-b', day: DAY, hour: 9 });
      assert.equal(s.asked.length, 1);
      assert.equal(s.asked[0].message, "'the big room' matches more than one room. Which did you mean?");
      assert.deepEqual(s.asked[0].requestedSchema.properties.room_id.enum, ['atrium', 'studio-b', 'nook']);
      const call = s.wire.find((w) => w.body?.method === 'tools/call');
      assert.equal(call.contentType, 'text/event-stream');
      const answers = s.wire.filter(isAnswer);
      assert.equal(answers.length, 1);
      assert.match(String(answers[0].body.id), /^psr1\./);
      assert.ok(await eventually(() => answers[0].status !== undefined), 'the answer was never answered');
      assert.equal(answers[0].status, 202);
      assert.equal(answers[0].headers['mcp-session-id'], s.transport.sessionId);
    });
  });

  for (const [action, text] of [
    ['decline', 'Booking cancelled: you declined to pick a room.'],
    ['cancel', 'Booking cancelled.'],
  ]) {
    it(`book_room "the big room", ${action}: the demo server gets the ${action} and books nothing`, TIMEOUT, async () => {
      await withLegacy(url(), () => ({ action }), async (s) => {
        const result = await s.client.callTool(BOOK('the big room'));
        assert.equal(textOf(result), text);
        assert.deepEqual(result.structuredContent, { booked: false });
        assert.equal(s.asked.length, 1);
      });
    });
  }

  it('a client that answers the question with an error: the upstream gets a cancel', TIMEOUT, async () => {
    const fail = () => {
      throw new Error('no one here to answer');
    };
    await withLegacy(url(), fail, async (s) => {
      const result = await s.client.callTool(BOOK('the big room'));
      assert.equal(textOf(result), 'Booking cancelled.');
      const answer = s.wire.find(isAnswer);
      assert.ok(answer.body.error, 'the SDK answered with a result');
      // (The result can reach the client before the answer's own 202 does.)
      assert.ok(await eventually(() => answer.status !== undefined), 'the answer was never answered');
      assert.equal(answer.status, 202);
    });
  });

  it('progress notifications of a streamed call reach the client', TIMEOUT, async () => {
    await withLegacy(url(), acceptAll(), async (s) => {
      const progress = [];
      const result = await s.client.callTool(
        { name: 'room_report', arguments: { steps: 3, delay_ms: 50 } },
        undefined,
        { onprogress: (p) => progress.push(p) },
      );
      assert.equal(textOf(result), 'Room report: checked 3 rooms, all available.');
      assert.deepEqual(
        progress.map((p) => [p.progress, p.total, p.message]),
        [1, 2, 3].map((n) => [n, 3, `Checked room ${n} of 3`]),
      );
    });
  });
});

describe('TS SDK 1.x client (2025-11-25) → TS SDK v2 server serving 2026-07-28 only', () => {
  const url = () => gatewayA.at('/mcp/modern');

  it('straight at the server: initialize is refused (400, -32022)', TIMEOUT, async () => {
    const e = await mcpError(connectLegacy(modern.url, acceptAll()));
    assert.equal(e.code, 400);
    assert.match(e.message, /-32022/);
    assert.match(e.message, /Unsupported protocol version: 2025-11-25/);
  });

  it('the upstream is asked server/discover, never initialize, and never sees a session id', TIMEOUT, async () => {
    const mark = modern.seen.length;
    await withLegacy(url(), acceptAll(), async (s) => {
      assert.deepEqual(s.client.getServerVersion(), { name: name('modern'), version: '2.4.0-modern' });
      assert.equal(s.client.getInstructions(), 'Flows of flows.json; 2026-07-28 only.');
      await s.client.listTools();
    });
    const got = modern.seen.slice(mark);
    assert.deepEqual(
      got.map((g) => g.method),
      ['server/discover', 'tools/list'],
    );
    for (const g of got) {
      assert.equal(g.sessionHeader, undefined);
      assert.equal(g.protocolHeader, MODERN);
      assert.equal(g.version, MODERN);
      assert.equal(g.methodHeader, g.method);
    }
    assert.deepEqual(got[1].capabilities, FORM_AND_URL);
  });

  it('three rounds (wizard): each question pushed in turn; the upstream gets each round\'s answers and its own requestState', TIMEOUT, async () => {
    const mark = modern.seen.length;
    await withLegacy(url(), acceptAll(), async (s) => {
      const result = await s.client.callTool({ name: 'wizard', arguments: {} });
      assert.deepEqual(flowOutcome(result), {
        tool: 'wizard',
        answers: { name: { title: 'Team offsite' }, size: { people: 2 }, confirm: { go: true } },
      });
      assert.deepEqual(s.asked.map(fieldsOf), [['title'], ['people'], ['go']]);
      // One tools/call from the client; three answers POSTed to the gateway's push ids.
      assert.equal(s.wire.filter((w) => w.body?.method === 'tools/call').length, 1);
      assert.equal(s.wire.filter(isAnswer).length, 3);
    });
    const calls = callsSince(mark, 'wizard');
    assert.equal(calls.length, 4);
    assert.deepEqual(
      calls.map((c) => c.answered),
      [{}, { name: 'accept' }, { size: 'accept' }, { confirm: 'accept' }],
    );
    // Its own state back (not the gateway's sealed pcs1. state), one round further each time.
    assert.equal(calls[0].requestState, undefined);
    assert.deepEqual(
      calls.slice(1).map((c) => decodeState(c.requestState).round),
      [1, 2, 3],
    );
    for (const c of calls) {
      assert.equal(c.nameHeader, 'wizard');
      assert.deepEqual(c.capabilities, FORM_AND_URL);
    }
  });

  it('two questions in one round (profile): both pushed before either is answered; one retry carries both', TIMEOUT, async () => {
    const mark = modern.seen.length;
    let bothAsked = false;
    const answer = acceptAll({ pick: { side: 'aisle' } });
    const patient = async (params, extra) => {
      // The person answers only once both questions are on screen.
      bothAsked = await eventually(() => s2.asked.length === 2, 5000);
      return answer(params, extra);
    };
    let s2;
    await withLegacy(url(), patient, async (s) => {
      s2 = s;
      const result = await s.client.callTool({ name: 'profile', arguments: {} });
      assert.deepEqual(flowOutcome(result), {
        tool: 'profile',
        answers: { contact: { email: 'ada@example.com' }, seat: { side: 'aisle' } },
      });
      assert.ok(bothAsked, 'the second question came only after the first was answered');
      assert.deepEqual(s.asked.map(fieldsOf).sort(), [['email'], ['side']]);
    });
    const calls = callsSince(mark, 'profile');
    assert.deepEqual(
      calls.map((c) => c.answered),
      [{}, { contact: 'accept', seat: 'accept' }],
    );
  });

  it('two calls at once in one session, each asking: every answer reaches its own call', TIMEOUT, async () => {
    await withLegacy(url(), acceptAll({ pick: { room_id: 'nook', side: 'window' } }), async (s) => {
      const [wizard, book, profile] = await Promise.all([
        s.client.callTool({ name: 'wizard', arguments: {} }),
        s.client.callTool({ name: 'book', arguments: { hint: 'x' } }),
        s.client.callTool({ name: 'profile', arguments: {} }),
      ]);
      assert.deepEqual(Object.keys(flowOutcome(wizard).answers), ['name', 'size', 'confirm']);
      assert.deepEqual(flowOutcome(book), { tool: 'book', answers: { room: { room_id: 'nook' } } });
      assert.deepEqual(flowOutcome(profile).answers.seat, { side: 'window' });
      assert.equal(s.asked.length, 6);
      assert.equal(new Set(s.wire.filter(isAnswer).map((w) => w.body.id)).size, 6);
    });
  });

  for (const [action, done] of [
    ['decline', 'declined'],
    ['cancel', 'cancelled'],
  ]) {
    it(`a question ${done}: the upstream gets the ${action} and ends the flow`, TIMEOUT, async () => {
      const mark = modern.seen.length;
      await withLegacy(url(), () => ({ action }), async (s) => {
        const result = await s.client.callTool({ name: 'book', arguments: { hint: 'x' } });
        assert.deepEqual(flowOutcome(result), { tool: 'book', stopped: { key: 'room', action } });
      });
      assert.deepEqual(callsSince(mark, 'book').map((c) => c.answered), [{}, { room: action }]);
    });
  }

  it('a form asking for a password is refused: never shown, -32010 secret_field_requested, no retry upstream', TIMEOUT, async () => {
    const mark = modern.seen.length;
    await withLegacy(url(), acceptAll(), async (s) => {
      const e = await mcpError(s.client.callTool({ name: 'vault', arguments: {} }));
      assert.equal(e.code, -32010);
      assert.deepEqual(
        { reason: e.data.reason, upstream: e.data.upstream, key: e.data.key, field: e.data.field },
        { reason: 'secret_field_requested', upstream: name('modern'), key: 'unlock', field: 'password' },
      );
      assert.equal(s.asked.length, 0, 'the person was shown a form asking for a password');
    });
    assert.equal(callsSince(mark, 'vault').length, 1);
  });

  it(`the round limit: ${GATEWAY_MAX_ROUNDS} rounds complete; the ${GATEWAY_MAX_ROUNDS + 1}th is refused (-32011 round_limit_exceeded)`, TIMEOUT, async () => {
    await withLegacy(url(), acceptAll(), async (s) => {
      const done = await s.client.callTool({ name: 'endless', arguments: { rounds: GATEWAY_MAX_ROUNDS } });
      assert.equal(Object.keys(flowOutcome(done).answers).length, GATEWAY_MAX_ROUNDS);
    });
    await withLegacy(url(), acceptAll(), async (s) => {
      const e = await mcpError(s.client.callTool({ name: 'endless', arguments: { rounds: GATEWAY_MAX_ROUNDS + 1 } }));
      assert.equal(e.code, -32011);
      assert.equal(e.data.reason, 'round_limit_exceeded');
      assert.equal(e.data.limit, GATEWAY_MAX_ROUNDS);
      assert.equal(s.asked.length, GATEWAY_MAX_ROUNDS);
    });
  });

  it('markup and terminal escapes are stripped from a pushed question', TIMEOUT, async () => {
    await withLegacy(url(), acceptAll(), async (s) => {
      const result = await s.client.callTool({ name: 'styled', arguments: {} });
      assert.deepEqual(flowOutcome(result), { tool: 'styled', answers: { ok: { fine: true } } });
      assert.doesNotMatch(s.asked[0].message, /[<>\u001b]/);
      assert.match(s.asked[0].message, /Pick one colour/);
    });
  });

  it('URL mode: pushed with its URL unchanged and an elicitationId', TIMEOUT, async () => {
    await withLegacy(url(), acceptAll(), async (s) => {
      const result = await s.client.callTool({ name: 'signin', arguments: {} });
      assert.deepEqual(flowOutcome(result), { tool: 'signin', answers: { login: null } });
      assert.equal(s.asked[0].mode, 'url');
      assert.equal(s.asked[0].url, 'https://auth.example.com/authorize?client=rooms');
      assert.equal(typeof s.asked[0].elicitationId, 'string');
    });
  });

  it('provenance: a pushed question names its upstream as on a native 2025-11-25 session', TIMEOUT, async () => {
    // Native: the Python SDK server pushes the question itself, through the gateway.
    const native = await withLegacy(gatewayA.at('/mcp/python-native'), acceptAll(), async (s) => {
      await s.client.callTool({ name: 'book', arguments: { hint: 'x' } });
      return s.asked[0]._meta?.[PROVENANCE];
    });
    assert.equal(native?.upstream?.name, name('python-native'));
    // Bridged: the same question asked through input_required by a 2026-07-28-only server.
    const bridged = await withLegacy(url(), acceptAll(), async (s) => {
      await s.client.callTool({ name: 'book', arguments: { hint: 'x' } });
      return s.asked[0]._meta?.[PROVENANCE];
    });
    assert.deepEqual(
      { name: bridged?.upstream?.name, policy: bridged?.policy, mode: bridged?.mode },
      { name: name('modern'), policy: native.policy, mode: native.mode },
      'the bridged push carries no dev.portcullis/provenance',
    );
  });

  it('the client cancels the call (notifications/cancelled): the question is withdrawn, nothing goes upstream', TIMEOUT, async () => {
    const mark = modern.seen.length;
    const untilWithdrawn = (_params, extra) =>
      new Promise((resolve) => extra.signal.addEventListener('abort', () => resolve({ action: 'accept', content: { room_id: 'nook' } })));
    await withLegacy(url(), untilWithdrawn, async (s) => {
      const abort = new AbortController();
      const call = s.client.callTool({ name: 'book', arguments: { hint: 'x' } }, undefined, { signal: abort.signal });
      assert.ok(await eventually(() => s.asked.length === 1), 'no question pushed');
      abort.abort('the person closed the dialog');
      await assert.rejects(call);
      // The gateway withdrew the pushed question (notifications/cancelled for its id).
      assert.ok(await eventually(() => s.withdrawn.length === 1), 'the question was not withdrawn');
      const cancelled = s.wire.find((w) => w.body?.method === 'notifications/cancelled');
      assert.equal(cancelled.status, 202);
      const callId = s.wire.find((w) => w.body?.method === 'tools/call').body.id;
      assert.equal(cancelled.body.params.requestId, callId);
      assert.equal(s.wire.filter(isAnswer).length, 0);
    });
    assert.deepEqual(callsSince(mark, 'book').map((c) => c.answered), [{}]);
  });

  it('the client closes the call\'s stream: the call ends; a late answer gets 409 call_not_waiting, nothing goes upstream', TIMEOUT, async () => {
    const mark = modern.seen.length;
    const session = await rawSession(url());
    const closing = new AbortController();
    const response = await session.post(
      { jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'book', arguments: { hint: 'x' } } },
      { signal: closing.signal },
    );
    assert.equal(response.headers.get('content-type'), 'text/event-stream');
    const push = await sseMessages(response).next();
    assert.equal(push.method, 'elicitation/create');
    assert.equal(await metric(gatewayA.admin, IN_FLIGHT), 1);
    closing.abort();
    // The gateway sees the stream closed (the call is no longer in flight); then the
    // answer finds no call waiting.
    assert.ok(await eventually(async () => (await metric(gatewayA.admin, IN_FLIGHT)) === 0), 'the call is still in flight');
    const late = await session.post({ jsonrpc: '2.0', id: push.id, result: { action: 'accept', content: { room_id: 'nook' } } });
    const body = await late.json();
    assert.equal(late.status, 409, JSON.stringify(body));
    assert.equal(body.error.data.reason, 'call_not_waiting');
    assert.deepEqual(callsSince(mark, 'book').map((c) => c.answered), [{}]);
  });

  it('ping, GET, DELETE and lists in a bridged session', TIMEOUT, async () => {
    const mark = modern.seen.length;
    const session = await rawSession(url());
    const ping = await session.post({ jsonrpc: '2.0', id: 'p', method: 'ping' });
    assert.deepEqual(await ping.json(), { jsonrpc: '2.0', id: 'p', result: {} });
    const get = await session.get();
    assert.equal(get.status, 405);
    assert.equal((await get.json()).error.data.reason, 'method_not_allowed');
    const list = await session.post({ jsonrpc: '2.0', id: 3, method: 'tools/list' });
    const listed = await list.json();
    assert.ok(listed.result.tools.some((t) => t.name === 'wizard'));
    for (const member of ['resultType', 'ttlMs', 'cacheScope']) assert.equal(listed.result[member], undefined, member);
    const del = await session.delete();
    assert.equal(del.status, 200);
    const after = await session.post({ jsonrpc: '2.0', id: 4, method: 'tools/list' });
    assert.equal(after.status, 404);
    assert.equal((await after.json()).error.data.reason, 'session_expired');
    // The upstream saw the discovery and the one list; the gateway answered ping, GET and DELETE.
    assert.deepEqual(
      modern.seen.slice(mark).map((g) => g.method),
      ['server/discover', 'tools/list'],
    );
  });
});

describe(`two gateway instances sharing [state] keys (B: push_timeout = "${PUSH_TIMEOUT_S}s")`, () => {
  const isInitialize = (w) => w.body?.method === 'initialize';

  it('no answer within push_timeout: the question is withdrawn, the call ends with operation_expired', TIMEOUT, async () => {
    const mark = modern.seen.length;
    const never = (_params, extra) => new Promise((resolve) => extra.signal.addEventListener('abort', () => resolve({ action: 'cancel' })));
    await withLegacy(gatewayB.at('/mcp/modern'), never, async (s) => {
      const started = Date.now();
      const e = await mcpError(s.client.callTool({ name: 'book', arguments: { hint: 'x' } }));
      const took = Date.now() - started;
      assert.equal(e.data?.reason, 'operation_expired', e.message);
      assert.equal(e.data.upstream, name('modern'));
      assert.ok(took >= PUSH_TIMEOUT_S * 1000 - 100, `ended after ${took} ms`);
      assert.ok(await eventually(() => s.withdrawn.length === 1), 'the question was not withdrawn');
      assert.equal(s.wire.filter(isAnswer).length, 0);
    });
    assert.deepEqual(callsSince(mark, 'book').map((c) => c.answered), [{}]);
  });

  it('a session opened at A goes on at B; an answer POSTed to A, which does not hold the call: 409 call_not_waiting', TIMEOUT, async () => {
    const mark = modern.seen.length;
    const atA = gatewayA.at('/mcp/modern');
    const atB = gatewayB.at('/mcp/modern');
    // initialize and answers at A, the call (and everything else) at B.
    const reroute = (w) => (isInitialize(w) || isAnswer(w) ? atA : atB);
    await withLegacy(atA, acceptAll(), async (s) => {
      const e = await mcpError(s.client.callTool({ name: 'book', arguments: { hint: 'x' } }));
      const answer = s.wire.find(isAnswer);
      assert.equal(answer.url, atA);
      assert.equal(answer.status, 409);
      assert.equal(JSON.parse(answer.text).error.data.reason, 'call_not_waiting');
      // B never got the answer: its call ran out of time.
      assert.equal(e.data?.reason, 'operation_expired', e.message);
      assert.equal(s.wire.find((w) => w.body?.method === 'tools/call').url, atB);
    }, { reroute });
    assert.deepEqual(callsSince(mark, 'book').map((c) => c.answered), [{}]);
  });
});

describe('which upstreams are bridged: discovered, or configured ([[upstream]] generations)', () => {
  it('the Python SDK server (both generations; its server/discover lists only 2026-07-28) keeps its own sessions, discovered or configured', TIMEOUT, async () => {
    const discovered = await modernRequest(python.url, 'server/discover');
    assert.deepEqual(discovered.supportedVersions, [MODERN]);
    // Its own initialize is tried first and accepted: never bridged.
    for (const [id, serverName, bridged] of [
      ['python', 'portcullis-interop-python', false],
      ['python-native', 'portcullis-interop-python', false],
    ]) {
      await withLegacy(gatewayA.at(`/mcp/${id}`), acceptAll({ pick: { room_id: 'atrium' } }), async (s) => {
        assert.equal(s.client.getServerVersion().name, serverName, id);
        const result = await s.client.callTool({ name: 'book', arguments: { hint: 'x' } });
        assert.deepEqual(flowOutcome(result), { tool: 'book', answers: { room: { room_id: 'atrium' } } });
        assert.ok(await eventually(() => s.wire.some((w) => w.method === 'GET' && w.status)), 'no GET');
        const get = s.wire.find((w) => w.method === 'GET');
        // A bridged session has no server stream (405); a native one is the upstream's own (200).
        assert.equal(get.status, bridged ? 405 : 200, id);
        assert.equal(s.transport.sessionId.startsWith('pss1.'), true);
      });
    }
  });
});
