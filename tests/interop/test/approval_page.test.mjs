// Issue 38 with the TypeScript SDKs: an approver other than the caller
// (`approver = "approvers"`). The caller's client gets a URL-mode elicitation whose link
// leads to the gateway's approval page on its admin listener; a second HTTP client — the
// approver, with an API key the rule names — reads the call there and decides. Approved,
// the call completes; declined on the page, or the link declined or cancelled by the
// caller, the gateway refuses it `approval_declined`.
//
// Plain route: the TypeScript SDK v2 server (both eras), with the TypeScript SDK v2
// client (2026-07-28: `input_required`, the retry waits for the decision) and the 1.x
// client (2025-11-25: the link pushed on the call's stream). Bridged: the v2 client in
// front of the 1.x server (2025-11-25 only), the 1.x client in front of the demo server
// (2026-07-28 only).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { startDemoServer, startGateway, startTsV1Server, startTsV2Server } from '../lib/harness.mjs';
import { connectV1, connectV2 } from '../lib/clients.mjs';

const ALICE = 'pcl_alice-ts-page-key-0123456789abcdef';
const BOB = 'pcl_bob-ts-page-key-0123456789abcdef';
const hashed = (key) => `sha256:${createHash('sha256').update(key).digest('hex')}`;
const CANCEL = { room_id: 'nook', day: '2026-09-17', hour: 9 };
const ECHO = { text: 'hello, approver' };

const rule = (name, tool) => `
[[route.approval]]
name = "${name}"
tools = ["${tool}"]
approver = "approvers"
approvers = ["bob"]
timeout = "30s"
`;

const EXTRA = `
[[auth]]
name = "keys"
type = "api_key"
[[auth.key]]
principal = "alice"
hash = "${hashed(ALICE)}"
[[auth.key]]
principal = "bob"
hash = "${hashed(BOB)}"

[[route]]
path = "/plain"
upstream = "v2"
auth = ["keys"]
${rule('plain-pair', 'echo')}
[[route]]
path = "/only-sessions"
upstream = "v1"
auth = ["keys"]
${rule('v1-pair', 'echo')}
[[route]]
path = "/only-stateless"
upstream = "rooms"
auth = ["keys"]
${rule('rooms-pair', 'cancel_booking')}
`;

// [route, rule, tool, arguments, what the server answers, the clients that go there]
const PATHS = [
  ['/plain', 'plain-pair', 'echo', ECHO, ECHO.text, [['2026-07-28 (TS SDK v2)', connectV2], ['2025-11-25 (TS SDK 1.x)', connectV1]]],
  ['/only-sessions', 'v1-pair', 'echo', ECHO, ECHO.text, [['2026-07-28 (TS SDK v2), bridged', connectV2]]],
  ['/only-stateless', 'rooms-pair', 'cancel_booking', CANCEL, 'Cancelled the booking of nook', [['2025-11-25 (TS SDK 1.x), bridged', connectV1]]],
];

let servers = [];
let gateway;

before(async () => {
  servers = await Promise.all([startTsV2Server(), startTsV1Server(), startDemoServer()]);
  const [v2, v1, rooms] = servers.map((s) => s.url);
  gateway = await startGateway({ v2, v1, rooms }, { extraToml: EXTRA });
});

after(async () => {
  await Promise.all([gateway?.stop(), ...servers.map((s) => s.stop())]);
});

const bearer = (key) => ({ Authorization: `Bearer ${key}` });

/** The approver on the page the link leads to: reads it, then decides `decision`. */
async function decideOnPage(url, decision) {
  const page = await fetch(url, { headers: bearer(BOB) });
  const html = await page.text();
  assert.equal(page.status, 200, html);
  const csrf = html.match(/name="csrf" value="([^"]+)"/)?.[1];
  assert.ok(csrf, html);
  const decided = await fetch(url, {
    method: 'POST',
    headers: { ...bearer(BOB), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ csrf, decision }).toString(),
  });
  assert.equal(decided.status, 200, await decided.text());
  return html;
}

/**
 * The caller's person: `onPage` is what the approver decides before the caller's client
 * answers the link with `accept`; without it the caller answers `answer` itself.
 */
function person({ onPage, answer = 'accept' }) {
  const pages = [];
  const handle = async (params) => {
    assert.equal(params.mode, 'url', JSON.stringify(params));
    if (onPage) pages.push(await decideOnPage(params.url, onPage));
    return { action: answer };
  };
  return { handle, pages };
}

async function callWith(connect, route, tool, args, answer) {
  const session = await connect(gateway.at(route), answer, { headers: bearer(ALICE) });
  try {
    const outcome = await session.client.callTool({ name: tool, arguments: args }).then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
    // The client's own era: a 2025-11-25 session began with initialize.
    const initialized = session.wire.some((w) => w.body?.method === 'initialize');
    return { ...outcome, asked: session.asked, initialized };
  } finally {
    await session.close();
  }
}

/** The links the page lists as waiting. */
async function waiting() {
  const page = await fetch(`${gateway.admin}/approvals`, { headers: bearer(BOB) });
  const html = await page.text();
  assert.equal(page.status, 200, html);
  return [...html.matchAll(/href="(\/approvals\/[^"]+)"/g)].map((m) => m[1]);
}

for (const [route, ruleName, tool, args, answered, clients] of PATHS) {
  for (const [era, connect] of clients) {
    describe(`the approval page, ${route}: ${era} client`, () => {
      it('approved on the page: the call completes', async () => {
        const p = person({ onPage: 'approve' });
        const { result, error, asked, initialized } = await callWith(connect, route, tool, args, p.handle);
        assert.equal(initialized, era.startsWith('2025-11-25'), 'the client speaks its own era');
        assert.equal(error, undefined, String(error));
        assert.match(result.content[0].text, new RegExp(answered));
        assert.equal(asked.length, 1);
        assert.ok(asked[0].url.startsWith(`${gateway.admin}/approvals/`), asked[0].url);
        assert.match(p.pages[0], /alice/);
      });

      it('declined on the page: refused approval_declined', async () => {
        const p = person({ onPage: 'decline' });
        const { error, asked } = await callWith(connect, route, tool, args, p.handle);
        assert.ok(error, 'a JSON-RPC error');
        assert.equal(error.data?.reason, 'approval_declined', JSON.stringify(error.data));
        assert.equal(error.data?.rule, ruleName);
        assert.equal(asked.length, 1);
      });

      for (const answer of ['decline', 'cancel']) {
        it(`the caller answers the link ${answer}: refused approval_declined, nothing waits`, async () => {
          const p = person({ answer });
          const { error, asked } = await callWith(connect, route, tool, args, p.handle);
          assert.ok(error, 'a JSON-RPC error');
          assert.equal(error.data?.reason, 'approval_declined', JSON.stringify(error.data));
          assert.equal(asked.length, 1);
          assert.deepEqual(await waiting(), []);
        });
      }
    });
  }
}
