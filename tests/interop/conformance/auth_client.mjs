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
import { MemoryOAuthHost, withSignIn } from '../lib/oauth_host.mjs';

const serverUrl = new URL(process.argv.at(-1));
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || '{}');

/** The suite's authorization endpoint answers at once with a redirect carrying the code. */
async function followRedirect(url) {
  const resp = await fetch(url, { redirect: 'manual' });
  const location = resp.headers.get('location');
  if (!location) throw new Error(`the authorization endpoint answered ${resp.status} without a redirect`);
  return new URL(location, url).searchParams;
}

const registered = context.client_id ? { client_id: context.client_id, client_secret: context.client_secret } : undefined;
const host = new MemoryOAuthHost(followRedirect, { name: 'portcullis-conformance-auth-client', registered });
const isUnauthorized = (e) => e instanceof UnauthorizedError;
let client;
let transport;
await withSignIn(
  host,
  { finishAuth: (callback) => transport.finishAuth(callback) },
  async () => {
    client = new Client({ name: 'portcullis-conformance-auth-client', version: '1.0.0' }, { capabilities: {} });
    transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: host });
    await client.connect(transport);
  },
  { isUnauthorized },
);
try {
  const { tools } = await withSignIn(host, transport, () => client.listTools(), { isUnauthorized });
  for (const tool of tools) {
    await withSignIn(host, transport, () => client.callTool({ name: tool.name, arguments: {} }), { isUnauthorized }).catch(
      () => {},
    );
  }
} finally {
  await client.close();
}
