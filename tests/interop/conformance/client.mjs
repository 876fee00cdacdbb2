// The client the conformance suite's client scenarios run: the TypeScript SDK 1.x client
// (@modelcontextprotocol/sdk, 2025-11-25), doing what each scenario's server expects.
// The suite appends the server URL and names the scenario in MCP_CONFORMANCE_SCENARIO.
// With --via-gateway the client starts a gateway process in front of that URL and talks
// to the scenario server through it.
//
//   conformance client --command "node client.mjs [--via-gateway]" --scenario tools_call
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startGateway } from '../lib/harness.mjs';

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
