// The control for the conformance suite's `auth/*` client scenarios: the TypeScript SDK v2
// client with the same kind of in-memory OAuth provider test/oauth.test.mjs signs in to the
// gateway with, run directly against each scenario's own authorization server and MCP
// server. It shows which parts of the MCP authorization spec the client the OAuth interop
// tests use gets right on its own; the gateway is not in this path (it is the protected
// resource, so it cannot stand between a client and another resource's sign-in).
//
// The suite appends the server URL and names the scenario in MCP_CONFORMANCE_SCENARIO; a
// pre-registered client's id and secret come in MCP_CONFORMANCE_CONTEXT.
//
//   conformance client --command "node auth_client.mjs" --scenario auth/metadata-default
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';

const serverUrl = new URL(process.argv.at(-1));
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || '{}');

/** The suite's authorization endpoint answers at once with a redirect carrying the code. */
class HeadlessProvider {
  constructor() {
    this.redirectUrl = 'http://127.0.0.1:1/callback';
    this.clientMetadata = {
      client_name: 'portcullis-conformance-auth-client',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
    if (context.client_id) {
      this.client = { client_id: context.client_id, client_secret: context.client_secret };
    }
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  async redirectToAuthorization(url) {
    const resp = await fetch(url, { redirect: 'manual' });
    const location = resp.headers.get('location');
    if (!location) throw new Error(`the authorization endpoint answered ${resp.status} without a redirect`);
    this.callback = new URL(location, url).searchParams;
  }
  saveCodeVerifier(v) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(state) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'tokens') this.saved = undefined;
    if (scope === 'all' || scope === 'client') this.client = undefined;
  }
}

/** Runs `step`; a sign-in it needs is completed and `step` tried again (a few times). */
async function signingIn(provider, transport, step) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await step();
    } catch (e) {
      if (!(e instanceof UnauthorizedError) || !provider.callback || attempt > 3) throw e;
      const callback = provider.callback;
      provider.callback = undefined;
      await transport.finishAuth(callback);
    }
  }
}

const provider = new HeadlessProvider();
let client;
let transport;
for (let attempt = 0; attempt < 4 && !client; attempt++) {
  const candidate = new Client({ name: 'portcullis-conformance-auth-client', version: '1.0.0' }, { capabilities: {} });
  transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  try {
    await candidate.connect(transport);
    client = candidate;
  } catch (e) {
    if (!(e instanceof UnauthorizedError) || !provider.callback) throw e;
    const callback = provider.callback;
    provider.callback = undefined;
    await transport.finishAuth(callback);
  }
}
if (!client) throw new Error('could not sign in');
try {
  const { tools } = await signingIn(provider, transport, () => client.listTools());
  for (const tool of tools) {
    await signingIn(provider, transport, () => client.callTool({ name: tool.name, arguments: {} })).catch(() => {});
  }
} finally {
  await client.close();
}
