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
//   the provider's own `registerGrantType`: the subject token must be a valid access token
//   of this server (a JWT checked against its own key, an opaque one found in its own
//   store), and the new token (for `resource`, or else `audience`) keeps the user (`sub`)
//   and names the exchanging client as the actor (`act.sub`).
// - Sign-in without a person: the interaction URL signs `alice` in and grants what the
//   client asked for; `authorize(url)` follows the redirects (with the provider's cookies)
//   to the client's redirect URI and returns the redirect's parameters (`code`, `iss`).
// - Registration policy: a dynamically registered client is not limited to the scope it
//   registered with (the SDK registers the first challenge's scope; step-up asks for more).
import { createServer } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
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

const tokenTTL = (_ctx, token) => token.resourceServer?.accessTokenTTL || 600;

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

/**
 * The subject of a token exchange: an access token this server issued and that is still
 * valid. A JWT is checked against the server's own public key (signature, issuer, expiry);
 * an opaque one is looked up in the provider's own store.
 */
async function subjectOf(provider, localKeys, token) {
  if (token.split('.').length === 3) {
    try {
      const { payload } = await jwtVerify(token, localKeys, { issuer: provider.issuer });
      return payload;
    } catch {
      return undefined;
    }
  }
  const stored = await provider.AccessToken.find(token);
  return stored?.isValid ? { sub: stored.accountId, client_id: stored.clientId } : undefined;
}

/** The token exchange grant (RFC 8693 §2.1), as the provider's own grant handler. */
function exchangeHandler(provider, localKeys) {
  return async (ctx) => {
    const { params, client } = ctx.oidc;
    if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
      throw new errors.InvalidRequest('subject_token_type must be an access token');
    }
    if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
      throw new errors.InvalidRequest('only access tokens are issued');
    }
    const subject = await subjectOf(provider, localKeys, params.subject_token);
    if (!subject?.sub) throw new errors.InvalidGrant('subject_token is not a valid access token of this server');
    // The target: `resource` (RFC 8707), else `audience` (RFC 8693 §2.1); either an absolute URI.
    const resource = params.resource || params.audience;
    if (!resource) throw new errors.InvalidTarget('resource or audience is required');
    let info;
    try {
      info = resourceInfo(resource);
    } catch {
      throw new errors.InvalidTarget('resource must be an absolute URI');
    }
    const offered = info.scope.split(' ');
    const wanted = (params.scope || 'up:read').split(' ').filter(Boolean);
    const unknown = wanted.filter((s) => !offered.includes(s));
    if (unknown.length) throw new errors.InvalidScope('requested scope is not offered for this resource', unknown.join(' '));
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
      // The confidential clients (the gateway) may introspect any token; a public client
      // (a host) only its own.
      introspection: {
        enabled: true,
        allowedPolicy: (_ctx, caller, token) => caller.clientAuthMethod !== 'none' || token.clientId === caller.clientId,
      },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx, _client, oneOf) => (oneOf ? oneOf[0] : undefined),
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => resourceInfo(resource),
      },
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    // Access tokens live as long as their resource says (`short/`: SHORT_TTL), however issued.
    ttl: {
      AccessToken: tokenTTL,
      ClientCredentials: tokenTTL,
      RefreshToken: 3600,
      Session: 3600,
      Grant: 3600,
      Interaction: 600,
    },
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
    jwksUri: `${issuer}/jwks`,
    introspectionEndpoint: `${issuer}/token/introspection`,
    /**
     * A token from the client credentials grant (as any client of the server gets one):
     * `(client, resource, scope)` with a client of CLIENTS, or
     * `({clientId, secret, resource, scope})`. The token response (`access_token`, …).
     */
    clientCredentialsToken: (c, resource, scope = 'mcp:tools') => {
      if (c.clientId) {
        resource = c.resource;
        scope = c.scope ?? scope;
        c = { id: c.clientId, secret: c.secret };
      }
      return tokenRequest(`${issuer}/token`, c, { grant_type: 'client_credentials', resource, scope });
    },
    /** RFC 8693 token exchange at this server: `client` trades `subjectToken` for one for `resource`. */
    exchangeToken: (c, subjectToken, resource, scope = 'up:read') =>
      tokenRequest(`${issuer}/token`, c, {
        grant_type: TOKEN_EXCHANGE,
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN_TYPE,
        requested_token_type: ACCESS_TOKEN_TYPE,
        resource,
        scope,
      }),
    /** RFC 7662 introspection, as `client` (the gateway's client). */
    introspect: async (c, token) => {
      const resp = await fetch(`${issuer}/token/introspection`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(c) },
        body: new URLSearchParams({ token }),
      });
      return resp.json();
    },
    /**
     * Alice's access token for `resource` the long way, as a public client would get it:
     * registration (RFC 7591), authorization code with PKCE (S256) and `resource`, the code
     * redeemed at the token endpoint. For the tests that need a user's token without an
     * SDK in between.
     */
    userToken: (resource, scope = 'mcp:tools') => userToken(issuer, resource, scope),
    /**
     * Follows an authorization URL through sign-in, as a browser would; the parameters of
     * the redirect to the client (`code`, `iss`, `state`) as URLSearchParams.
     */
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

/** client_secret_basic (RFC 6749 §2.3.1: each part form-encoded). */
const basic = (c) =>
  `Basic ${Buffer.from(`${encodeURIComponent(c.id)}:${encodeURIComponent(c.secret)}`).toString('base64')}`;

export async function tokenRequest(endpoint, c, form) {
  const resp = await fetch(endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: basic(c),
    },
    body: new URLSearchParams(form),
  });
  const body = await resp.json();
  if (!resp.ok) throw new Error(`token request failed: ${resp.status} ${JSON.stringify(body)}`);
  return body;
}

async function userToken(issuer, resource, scope) {
  const redirectUri = 'http://127.0.0.1:1/callback';
  const reg = await fetch(`${issuer}/reg`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'portcullis-interop-direct',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }),
  });
  const client = await reg.json();
  if (!reg.ok) throw new Error(`registration failed: ${reg.status} ${JSON.stringify(client)}`);
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const start = new URL(`${issuer}/auth`);
  for (const [k, v] of Object.entries({
    client_id: client.client_id,
    response_type: 'code',
    redirect_uri: redirectUri,
    scope,
    resource,
    state: randomBytes(8).toString('hex'),
    code_challenge: challenge,
    code_challenge_method: 'S256',
  })) {
    start.searchParams.set(k, v);
  }
  const callback = await authorize(start);
  const resp = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: client.client_id,
      code: callback.get('code'),
      redirect_uri: redirectUri,
      code_verifier: verifier,
      resource,
    }),
  });
  const body = await resp.json();
  if (!resp.ok) throw new Error(`code redemption failed: ${resp.status} ${JSON.stringify(body)}`);
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
