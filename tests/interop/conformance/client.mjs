// The client the conformance suite's client scenarios run: the TypeScript SDK 1.x client
// (@modelcontextprotocol/sdk, 2025-11-25), doing what each scenario's server expects.
// The suite appends the server URL and names the scenario in MCP_CONFORMANCE_SCENARIO.
// With --via-gateway the client starts a gateway process in front of that URL and talks
// to the scenario server through it.
//
// The `auth/*` scenarios (a control, run directly only: see auth_client.mjs, the same with
// the v2 client): the in-memory OAuth host of the interop tests signs in headlessly (the
// suite's authorization server redirects at once with the code), or, for the `extension`
// scenarios, the SDK's client-credentials providers get a token with no person.
//
//   conformance client --command "node client.mjs [--via-gateway]" --scenario tools_call
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider, PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startGateway } from '../lib/harness.mjs';
import { scenarioInput, machineFlow, personHost, exercise } from './auth_common.mjs';

// The scenario servers announce http://localhost:PORT; the gateway is told 127.0.0.1.
const serverUrl = process.argv.at(-1).replace('//localhost:', '//127.0.0.1:');
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';

/** The person accepts the form as offered: every field at its default. */
function acceptDefaults(request) {
  const content = {};
  for (const [field, schema] of Object.entries(request.params.requestedSchema?.properties ?? {})) {
    if (schema.default !== undefined) content[field] = schema.default;
  }
  return { action: 'accept', content };
}

const SCENARIOS = {
  initialize: async () => {},
  tools_call: async (client) => {
    await client.listTools();
    await client.callTool({ name: 'add_numbers', arguments: { a: 5, b: 3 } });
  },
  'elicitation-sep1034-client-defaults': async (client) => {
    await client.listTools();
    await client.callTool({ name: 'test_client_elicitation_defaults', arguments: {} });
  },
  'sse-retry': async (client) => {
    await client.listTools();
    await client.callTool({ name: 'test_reconnection', arguments: {} });
  },
};

/** An `auth/*` scenario: sign in (or get a machine token), then list and call the tools. */
async function authScenario() {
  const NAME = 'portcullis-conformance-client';
  // The URL as the suite gives it: the metadata names the resource with that host.
  const { context, serverUrl: resourceUrl } = scenarioInput();
  const flow = machineFlow(scenario);
  if (flow === 'cross_app_access') {
    console.error('client.mjs: SDK 1.x has no cross-app access (ID-JAG) provider');
    process.exit(2);
  }
  const machine = {
    client_credentials: () =>
      new ClientCredentialsProvider({ clientId: context.client_id, clientSecret: context.client_secret, clientName: NAME }),
    private_key_jwt: () =>
      new PrivateKeyJwtProvider({
        clientId: context.client_id,
        privateKey: context.private_key_pem,
        algorithm: context.signing_algorithm,
        clientName: NAME,
      }),
  }[flow];
  const host = machine ? undefined : personHost(NAME, context, scenario);
  const isUnauthorized = (e) => e instanceof UnauthorizedError;
  // SDK 1.x: finishAuth takes the bare code.
  const operation = (transport, step) =>
    host ? host.operation(transport, step, { isUnauthorized, code: true }) : step();
  let client;
  let transport;
  await operation({ finishAuth: (code) => transport.finishAuth(code) }, async () => {
    client = new Client({ name: NAME, version: '1.0.0' }, { capabilities: {} });
    transport = new StreamableHTTPClientTransport(resourceUrl, { authProvider: host ?? machine() });
    await client.connect(transport);
  });
  try {
    await exercise(client, (step) => operation(transport, step));
  } finally {
    await client.close();
  }
}

if (scenario.startsWith('auth/')) {
  if (process.argv.includes('--via-gateway')) {
    // The gateway is itself the protected resource: it signs clients in to its own
    // authorization server and never forwards their tokens, so it cannot stand in front
    // of a scenario server's sign-in.
    console.error('client.mjs: the auth/* scenarios run directly, not through the gateway');
    process.exit(2);
  }
  await authScenario();
  process.exit(0);
}
const run = SCENARIOS[scenario];
if (!run) {
  console.error(`client.mjs: no client behaviour for scenario ${JSON.stringify(scenario)}`);
  process.exit(2);
}
const gateway = process.argv.includes('--via-gateway') ? await startGateway({ scenario: serverUrl }) : undefined;
const url = new URL(gateway ? gateway.url('scenario') : serverUrl);
const client = new Client(
  { name: 'portcullis-conformance-client', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => acceptDefaults(request));
try {
  await client.connect(new StreamableHTTPClientTransport(url));
  await run(client);
} finally {
  await client.close();
  await gateway?.stop();
}
