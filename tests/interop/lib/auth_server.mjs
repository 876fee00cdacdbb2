// A real OAuth 2.1 / OpenID Connect authorization server for the OAuth interop tests:
// oidc-provider (npm, a certified OpenID Connect provider) on 127.0.0.1, configured as an
// MCP deployment's would be. Nothing here mints a token by hand: every token comes from
// the provider's own endpoints and models.
//
// - Dynamic client registration (the MCP SDK clients register themselves), PKCE.
// - Resource indicators (RFC 8707): a token asked for resource R is a JWT with `aud` R,
//   signed with the provider's key (its JWKS is published); resources under
//   `opaque/` get opaque tokens (the gateway introspects them, RFC 7662).
// - `short/` resources get tokens that live SHORT_TTL seconds (the expired-token test).
// - Client credentials, introspection, and an RFC 8693 token exchange grant registered with
//   the provider's own `registerGrantType`: the subject token is checked against the
//   provider's own key, and the new token keeps the user (`sub`) and names the exchanging
//   client as the actor (`act.sub`).
// - Sign-in without a person: the interaction URL signs `alice` in and grants what the
//   client asked for; `authorize(url)` follows the redirects (with the provider's cookies)
//   to the client's redirect URI and returns the `code`.
import { createServer } from 'node:http';
import Provider, { errors } from 'oidc-provider';
import { generateKeyPair, exportJWK, createLocalJWKSet, jwtVerify } from 'jose';

export const USER = 'alice';
export const SHORT_TTL = 2;
export const SCOPES = ['mcp:tools', 'mcp:admin', 'up:read'];

/** Pre-registered confidential clients (client_secret_basic). */
export const CLIENTS = {
  gateway: { id: 'gateway', secret: 'gateway-introspection-secret-0123456789' },
  upstream: { id: 'gw-up', secret: 'gw-up-client-secret-0123456789abcdef' },
  other: { id: 'other-app', secret: 'other-app-client-secret-0123456789ab' },
};

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

function resourceInfo(resource) {
  const url = new URL(resource);
  return {
    scope: SCOPES.join(' '),
    audience: resource,
    accessTokenTTL: url.pathname.includes('/short/') ? SHORT_TTL : 600,
    accessTokenFormat: url.pathname.includes('/opaque/') ? 'opaque' : 'jwt',
    jwt: { sign: { alg: 'RS256' } },
  };
}

/** The token exchange grant (RFC 8693 §2.1), as the provider's own grant handler. */
function exchangeHandler(provider, localKeys) {
  return async (ctx) => {
    const { params, client } = ctx.oidc;
    if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
      throw new errors.InvalidRequest('subject_token_type must be an access token');
    }
    let subject;
    try {
      ({ payload: subject } = await jwtVerify(params.subject_token, localKeys, { issuer: provider.issuer }));
    } catch {
      throw new errors.InvalidGrant('subject_token is not an access token of this server');
    }
    const resource = params.resource;
    if (!resource) throw new errors.InvalidTarget('resource is required');
    const info = resourceInfo(resource);
    const wanted = (params.scope || 'up:read').split(' ');
    const grant = new provider.Grant({ accountId: subject.sub, clientId: client.clientId });
    grant.addResourceScope(resource, wanted.join(' '));
    const grantId = await grant.save();
    const token = new provider.AccessToken({
      accountId: subject.sub,
      client,
      grantId,
      scope: wanted.join(' '),
    });
    token.resourceServer = new provider.ResourceServer(resource, info);
    const value = await token.save();
    ctx.body = {
      access_token: value,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: 'Bearer',
      expires_in: token.expiration,
      scope: token.scope,
    };
  };
}

async function signingKey() {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, kid: 'test-rs256', alg: 'RS256', use: 'sig' };
}

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
}

/** Starts the server; `stop()` closes it (and its connections). */
export async function startAuthServer() {
  const server = createServer();
  const port = await listen(server);
  const issuer = `http://127.0.0.1:${port}`;
  const key = await signingKey();
  const { d, p, q, dp, dq, qi, ...publicKey } = key;
  const localKeys = createLocalJWKSet({ keys: [publicKey] });
  const client = (c, extra) => ({
    client_id: c.id,
    client_secret: c.secret,
    redirect_uris: [],
    response_types: [],
    grant_types: ['client_credentials', TOKEN_EXCHANGE],
    scope: SCOPES.join(' '),
    ...extra,
  });
  const provider = new Provider(issuer, {
    jwks: { keys: [key] },
    clients: [client(CLIENTS.gateway), client(CLIENTS.upstream), client(CLIENTS.other)],
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    scopes: ['openid', 'offline_access', ...SCOPES],
    pkce: { required: () => true },
    clientDefaults: { token_endpoint_auth_method: 'client_secret_basic' },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx, _client, oneOf) => (oneOf ? oneOf[0] : undefined),
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => resourceInfo(resource),
      },
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    ttl: { AccessToken: 600, Session: 3600, Grant: 3600, Interaction: 600 },
    // An exchanged token names the exchanging client as the actor (RFC 8693 §4.1).
    extraTokenClaims: (ctx) =>
      ctx.oidc.params?.grant_type === TOKEN_EXCHANGE ? { act: { sub: ctx.oidc.client.clientId } } : undefined,
  });
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    exchangeHandler(provider, localKeys),
    new Set(['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope']),
  );
  // What the provider was asked, by endpoint (paths only), for the tests' assertions.
  const seen = [];
  const callback = provider.callback();
  server.on('request', async (req, res) => {
    seen.push(`${req.method} ${new URL(req.url, issuer).pathname}`);
    if (req.url.startsWith('/interaction/')) {
      try {
        await signIn(provider, req, res);
      } catch (e) {
        res.statusCode = 500;
        res.end(String(e));
      }
      return;
    }
    if (req.method === 'POST' && req.url === '/reg') {
      // This deployment's registration policy: a registered client may ask for any scope
      // of a resource (as Keycloak gives dynamically registered clients its optional
      // scopes). The SDK registers the first challenge's scope; the rest are for step-up.
      let text = '';
      for await (const chunk of req) text += chunk;
      const metadata = JSON.parse(text || '{}');
      delete metadata.scope;
      req.body = metadata;
    }
    callback(req, res);
  });
  const sockets = new Set();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return {
    issuer,
    provider,
    seen,
    /** Stops answering (the port is closed). */
    stop: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
    tokenEndpoint: `${issuer}/token`,
    /** A token from the client credentials grant (as any client of the server gets one). */
    clientCredentialsToken: (c, resource, scope = 'mcp:tools') =>
      tokenRequest(`${issuer}/token`, c, { grant_type: 'client_credentials', resource, scope }),
    /** Follows an authorization URL through sign-in; the redirect's parameters (`code`, `iss`). */
    authorize: (url) => authorize(url),
  };
}

/** The interaction: alice signs in and grants what was asked. */
async function signIn(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params } = details;
  let grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: USER, clientId: params.client_id });
  if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
  if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(prompt.details.missingResourceScopes || {})) {
    grant.addResourceScope(resource, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(
    req,
    res,
    { login: { accountId: USER }, consent: { grantId } },
    { mergeWithLastSubmission: false },
  );
}

export async function tokenRequest(endpoint, c, form) {
  const resp = await fetch(endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(c.id)}:${encodeURIComponent(c.secret)}`).toString('base64')}`,
    },
    body: new URLSearchParams(form),
  });
  const body = await resp.json();
  if (!resp.ok) throw new Error(`token request failed: ${resp.status} ${JSON.stringify(body)}`);
  return body;
}

/** A browser's part of the authorization code flow: follow redirects with cookies. */
async function authorize(start) {
  const jar = new Map();
  let url = new URL(start);
  for (let hop = 0; hop < 20; hop++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const resp = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const c of resp.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      jar.set(pair.slice(0, i), pair.slice(i + 1));
    }
    const location = resp.headers.get('location');
    if (!location) throw new Error(`sign-in stopped at ${url.pathname}: ${resp.status} ${await resp.text()}`);
    const next = new URL(location, url);
    if (next.searchParams.get('code')) return next.searchParams;
    const error = next.searchParams.get('error');
    if (error) throw new Error(`authorization failed: ${error} ${next.searchParams.get('error_description')}`);
    url = next;
  }
  throw new Error('too many redirects');
}

// Run as a program (the Python SDK tests): `node auth_server.mjs` prints
// "authorization server http://127.0.0.1:PORT" and serves until it is stopped.
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const server = await startAuthServer();
  console.log(`authorization server ${server.issuer}`);
  for (const signal of ['SIGTERM', 'SIGINT']) process.once(signal, () => server.stop().then(() => process.exit(0)));
}
