// The gateway as an OAuth protected resource, against a real authorization server
// (oidc-provider, lib/auth_server.mjs) and the TypeScript SDK v2 client with its own OAuth
// provider: discovery from the 401, dynamic registration, sign-in with PKCE and a resource
// indicator, a tool call, step-up on 403 insufficient_scope; tokens for another resource,
// expired, opaque (introspected) and without the required scope; each upstream's own
// credential (token exchange, client credentials, a static key) checked by an upstream that
// verifies its own audience; the client's tokens never reach an upstream; the metadata
// document still served while the authorization server is down. First, without the gateway:
// the authorization server's own flows, and the SDK client straight at an upstream with a
// token from it (the control for everything the gateway adds).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError as UnauthorizedErrorV1 } from '@modelcontextprotocol/sdk/client/auth.js';
import { startGateway } from '../lib/harness.mjs';
import { startAuthServer, CLIENTS, SHORT_TTL, USER } from '../lib/auth_server.mjs';
import { MemoryOAuthHost, withSignIn } from '../lib/oauth_host.mjs';
import { serveAudience } from '../servers/audience_server.mjs';

const STATIC_KEY = 'static-upstream-key-0123456789abcdef';
const API_KEY = `pcl_${randomBytes(32).toString('base64url')}`;
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
let as, gw, exchanged, credentialed, keyed;

const isUnauthorized = (e) => e instanceof UnauthorizedError || e instanceof UnauthorizedErrorV1;
const host = () => new MemoryOAuthHost((url) => as.authorize(url));

/** A v2 client signed in to `url` (through the 401 → metadata → registration → sign-in). */
async function signedIn(url, provider = host()) {
  // A failed connect leaves the client unusable: each attempt gets a new one.
  let connected;
  let transport;
  await withSignIn(
    provider,
    { finishAuth: (callback) => transport.finishAuth(callback) },
    async () => {
      connected = new Client({ name: 'portcullis-interop-oauth', version: '1.0.0' }, { capabilities: {} });
      transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
      await connected.connect(transport);
    },
    { isUnauthorized },
  );
  return { client: connected, transport, provider };
}

const text = (result) => result.content.find((c) => c.type === 'text').text;

async function post(url, token, body) {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify(body),
  });
}

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

before(async () => {
  as = await startAuthServer();
});

after(async () => {
  await as?.stop();
});

/** The v2 client straight at `url` with a fixed bearer token (no OAuth discovery). */
async function withToken(url, token) {
  const client = new Client({ name: 'portcullis-interop-direct', version: '1.0.0' }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: { token: async () => token } }));
  return client;
}

const claimsOf = (jwt) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString());

describe('directly: the authorization server and an upstream that checks its own audience', () => {
  let up;
  before(async () => {
    up = await serveAudience({ issuer: as.issuer });
  });
  after(async () => {
    await up?.stop();
  });

  test('the authorization server publishes what the SDK clients and the gateway need', async () => {
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      const m = await (await fetch(`${as.issuer}${path}`)).json();
      assert.equal(m.issuer, as.issuer, path);
      assert.equal(m.jwks_uri, as.jwksUri);
      assert.equal(m.token_endpoint, as.tokenEndpoint);
      assert.equal(m.introspection_endpoint, as.introspectionEndpoint);
      assert.ok(m.registration_endpoint, 'dynamic client registration');
      assert.deepEqual(m.code_challenge_methods_supported, ['S256']);
      for (const g of ['authorization_code', 'client_credentials', TOKEN_EXCHANGE]) {
        assert.ok(m.grant_types_supported.includes(g), g);
      }
      assert.ok(m.token_endpoint_auth_methods_supported.includes('client_secret_basic'));
    }
  });

  test('registration, sign-in with PKCE and a resource: a JWT for that resource; the upstream takes it, and no other', async () => {
    const { access_token: token, scope } = await as.userToken(up.url, 'mcp:tools');
    const claims = claimsOf(token);
    assert.equal(claims.iss, as.issuer);
    assert.equal(claims.sub, USER);
    assert.equal(claims.aud, up.url, 'RFC 8707: aud is the resource asked for');
    assert.equal(scope, 'mcp:tools');
    const client = await withToken(up.url, token);
    const who = JSON.parse(text(await client.callTool({ name: 'whoami', arguments: {} })));
    assert.deepEqual(who, { sub: USER, aud: up.url, scope: 'mcp:tools', client_id: claims.client_id });
    await client.close();

    const elsewhere = await as.userToken('http://127.0.0.1:9/mcp', 'mcp:tools');
    const refused = await post(up.url, elsewhere.access_token, initialize);
    assert.equal(refused.status, 401, 'the upstream checks its own audience');
    assert.equal((await post(up.url, undefined, initialize)).status, 401);
    assert.ok(up.seen.includes(`Bearer ${elsewhere.access_token}`), 'and records what it was sent');
  });

  test('client credentials: the client itself, for the resource asked for', async () => {
    const { access_token: token } = await as.clientCredentialsToken({
      clientId: CLIENTS.upstream.id,
      secret: CLIENTS.upstream.secret,
      resource: up.url,
      scope: 'up:read',
    });
    const client = await withToken(up.url, token);
    const who = JSON.parse(text(await client.callTool({ name: 'whoami', arguments: {} })));
    assert.equal(who.sub, CLIENTS.upstream.id);
    assert.equal(who.aud, up.url);
    assert.equal(who.scope, 'up:read');
    await client.close();
    await assert.rejects(
      as.clientCredentialsToken({ clientId: CLIENTS.upstream.id, secret: 'wrong', resource: up.url }),
      /invalid_client/,
    );
  });

  test('token exchange (RFC 8693): alice stays the subject, the exchanging client is the actor', async () => {
    const { access_token: subject } = await as.userToken('http://127.0.0.1:9/gateway', 'mcp:tools');
    const exchanged = await as.exchangeToken(CLIENTS.upstream, subject, up.url);
    assert.equal(exchanged.issued_token_type, 'urn:ietf:params:oauth:token-type:access_token');
    const client = await withToken(up.url, exchanged.access_token);
    const who = JSON.parse(text(await client.callTool({ name: 'whoami', arguments: {} })));
    assert.equal(who.sub, USER);
    assert.deepEqual(who.act, { sub: CLIENTS.upstream.id });
    assert.equal(who.aud, up.url);
    assert.equal(who.scope, 'up:read');
    await client.close();

    // An opaque subject token (found in the provider's store) is exchanged the same way.
    const opaque = await as.userToken('http://127.0.0.1:9/opaque/gateway', 'mcp:tools');
    assert.equal(opaque.access_token.split('.').length, 1);
    const fromOpaque = await as.exchangeToken(CLIENTS.upstream, opaque.access_token, up.url);
    assert.equal(claimsOf(fromOpaque.access_token).sub, USER);
    // Not a token of this server, or a scope the resource does not offer: refused.
    await assert.rejects(as.exchangeToken(CLIENTS.upstream, 'forged', up.url), /invalid_grant/);
    await assert.rejects(as.exchangeToken(CLIENTS.upstream, subject, up.url, 'up:write'), /invalid_scope/);
  });

  test('introspection (RFC 7662) of an opaque token, by the gateway’s client', async () => {
    const { access_token: token } = await as.userToken('http://127.0.0.1:9/opaque/mcp', 'mcp:tools mcp:admin');
    const info = await as.introspect(CLIENTS.gateway, token);
    assert.equal(info.active, true);
    assert.equal(info.sub, USER);
    assert.equal(info.aud, 'http://127.0.0.1:9/opaque/mcp');
    assert.equal(info.scope, 'mcp:tools mcp:admin');
    assert.equal((await as.introspect(CLIENTS.gateway, 'not-a-token')).active, false);
  });
});

describe('through the gateway', () => {
before(async () => {
  exchanged = await serveAudience({ issuer: as.issuer });
  credentialed = await serveAudience({ issuer: as.issuer });
  keyed = await serveAudience({ staticKey: STATIC_KEY });
  const dir = mkdtempSync(join(tmpdir(), 'portcullis-oauth-'));
  const secret = (name, value) => {
    const path = join(dir, name);
    writeFileSync(path, `${value}\n`);
    return path;
  };
  const allow = ['[[route.allow]]', 'tools = ["whoami", "get_*"]', '[[route.allow]]', 'scopes = ["mcp:admin"]', 'tools = ["admin_*"]'];
  const route = (path, upstream) => ['[[route]]', `path = "${path}"`, `upstream = "${upstream}"`, 'auth = ["corp"]', ...allow, ''];
  const toml = [
    '[[auth]]',
    'name = "corp"',
    'type = "oauth"',
    `issuer = "${as.issuer}"`,
    'scopes = ["mcp:tools", "mcp:admin"]',
    'required_scopes = ["mcp:tools"]',
    'leeway = "0s"',
    `introspection_client_id = "${CLIENTS.gateway.id}"`,
    `introspection_client_secret_file = "${secret('introspection', CLIENTS.gateway.secret)}"`,
    '',
    '[[upstream]]',
    'id = "te"',
    'name = "Token exchange upstream"',
    `url = "${exchanged.url}"`,
    '[upstream.credential]',
    'type = "token_exchange"',
    `issuer = "${as.issuer}"`,
    `client_id = "${CLIENTS.upstream.id}"`,
    `client_secret_file = "${secret('upstream', CLIENTS.upstream.secret)}"`,
    `resource = "${exchanged.url}"`,
    'scope = "up:read"',
    '',
    '[[upstream]]',
    'id = "cc"',
    'name = "Client credentials upstream"',
    `url = "${credentialed.url}"`,
    '[upstream.credential]',
    'type = "client_credentials"',
    `token_url = "${as.tokenEndpoint}"`,
    `client_id = "${CLIENTS.upstream.id}"`,
    `client_secret_file = "${secret('upstream2', CLIENTS.upstream.secret)}"`,
    `resource = "${credentialed.url}"`,
    'scope = ["up:read"]',
    '',
    '[[upstream]]',
    'id = "st"',
    'name = "Static key upstream"',
    `url = "${keyed.url}"`,
    '[upstream.credential]',
    'type = "static"',
    `secret_file = "${secret('static', STATIC_KEY)}"`,
    '',
    ...route('/mcp/te', 'te'),
    ...route('/mcp/cc', 'cc'),
    ...route('/mcp/st', 'st'),
    ...route('/short/mcp', 'cc'),
    ...route('/opaque/mcp', 'cc'),
    // The authorization server's tokens and the gateway's own API keys on one route.
    '[[auth]]',
    'name = "keys"',
    'type = "api_key"',
    '[[auth.key]]',
    'principal = "robot"',
    `hash = "sha256:${createHash('sha256').update(API_KEY).digest('hex')}"`,
    '',
    ...route('/opaque/mixed/mcp', 'cc').map((l) => (l === 'auth = ["corp"]' ? 'auth = ["corp", "keys"]' : l)),
    // An upstream whose credential the authorization server refuses (a wrong secret).
    '[[upstream]]',
    'id = "bad"',
    'name = "Refused credential upstream"',
    `url = "${credentialed.url}"`,
    '[upstream.credential]',
    'type = "client_credentials"',
    `issuer = "${as.issuer}"`,
    `client_id = "${CLIENTS.upstream.id}"`,
    `client_secret_file = "${secret('wrong', 'not-the-secret')}"`,
    `resource = "${credentialed.url}"`,
    '',
    ...route('/mcp/bad', 'bad'),
  ].join('\n');
  gw = await startGateway({}, { extraToml: `\n${toml}\n` });
});

after(async () => {
  await gw?.stop();
  for (const s of [exchanged, credentialed, keyed]) await s?.stop();
});

/** Every token any test's client held: none may reach an upstream. */
const clientTokens = new Set();

test('the SDK client discovers the gateway, registers, signs in and calls a tool; the upstream gets an exchanged token', async () => {
  const url = gw.at('/mcp/te');
  const unauthenticated = await post(url, undefined, initialize);
  assert.equal(unauthenticated.status, 401);
  const challenge = unauthenticated.headers.get('www-authenticate');
  const metadataUrl = gw.at('/.well-known/oauth-protected-resource/mcp/te');
  assert.equal(challenge, `Bearer resource_metadata="${metadataUrl}", scope="mcp:tools"`);
  assert.deepEqual(await (await fetch(metadataUrl)).json(), {
    resource: url,
    authorization_servers: [as.issuer],
    scopes_supported: ['mcp:tools', 'mcp:admin'],
    bearer_methods_supported: ['header'],
    resource_name: 'Token exchange upstream',
  });

  const { client, provider } = await signedIn(url);
  assert.ok(provider.client?.client_id, 'registered dynamically');
  assert.equal(provider.authorizations.length, 1);
  const asked = provider.authorizations[0].searchParams;
  assert.equal(asked.get('resource'), url, 'the RFC 8707 resource is the gateway route');
  // The scope the 401 asked for (the SDK adds offline_access, which the server offers).
  assert.deepEqual(asked.get('scope').split(' ').filter((s) => s !== 'offline_access'), ['mcp:tools']);
  assert.equal(asked.get('code_challenge_method'), 'S256');
  provider.issued.forEach((t) => clientTokens.add(t));

  const who = JSON.parse(text(await client.callTool({ name: 'whoami', arguments: {} })));
  assert.equal(who.sub, USER, 'the upstream token keeps the user');
  assert.deepEqual(who.act, { sub: CLIENTS.upstream.id }, 'and names the gateway as the actor');
  assert.equal(who.aud, exchanged.url, 'issued for the upstream, which checked its own audience');
  assert.equal(who.scope, 'up:read');
  await client.close();
});

// The step-up: the challenge travels with the refusal itself (it was once carried beside
// it and lost where a phase passed the refusal on alone; the SDK then saw a bare 403).
test('a scope an allow rule needs is asked for with 403 insufficient_scope, and step-up succeeds', async () => {
  const url = gw.at('/mcp/te');
  const { client, transport, provider } = await signedIn(url);
  const before = provider.authorizations.length;
  const reset = await withSignIn(provider, transport, () => client.callTool({ name: 'admin_reset', arguments: {} }), {
    isUnauthorized,
  });
  assert.equal(text(reset), 'reset');
  assert.equal(provider.authorizations.length, before + 1, 'one more sign-in, for the new scope');
  const stepped = provider.authorizations
    .at(-1)
    .searchParams.get('scope')
    .split(' ')
    .filter((s) => s !== 'offline_access')
    .sort();
  assert.deepEqual(stepped, ['mcp:admin', 'mcp:tools']);
  provider.issued.forEach((t) => clientTokens.add(t));

  // The raw exchange the client went through: 403, the header naming held + missing scopes.
  const narrow = provider.issued[0];
  const call = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'admin_reset',
      authorization: `Bearer ${narrow}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': {},
        },
        name: 'admin_reset',
        arguments: {},
      },
    }),
  });
  assert.equal(call.status, 403);
  const challenge = call.headers.get('www-authenticate');
  assert.match(challenge, /error="insufficient_scope"/);
  assert.match(challenge, /scope="mcp:tools mcp:admin"/);
  assert.match(challenge, /resource_metadata="[^"]+\/\.well-known\/oauth-protected-resource\/mcp\/te"/);
  const body = await call.json();
  assert.equal(body.error.data.reason, 'insufficient_scope');
  assert.deepEqual(body.error.data.requiredScopes, ['mcp:admin']);
  await client.close();
});

test('the 1.x SDK client signs in through the same discovery', async () => {
  const url = gw.at('/mcp/st');
  const provider = host();
  let client;
  let transport;
  await withSignIn(
    provider,
    { finishAuth: (code) => transport.finishAuth(code) },
    async () => {
      client = new ClientV1({ name: 'portcullis-interop-oauth-v1', version: '1.0.0' }, { capabilities: {} });
      transport = new TransportV1(new URL(url), { authProvider: provider });
      await client.connect(transport);
    },
    { isUnauthorized, code: true },
  );
  provider.issued.forEach((t) => clientTokens.add(t));
  assert.equal(text(await client.callTool({ name: 'get_room', arguments: {} })), 'room 101');
  const who = JSON.parse(text(await client.callTool({ name: 'whoami', arguments: {} })));
  assert.equal(who.sub, 'static', 'the static upstream got its own key');
  await client.close();
});

test('tokens for another resource, expired, or without the required scope are refused; opaque ones are introspected', async () => {
  const refused = async (path, token, status, why) => {
    const resp = await post(gw.at(path), token, initialize);
    const challenge = resp.headers.get('www-authenticate');
    const body = await resp.json();
    assert.equal(resp.status, status, `${path}: ${JSON.stringify(body)}`);
    assert.ok(challenge.includes(`resource_metadata="${gw.at(`/.well-known/oauth-protected-resource${path}`)}"`), challenge);
    assert.equal(body.error.data.reason, why);
    return challenge;
  };
  const other = await as.clientCredentialsToken(CLIENTS.other, 'http://127.0.0.1:9/mcp');
  clientTokens.add(other.access_token);
  await refused('/mcp/cc', other.access_token, 401, 'invalid_credentials');

  const good = await as.clientCredentialsToken(CLIENTS.other, gw.at('/mcp/cc'));
  clientTokens.add(good.access_token);
  assert.equal((await post(gw.at('/mcp/cc'), good.access_token, initialize)).status, 200);
  // Bound to its route: the same token at another route of the same gateway is refused.
  await refused('/mcp/st', good.access_token, 401, 'invalid_credentials');

  const narrow = await as.clientCredentialsToken(CLIENTS.other, gw.at('/mcp/cc'), 'up:read');
  clientTokens.add(narrow.access_token);
  const stepUp = await refused('/mcp/cc', narrow.access_token, 403, 'insufficient_scope');
  assert.match(stepUp, /error="insufficient_scope"/);
  assert.match(stepUp, /scope="up:read mcp:tools"/);

  const short = await as.clientCredentialsToken(CLIENTS.other, gw.at('/short/mcp'));
  clientTokens.add(short.access_token);
  assert.equal((await post(gw.at('/short/mcp'), short.access_token, initialize)).status, 200);
  await new Promise((r) => setTimeout(r, (SHORT_TTL + 1.5) * 1000));
  const expired = await refused('/short/mcp', short.access_token, 401, 'invalid_credentials');
  assert.match(expired, /error_description="expired"/);

  const opaque = await as.clientCredentialsToken(CLIENTS.other, gw.at('/opaque/mcp'));
  clientTokens.add(opaque.access_token);
  assert.equal(opaque.access_token.split('.').length, 1, 'an opaque token');
  const seenBefore = as.seen.filter((s) => s.endsWith('/introspection')).length;
  assert.equal((await post(gw.at('/opaque/mcp'), opaque.access_token, initialize)).status, 200);
  assert.equal((await post(gw.at('/opaque/mcp'), opaque.access_token, initialize)).status, 200);
  const introspected = as.seen.filter((s) => s.endsWith('/introspection')).length - seenBefore;
  assert.equal(introspected, 1, 'introspected once, then cached');
  await refused('/opaque/mcp', 'not-a-token-the-server-issued', 401, 'invalid_credentials');
});

test('an API key on a route that also takes the authorization server’s tokens is never sent to it', async () => {
  const introspections = () => as.seen.filter((s) => s.endsWith('/introspection')).length;
  const before = introspections();
  assert.equal((await post(gw.at('/opaque/mixed/mcp'), API_KEY, initialize)).status, 200, 'a valid key is the key scheme’s');
  const unknown = `pcl_${randomBytes(32).toString('base64url')}`;
  const resp = await post(gw.at('/opaque/mixed/mcp'), unknown, initialize);
  assert.equal(resp.status, 401);
  assert.equal((await resp.json()).error.data.reason, 'invalid_credentials');
  assert.equal(introspections(), before, 'no API key, known or not, reached the introspection endpoint');
  const opaque = await as.clientCredentialsToken(CLIENTS.other, gw.at('/opaque/mixed/mcp'));
  clientTokens.add(opaque.access_token);
  assert.equal((await post(gw.at('/opaque/mixed/mcp'), opaque.access_token, initialize)).status, 200);
  assert.equal(introspections(), before + 1, 'the server’s own opaque token is introspected');
});

test('a client credentials upstream gets the gateway’s own token', async () => {
  const token = await as.clientCredentialsToken(CLIENTS.other, gw.at('/mcp/cc'));
  clientTokens.add(token.access_token);
  const { client, provider } = await signedIn(gw.at('/mcp/cc'));
  provider.issued.forEach((t) => clientTokens.add(t));
  const who = JSON.parse(text(await client.callTool({ name: 'whoami', arguments: {} })));
  assert.equal(who.sub, CLIENTS.upstream.id, 'the gateway’s own identity');
  assert.equal(who.aud, credentialed.url);
  await client.close();
});

test('an upstream credential the authorization server refuses: 502 naming the upstream, nothing sent upstream', async () => {
  const { access_token: token } = await as.clientCredentialsToken(CLIENTS.other, gw.at('/mcp/bad'));
  clientTokens.add(token);
  const reached = credentialed.seen.length;
  const resp = await post(gw.at('/mcp/bad'), token, initialize);
  const body = await resp.json();
  assert.equal(resp.status, 502, JSON.stringify(body));
  assert.equal(body.error.data.reason, 'upstream_credential_unavailable');
  assert.match(body.error.message, /Refused credential upstream|\bbad\b/);
  assert.equal(credentialed.seen.length, reached, 'the upstream was not asked without a credential');
});

test('no upstream ever received a client’s token', () => {
  assert.ok(clientTokens.size >= 5, `${clientTokens.size} client tokens were used`);
  for (const up of [exchanged, credentialed, keyed]) {
    assert.ok(up.seen.length > 0, 'the upstream was reached');
    for (const auth of up.seen) {
      const token = auth?.replace(/^Bearer /, '');
      assert.ok(!clientTokens.has(token), 'a client token reached an upstream');
    }
  }
});

test('the metadata is served while the authorization server is down', async () => {
  await as.stop();
  const resp = await fetch(gw.at('/.well-known/oauth-protected-resource/mcp/cc'));
  assert.equal(resp.status, 200);
  assert.deepEqual((await resp.json()).authorization_servers, [as.issuer]);
});
});
