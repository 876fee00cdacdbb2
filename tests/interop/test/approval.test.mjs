// Issue 38 with the TypeScript SDKs: the gateway asks the person itself before a call an
// `[[route.approval]]` rule names, in the client's own era. The TypeScript SDK v2 client
// (2026-07-28) gets the gateway's `input_required`; the TypeScript SDK 1.x client
// (2025-11-25 session) gets the gateway's `elicitation/create` pushed on the call's stream.
// The upstream is the TypeScript SDK v2 server (both eras); it never sees the gateway's
// question, answer or state, and its own questions follow an approval.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, startTsV2Server } from '../lib/harness.mjs';
import { connectV1, connectV2, acceptAll, flowOutcome, toolCalls } from '../lib/clients.mjs';

const PROVENANCE = 'dev.portcullis/provenance';
const RULES = `
[[route.approval]]
name = "echo-needs-a-yes"
tools = ["echo", "book"]
`;

let upstream, gateway;

before(async () => {
  upstream = await startTsV2Server();
  gateway = await startGateway({ rooms: upstream.url }, { extraToml: RULES });
});

after(async () => {
  await Promise.all([gateway?.stop(), upstream?.stop()]);
});

/** The gateway's question is the first one asked: its own words and provenance. */
function isGatewaysQuestion(params) {
  assert.equal(params.mode ?? 'form', 'form');
  assert.equal(params._meta?.[PROVENANCE]?.asker, 'gateway', JSON.stringify(params));
  assert.equal(params._meta[PROVENANCE].approval.rule, 'echo-needs-a-yes');
  assert.deepEqual(params.requestedSchema.required, ['approve']);
}

const decline = () => ({ action: 'decline' });

/** Call `tool` with a client connected by `connect`; the result, or the error. */
async function callWith(connect, tool, args, answer) {
  const session = await connect(gateway.url('rooms'), answer);
  try {
    const outcome = await session.client.callTool({ name: tool, arguments: args }).then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
    return { ...outcome, asked: session.asked, wire: session.wire };
  } finally {
    await session.close();
  }
}

for (const [era, connect] of [
  ['2026-07-28 (TS SDK v2)', connectV2],
  ['2025-11-25 (TS SDK 1.x)', connectV1],
]) {
  describe(`the gateway asks first: ${era} client`, () => {
    it('approved: the call reaches the server as the client sent it', async () => {
      const { result, error, asked } = await callWith(connect, 'echo', { text: 'hello' }, acceptAll());
      assert.equal(error, undefined, String(error));
      assert.equal(result.content[0].text, 'hello');
      assert.equal(asked.length, 1);
      isGatewaysQuestion(asked[0]);
      assert.match(asked[0].message, /"echo" of Interop rooms/);
    });

    it('declined: refused approval_declined, nothing reaches the server', async () => {
      const { error, asked } = await callWith(connect, 'echo', { text: 'not this' }, decline);
      assert.ok(error, 'a JSON-RPC error');
      assert.equal(error.data?.reason, 'approval_declined', JSON.stringify(error.data));
      assert.equal(asked.length, 1);
      isGatewaysQuestion(asked[0]);
    });

    it("the server's own question follows the approval", async () => {
      const { result, error, asked } = await callWith(
        connect,
        'book',
        { hint: 'the big room' },
        acceptAll({ pick: { room_id: 'nook' } }),
      );
      assert.equal(error, undefined, String(error));
      assert.deepEqual(flowOutcome(result), { tool: 'book', answers: { room: { room_id: 'nook' } } });
      assert.equal(asked.length, 2, JSON.stringify(asked));
      isGatewaysQuestion(asked[0]);
      assert.notEqual(asked[1]._meta?.[PROVENANCE]?.asker, 'gateway');
      assert.match(asked[1].message, /the big room/);
    });
  });
}

describe('the gateway asks first: what crosses the wire (TS SDK v2)', () => {
  it("the client's retry carries the gateway's sealed state, then the server's question its own", async () => {
    const { wire } = await callWith(connectV2, 'book', { hint: 'x' }, acceptAll());
    const [first, approval, answer] = toolCalls(wire, 'book');
    assert.equal(first.body.params.requestState, undefined);
    assert.ok(approval.body.params.requestState.startsWith('pcs1.'));
    assert.deepEqual(approval.body.params.inputResponses['dev.portcullis/approval'].content.approve, true);
    assert.ok(answer.body.params.inputResponses.room, JSON.stringify(answer.body.params));
  });
});
