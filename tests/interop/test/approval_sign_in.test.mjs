// The approval page's sign-in at a real authorization server (oidc-provider): a browser
// that opens an approval's link on an OAuth protected route without a credential is sent
// to the issuer with the authorization code flow (PKCE S256, the route's resource, a state
// bound to the browser); an agent (API key) calls, the issuer signs alice in; the gateway redeems the code as a
// confidential client registered at the issuer, checks the token as the route checks
// bearer tokens, and signs her in with a session cookie she then decides with. Real HTTP
// over loopback throughout; the browser is a plain fetch that keeps cookies by hand.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, startDemoServer } from '../lib/harness.mjs';
import { startAuthServer, USER } from '../lib/auth_server.mjs';

let as;
let demo;
let gw;
let admin;
/** The caller: an agent with an API key (nobody decides their own call on the page). */
const AGENT_KEY = 'pcl_agent-sign-in-key-0123456789abcdef';

/** A free loopback port (the redirect URI is registered before the gateway starts). */
const freePort = () =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

before(async () => {
  as = await startAuthServer();
  demo = await startDemoServer();
  const port = await freePort();
  admin = `http://127.0.0.1:${port}`;
  // The gateway's sign-in client, registered at the issuer as any confidential client is.
  const reg = await fetch(`${as.issuer}/reg`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'portcullis approval page',
      redirect_uris: [`${admin}/approvals/callback`],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }),
  });
  const client = await reg.json();
  assert.ok(reg.ok, JSON.stringify(client));
  const dir = mkdtempSync(join(tmpdir(), 'portcullis-sign-in-'));
  const secretFile = join(dir, 'secret');
  writeFileSync(secretFile, `${client.client_secret}\n`);
  const toml = [
    '[[auth]]',
    'name = "agents"',
    'type = "api_key"',
    '[[auth.key]]',
    'principal = "build-bot"',
    `hash = "sha256:${createHash('sha256').update(AGENT_KEY).digest('hex')}"`,
    '',
    '[[auth]]',
    'name = "corp"',
    'type = "oauth"',
    `issuer = "${as.issuer}"`,
    'scopes = ["mcp:tools"]',
    'required_scopes = ["mcp:tools"]',
    '',
    '[[admin.sign_in]]',
    'scheme = "corp"',
    `client_id = "${client.client_id}"`,
    `client_secret_file = "${secretFile}"`,
    '',
    '[[upstream]]',
    'id = "demo"',
    'name = "Demo"',
    `url = "${demo.url}"`,
    '',
    '[[route]]',
    'path = "/mcp/demo"',
    'upstream = "demo"',
    'auth = ["corp", "agents"]',
    '[[route.approval]]',
    'name = "second"',
    'tools = ["cancel_booking"]',
    'approver = "approvers"',
    `approvers = ["${USER}"]`,
    'timeout = "30s"',
  ].join('\n');
  gw = await startGateway({}, { extraToml: `\n${toml}\n`, adminAddress: `127.0.0.1:${port}` });
});

after(async () => {
  await gw?.stop();
  await demo?.stop();
  await as?.stop();
});

/** A 2026-07-28 tools/call of cancel_booking with `token`; `extra` params merged in. */
async function callCancel(url, token, extra = {}) {
  const resp = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'cancel_booking',
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } },
        },
        name: 'cancel_booking',
        arguments: { room_id: 'atrium', day: '2026-08-01', hour: 9 },
        ...extra,
      },
    }),
  });
  assert.equal(resp.status, 200, await resp.clone().text());
  return resp.json();
}

/** A browser's request: cookies from `jar` sent, `Set-Cookie` kept, no redirect followed. */
async function browse(jar, url, init = {}) {
  const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const resp = await fetch(url, {
    ...init,
    redirect: 'manual',
    headers: { accept: 'text/html', ...(cookie ? { cookie } : {}), ...(init.headers || {}) },
  });
  for (const c of resp.headers.getSetCookie()) {
    const [pair] = c.split(';');
    const i = pair.indexOf('=');
    const value = pair.slice(i + 1);
    if (value) jar.set(pair.slice(0, i), value);
    else jar.delete(pair.slice(0, i));
  }
  return resp;
}

const csrfOf = (html) => html.match(/name="decision" value="approve"/) && html.match(/<form method="post" action="\/approvals\/[^"]+"><input type="hidden" name="csrf" value="([^"]+)"><input type="hidden" name="decision"/)[1];

test('a browser signs in at the route\'s issuer (code flow, PKCE) and decides with its cookie', async () => {
  const route = gw.at('/mcp/demo');
  const token = AGENT_KEY;
  const asked = await callCancel(route, token);
  const question = asked.result.inputRequests['dev.portcullis/approval'];
  assert.equal(question.params.mode, 'url', JSON.stringify(asked));
  const link = question.params.url;
  assert.ok(link.startsWith(`${admin}/approvals/`), link);
  const id = link.split('/').pop();
  const waiting = callCancel(route, token, {
    requestState: asked.result.requestState,
    inputResponses: { 'dev.portcullis/approval': { action: 'accept' } },
  });

  const jar = new Map();
  // A tool without a browser's Accept gets 401 and the form, not a redirect.
  const tool = await fetch(link, { redirect: 'manual' });
  assert.equal(tool.status, 401);
  const opened = await browse(jar, link);
  assert.equal(opened.status, 303);
  const start = new URL(opened.headers.get('location'));
  assert.equal(start.origin, as.issuer, 'to the route\'s issuer');
  assert.equal(start.searchParams.get('code_challenge_method'), 'S256');
  assert.equal(start.searchParams.get('resource'), route);
  assert.equal(start.searchParams.get('redirect_uri'), `${admin}/approvals/callback`);
  assert.ok(jar.has('portcullis-oauth'), 'the flow is bound to this browser');
  const flowCookie = opened.headers.getSetCookie().find((c) => c.startsWith('portcullis-oauth='));
  // It must come back on the issuer's (cross-site, top-level) redirect: Lax, not Strict.
  assert.match(flowCookie, /SameSite=Lax/);
  assert.match(flowCookie, /HttpOnly/);
  assert.ok(!opened.headers.getSetCookie().join(';').includes(start.searchParams.get('state')), 'the state is sealed');

  const back = await as.authorize(start);
  assert.equal(back.get('state'), start.searchParams.get('state'));
  const callback = `${admin}/approvals/callback?${back}`;
  // Another browser (no flow cookie) and a changed state sign nobody in.
  assert.equal((await browse(new Map(), callback)).status, 400);
  const forged = new URLSearchParams(back);
  forged.set('state', 'forged');
  assert.equal((await browse(new Map(jar), `${admin}/approvals/callback?${forged}`)).status, 403);
  const metrics = await (await fetch(`${admin}/metrics`)).text();
  assert.match(metrics, /portcullis_approval_sign_ins_refused_total\{rule="second",upstream="demo",why="token_mismatch"\} 1/);

  const copied = new Map(jar);
  const signed = await browse(jar, callback);
  const landing = await signed.text();
  // Back to the approval from the gateway's own page (a redirect chain that began at the
  // issuer would not carry the SameSite=Strict session cookie), to a path of the page only.
  assert.equal(signed.status, 200, landing);
  assert.equal(signed.headers.get('location'), null);
  assert.equal(landing.match(/http-equiv="refresh" content="0;url=([^"]+)"/)[1], `/approvals/${id}`);
  assert.match(signed.headers.getSetCookie().find((c) => c.startsWith('portcullis-approver=')), /SameSite=Strict/);
  assert.ok(jar.has('portcullis-approver'));
  assert.ok(!jar.has('portcullis-oauth'), 'the flow\'s cookie is used up');
  // The same code again (a replayed callback) signs nobody in.
  assert.notEqual((await browse(new Map(), callback)).status, 303);
  // A copy of the flow's cookie replayed with made-up codes is refused before the gateway
  // asks the token endpoint: one callback per flow.
  for (const code of ['made-up-1', 'made-up-2']) {
    const replayed = new URLSearchParams(back);
    replayed.set('code', code);
    const again = await browse(new Map(copied), `${admin}/approvals/callback?${replayed}`);
    assert.equal(again.status, 403, await again.text());
  }

  const shown = await browse(jar, link);
  const html = await shown.text();
  assert.equal(shown.status, 200, html);
  const decided = await browse(jar, link, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: `csrf=${encodeURIComponent(csrfOf(html))}&decision=approve`,
  });
  assert.equal(decided.status, 200, await decided.text());
  const done = await waiting;
  assert.equal(done.result?.resultType, 'complete', JSON.stringify(done));
  assert.ok(as.seen.includes('POST /token'), 'the code was redeemed at the token endpoint');
});
