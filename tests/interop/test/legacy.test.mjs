// 2025-11-25 sessions (initialize, Mcp-Session-Id, elicitation pushed by the server on
// the call's stream and answered with a POST) with the TypeScript SDK 1.x client against
// the Python SDK server, which serves both generations on one URL; and the TypeScript
// SDK v2 client in auto mode against a 2025-11-25-only server (TypeScript SDK 1.x),
// which has to negotiate down.
//
// Each flow runs directly and through the gateway, which polices the pushed requests.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, startPythonServer, startTsV1Server, keygen } from '../lib/harness.mjs';
import { connectV1, connectV2, acceptAll, flowOutcome, fieldsOf } from '../lib/clients.mjs';

const LEGACY = '2025-11-25';
const MODERN = '2026-07-28';
const TIMEOUT = { timeout: 30_000 };
let python, tsV1, gatewayA, gatewayB;

before(async () => {
  [python, tsV1] = await Promise.all([startPythonServer(), startTsV1Server()]);
  const keys = await keygen('interop');
  const upstreams = { python: python.url, 'ts-v1': tsV1.url };
  [gatewayA, gatewayB] = await Promise.all([
    startGateway(upstreams, { stateKeys: keys }),
    startGateway(upstreams, { stateKeys: keys }),
  ]);
});

after(async () => {
  await Promise.all([gatewayA, gatewayB, python, tsV1].map((p) => p?.stop()));
});

/** The flow test on one path: a plain test directly, a strict expected failure through the gateway. */
function flowTest(path, name, body) {
  it(name, TIMEOUT, body);
}

async function callV1(url, tool, args, answer, options) {
  const session = await connectV1(url, answer, options);
  try {
    assert.equal(session.transport.protocolVersion, LEGACY);
    assert.ok(session.transport.sessionId, 'no Mcp-Session-Id after initialize');
    const result = await session.client.callTool({ name: tool, arguments: args });
    return { result, asked: session.asked, wire: session.wire, session };
  } finally {
    await session.close();
  }
}

for (const path of ['direct', 'gateway']) {
  const via = path === 'gateway';
  const url = () => (via ? gatewayA.url('python') : python.url);
  const secondUrl = () => (via ? gatewayB.url('python') : python.url);

  describe(`TS SDK 1.x client (2025-11-25) → python server, ${path}`, () => {
    flowTest(path, 'initialize opens a session; no 2026-07-28 headers are sent', async () => {
      const session = await connectV1(url(), acceptAll());
      try {
        const listing = await session.client.listTools();
        assert.ok(listing.tools.some((t) => t.name === 'book'));
        assert.equal(session.wire[0].body.method, 'initialize');
        assert.equal(session.wire[0].status, 200);
        for (const w of session.wire) assert.equal(w.headers['mcp-method'], undefined);
      } finally {
        await session.close();
      }
    });

    flowTest(path, 'pushed form, accepted: the answer goes back as a POSTed response', async () => {
      const { result, asked, wire } = await callV1(
        url(),
        'book',
        { hint: 'the big room' },
        acceptAll({ pick: { room_id: 'studio-b' } }),
      );
      assert.deepEqual(flowOutcome(result), { tool: 'book', answers: { room: { room_id: 'studio-b' } } });
      assert.equal(asked.length, 1);
      assert.deepEqual(asked[0].requestedSchema.properties.room_id.enum, ['atrium', 'studio-b', 'nook']);
      const answer = wire.find((w) => w.body?.result?.action);
      assert.deepEqual(answer.body.result, { action: 'accept', content: { room_id: 'studio-b' } });
      assert.ok(answer.headers['mcp-session-id'], 'the answer was POSTed outside the session');
      assert.equal(answer.body.method, undefined);
    });

    for (const [action, done] of [
      ['decline', 'declined'],
      ['cancel', 'cancelled'],
    ]) {
      flowTest(path, `pushed form, ${done}: the server learns the ${action}`, async () => {
        const { result, asked } = await callV1(url(), 'book', { hint: 'x' }, () => ({ action }));
        assert.deepEqual(flowOutcome(result), { tool: 'book', stopped: { key: 'room', action } });
        assert.equal(asked.length, 1);
      });
    }

    if (!via) {
      flowTest(path, 'a pushed form asking for a password reaches the person when nothing is in between', async () => {
        const { result, asked } = await callV1(url(), 'vault', {}, acceptAll({ text: 'hunter2' }));
        assert.deepEqual(fieldsOf(asked[0]), ['password']);
        assert.deepEqual(flowOutcome(result), { tool: 'vault', answers: { unlock: { password: 'hunter2' } } });
      });
    } else {
      flowTest(
        path,
        'a pushed form asking for a password is refused: never shown, the upstream answered, the call ends',
        async () => {
          const session = await connectV1(url(), acceptAll({ text: 'hunter2' }));
          try {
            // The gateway answered the upstream's elicitation itself with a JSON-RPC error
            // naming the reason; the upstream's tool call fails with it.
            await assert.rejects(
              session.client.callTool({ name: 'vault', arguments: {} }),
              (e) => /password/.test(e.message) && /URL mode/.test(e.message),
            );
            assert.equal(session.asked.length, 0, 'the person was shown a form asking for a password');
          } finally {
            await session.close();
          }
        },
      );
    }

    flowTest(path, 'markup and terminal escapes in a pushed message', async () => {
      const { result, asked } = await callV1(url(), 'styled', {}, acceptAll());
      assert.deepEqual(flowOutcome(result), { tool: 'styled', answers: { ok: { fine: true } } });
      if (via) {
        assert.doesNotMatch(asked[0].message, /[<>\u001b]/);
        assert.match(asked[0].message, /Pick one colour/);
      } else {
        assert.match(asked[0].message, /<b>one<\/b> \u001b\[31mcolour/);
      }
    });

    flowTest(path, 'DELETE ends the session; the old session id is refused after it', async () => {
      const session = await connectV1(url(), acceptAll());
      const id = session.transport.sessionId;
      await session.transport.terminateSession();
      await session.close();
      const del = session.wire.find((w) => w.method === 'DELETE');
      assert.ok(del && del.status >= 200 && del.status < 300, `DELETE answered ${del?.status}`);
      const after = await fetch(url(), {
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
    });

    flowTest(
      path,
      `a session opened at one ${via ? 'gateway' : 'connection'} goes on at ${via ? 'a second gateway with the same [state] keys' : 'another'}`,
      async () => {
        const { result, asked, wire } = await callV1(
          url(),
          'book',
          { hint: 'two' },
          acceptAll({ pick: { room_id: 'nook' } }),
          { continueAt: secondUrl() },
        );
        assert.deepEqual(flowOutcome(result), { tool: 'book', answers: { room: { room_id: 'nook' } } });
        assert.equal(asked.length, 1);
        assert.equal(wire[0].url, url());
        assert.ok(wire.filter((w) => w.body?.method === 'tools/call').every((w) => w.url === secondUrl()));
      },
    );
  });

  describe(`TS v2 client (auto) → 2025-11-25-only server (TS SDK 1.x), ${path}`, () => {
    const v1Url = () => (via ? gatewayA.url('ts-v1') : tsV1.url);

    // Directly the client negotiates down (the server refuses server/discover);
    // through the gateway the bridge answers server/discover and carries the
    // client's 2026-07-28 requests in a session of its own (README "Bridging
    // the two generations"): the pushed form reaches it as input_required.
    const title = via
      ? 'speaks 2026-07-28 through the bridge: server/discover answered, the pushed form asked as input_required'
      : 'negotiates down: server/discover, then initialize, then a pushed form';
    flowTest(path, title, async () => {
      const session = await connectV2(v1Url(), acceptAll({ pick: { room_id: 'atrium' } }));
      try {
        assert.equal(session.client.getNegotiatedProtocolVersion(), via ? MODERN : LEGACY);
        const result = await session.client.callTool({ name: 'book', arguments: { hint: 'any' } });
        assert.deepEqual(flowOutcome(result), { tool: 'book', answers: { room: { room_id: 'atrium' } } });
        const methods = session.wire.map((w) => w.body?.method).filter(Boolean);
        if (via) {
          assert.equal(methods[0], 'server/discover');
          assert.ok(!methods.includes('initialize'), `the client never initializes: ${methods}`);
        } else {
          assert.deepEqual(methods.slice(0, 3), ['server/discover', 'initialize', 'notifications/initialized']);
        }
        assert.equal(session.asked.length, 1);
      } finally {
        await session.close();
      }
    });
  });
}
