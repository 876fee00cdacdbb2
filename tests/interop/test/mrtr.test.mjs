// Every MRTR (2026-07-28 input_required) flow with the TypeScript SDK v2 client, against
// the TypeScript SDK v2 server and the Python SDK server, each directly (to show the flow
// itself works between the two SDKs) and through the gateway (to show the gateway carries
// it, and polices what it must).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, startTsV2Server, startPythonServer, GATEWAY_MAX_ROUNDS } from '../lib/harness.mjs';
import { connectV2, acceptAll, flowOutcome, fieldsOf, toolCalls } from '../lib/clients.mjs';

const MODERN = '2026-07-28';
const servers = {};
let gateway;

before(async () => {
  [servers['ts-v2'], servers.python] = await Promise.all([startTsV2Server(), startPythonServer()]);
  gateway = await startGateway({ 'ts-v2': servers['ts-v2'].url, python: servers.python.url });
});

after(async () => {
  await Promise.all([gateway?.stop(), ...Object.values(servers).map((s) => s.stop())]);
});

/** Connect, call one tool, close; returns what the person was asked and what went over the wire. */
async function callFlow(url, tool, args, answer, options) {
  const session = await connectV2(url, answer, options);
  try {
    assert.equal(session.client.getNegotiatedProtocolVersion(), MODERN);
    const result = await session.client.callTool({ name: tool, arguments: args });
    return { result, outcome: flowOutcome(result), asked: session.asked, wire: session.wire };
  } finally {
    await session.close();
  }
}

/** Connect, call one tool that must fail; returns the error and what was asked. */
async function callRefused(url, tool, args, answer, options) {
  const session = await connectV2(url, answer, options);
  try {
    const error = await session.client.callTool({ name: tool, arguments: args }).then(
      (result) => assert.fail(`expected a JSON-RPC error, got ${JSON.stringify(result)}`),
      (e) => e,
    );
    return { error, asked: session.asked, wire: session.wire };
  } finally {
    await session.close();
  }
}

for (const server of ['ts-v2', 'python']) {
  for (const path of ['direct', 'gateway']) {
    const url = () => (path === 'direct' ? servers[server].url : gateway.url(server));
    const via = path === 'gateway';

    describe(`TS v2 client → ${server} server, ${path}`, () => {
      it('negotiates 2026-07-28 with server/discover and stamps every request', async () => {
        const session = await connectV2(url(), acceptAll());
        try {
          const listing = await session.client.listTools();
          assert.ok(listing.tools.some((t) => t.name === 'book'));
          const [probe] = session.wire;
          assert.equal(probe.body.method, 'server/discover');
          for (const w of session.wire.filter((w) => w.body?.method)) {
            assert.equal(w.headers['mcp-protocol-version'], MODERN);
            assert.equal(w.headers['mcp-method'], w.body.method);
            assert.equal(w.body.params._meta['io.modelcontextprotocol/protocolVersion'], MODERN);
            assert.ok(w.status === 200, `${w.body.method} answered ${w.status}`);
          }
          assert.ok(!session.wire.some((w) => w.body?.method === 'initialize'), 'fell back to initialize');
        } finally {
          await session.close();
        }
      });

      it('form, accepted: the answer reaches the server and the server its own state', async () => {
        const { outcome, asked, wire } = await callFlow(
          url(),
          'book',
          { hint: 'the big room' },
          acceptAll({ pick: { room_id: 'nook' } }),
        );
        assert.deepEqual(outcome, { tool: 'book', answers: { room: { room_id: 'nook' } } });
        assert.equal(asked.length, 1);
        assert.deepEqual(asked[0].requestedSchema.properties.room_id.enum, ['atrium', 'studio-b', 'nook']);
        assert.match(asked[0].message, /the big room/);
        const [first, retry] = toolCalls(wire, 'book');
        assert.equal(first.body.params.inputResponses, undefined);
        assert.deepEqual(retry.body.params.inputResponses.room, { action: 'accept', content: { room_id: 'nook' } });
        assert.equal(retry.headers['mcp-name'], 'book');
        // Through the gateway the client holds the gateway's sealed state, not the server's.
        assert.equal(retry.body.params.requestState.startsWith('pcs1.'), via);
      });

      for (const [action, done] of [
        ['decline', 'declined'],
        ['cancel', 'cancelled'],
      ]) {
        it(`form, ${done}: the server learns the ${action}`, async () => {
          const { outcome, asked, wire } = await callFlow(url(), 'book', { hint: 'x' }, () => ({ action }));
          assert.deepEqual(outcome, { tool: 'book', stopped: { key: 'room', action } });
          assert.equal(asked.length, 1);
          const retry = toolCalls(wire, 'book').at(-1);
          assert.deepEqual(retry.body.params.inputResponses.room, { action });
        });
      }

      it('several rounds: three questions asked one after the other', async () => {
        const { outcome, asked, wire } = await callFlow(url(), 'wizard', {}, acceptAll({ text: 'Offsite' }));
        assert.deepEqual(outcome, {
          tool: 'wizard',
          answers: { name: { title: 'Offsite' }, size: { people: 2 }, confirm: { go: true } },
        });
        assert.deepEqual(asked.map(fieldsOf), [['title'], ['people'], ['go']]);
        assert.equal(toolCalls(wire, 'wizard').length, 4);
      });

      it('each round as an event stream (a progress event first): the rounds still complete', async () => {
        const session = await connectV2(url(), acceptAll({ text: 'Offsite' }));
        try {
          const progress = [];
          const result = await session.client.callTool(
            { name: 'wizard', arguments: {} },
            { onprogress: (p) => progress.push(p) },
          );
          assert.deepEqual(flowOutcome(result).answers.confirm, { go: true });
          assert.equal(session.asked.length, 3);
          // The server's own events (the SDK adds one of its own per round it fulfils).
          const fromServer = progress.filter((p) => p.message === 'thinking');
          assert.deepEqual(
            fromServer.map((p) => p.progress),
            [1, 2, 3, 4],
            JSON.stringify(progress),
          );
          const calls = toolCalls(session.wire, 'wizard');
          assert.equal(calls.length, 4);
          for (const call of calls) assert.match(call.contentType, /^text\/event-stream/);
        } finally {
          await session.close();
        }
      });

      it('several questions in one round: both asked, both answered in one retry', async () => {
        const { outcome, asked, wire } = await callFlow(url(), 'profile', {}, acceptAll({ pick: { side: 'aisle' } }));
        assert.deepEqual(outcome, {
          tool: 'profile',
          answers: { contact: { email: 'ada@example.com' }, seat: { side: 'aisle' } },
        });
        assert.deepEqual(asked.map(fieldsOf).sort(), [['email'], ['side']]);
        const calls = toolCalls(wire, 'profile');
        assert.equal(calls.length, 2);
        assert.deepEqual(Object.keys(calls[1].body.params.inputResponses).sort(), ['contact', 'seat']);
      });

      it('URL mode: the person is sent to the sign-in page, unchanged', async () => {
        const { outcome, asked } = await callFlow(url(), 'signin', {}, acceptAll());
        assert.equal(asked.length, 1);
        assert.equal(asked[0].mode, 'url');
        assert.equal(asked[0].url, 'https://auth.example.com/authorize?client=rooms');
        assert.equal(outcome.tool, 'signin');
        assert.ok('login' in outcome.answers, JSON.stringify(outcome));
      });

      it('URL mode to a client that declared only form mode is refused; the person is not asked', async () => {
        const { error, asked } = await callRefused(url(), 'signin', {}, acceptAll(), {
          capabilities: { elicitation: { form: {} } },
        });
        assert.equal(asked.length, 0);
        if (via) {
          // The gateway checks the request against the declared capabilities itself.
          assert.equal(error.code, -32021, String(error));
          assert.deepEqual(error.data?.requiredCapabilities, { elicitation: { url: {} } });
        } else {
          // Directly it depends on the SDK: the TS server refuses with -32021, the TS
          // client refuses the Python server's URL request with -32602.
          assert.ok([-32021, -32602].includes(error.code), String(error));
        }
      });

      it('markup and terminal escapes in a message', async () => {
        const { outcome, asked } = await callFlow(url(), 'styled', {}, acceptAll());
        assert.deepEqual(outcome, { tool: 'styled', answers: { ok: { fine: true } } });
        const [{ message }] = asked;
        if (via) {
          assert.doesNotMatch(message, /[<>\u001b]/, `the gateway left markup or escapes: ${JSON.stringify(message)}`);
          assert.doesNotMatch(message, /alert/);
          assert.match(message, /Pick one colour/);
        } else {
          assert.match(message, /<b>one<\/b> \u001b\[31mcolour/);
        }
      });

      if (!via) {
        it('a form asking for a password reaches the person when nothing is in between', async () => {
          const { outcome, asked } = await callFlow(url(), 'vault', {}, acceptAll({ text: 'hunter2' }));
          assert.deepEqual(fieldsOf(asked[0]), ['password']);
          assert.deepEqual(outcome, { tool: 'vault', answers: { unlock: { password: 'hunter2' } } });
        });
      } else {
        it('a form asking for a password is refused: secret_field_requested, the person is never asked', async () => {
          const { error, asked } = await callRefused(url(), 'vault', {}, acceptAll({ text: 'hunter2' }));
          assert.equal(asked.length, 0);
          assert.equal(error.code, -32010, String(error));
          assert.equal(error.data?.reason, 'secret_field_requested');
          assert.equal(error.data?.key, 'unlock');
          assert.equal(error.data?.field, 'password', JSON.stringify(error.data));
          assert.equal(error.data?.upstream, gateway.upstreamName(server));
        });
      }

      it(`${GATEWAY_MAX_ROUNDS} rounds, the gateway's limit, complete`, async () => {
        const { outcome, asked } = await callFlow(url(), 'endless', { rounds: GATEWAY_MAX_ROUNDS }, acceptAll());
        assert.equal(asked.length, GATEWAY_MAX_ROUNDS);
        assert.equal(Object.keys(outcome.answers).length, GATEWAY_MAX_ROUNDS);
      });

      if (!via) {
        it(`${GATEWAY_MAX_ROUNDS + 1} rounds complete when nothing is in between`, async () => {
          const { outcome, asked } = await callFlow(url(), 'endless', { rounds: GATEWAY_MAX_ROUNDS + 1 }, acceptAll());
          assert.equal(asked.length, GATEWAY_MAX_ROUNDS + 1);
          assert.equal(Object.keys(outcome.answers).length, GATEWAY_MAX_ROUNDS + 1);
        });
      } else {
        it(`a round past the gateway's max_rounds (${GATEWAY_MAX_ROUNDS}) is refused: round_limit_exceeded`, async () => {
          const { error, asked } = await callRefused(url(), 'endless', { rounds: GATEWAY_MAX_ROUNDS + 1 }, acceptAll());
          assert.equal(asked.length, GATEWAY_MAX_ROUNDS);
          assert.equal(error.code, -32011, String(error));
          assert.equal(error.data?.reason, 'round_limit_exceeded');
          assert.equal(error.data?.limit, GATEWAY_MAX_ROUNDS);
        });
      }
    });
  }
}
