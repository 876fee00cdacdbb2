// A control for the conformance suite's `auth/*` client scenarios: the TypeScript SDK v2
// client (@modelcontextprotocol/client) with the in-memory OAuth host test/oauth.test.mjs
// signs in to the gateway with, run directly against each scenario's own authorization
// server and MCP server. It shows which parts of the MCP authorization spec the client the
// OAuth interop tests use gets right on its own; the gateway is not in this path (it is the
// protected resource, so it cannot stand between a client and another resource's sign-in).
// client.mjs is the same control with the SDK 1.x client.
//
// The suite appends the server URL and names the scenario in MCP_CONFORMANCE_SCENARIO; a
// pre-registered client's id and secret (and the `extension` scenarios' keys and IdP token)
// come in MCP_CONFORMANCE_CONTEXT. The `extension` scenarios run the SDK's own machine
// providers (client credentials with a secret or a private-key JWT; cross-app access).
//
//   conformance client --command "node auth_client.mjs" --scenario auth/metadata-default
import {
  Client,
  StreamableHTTPClientTransport,
  UnauthorizedError,
  ClientCredentialsProvider,
  PrivateKeyJwtProvider,
  CrossAppAccessProvider,
  requestJwtAuthorizationGrant,
} from '@modelcontextprotocol/client';
import { scenarioInput, machineFlow, personHost, exercise } from './auth_common.mjs';

const NAME = 'portcullis-conformance-auth-client';
const { serverUrl, scenario, context } = scenarioInput();
const isUnauthorized = (e) => e instanceof UnauthorizedError;

function machineProvider(flow) {
  const common = { clientId: context.client_id, clientName: NAME };
  if (flow === 'client_credentials') {
    return new ClientCredentialsProvider({ ...common, clientSecret: context.client_secret });
  }
  if (flow === 'private_key_jwt') {
    const key = { privateKey: context.private_key_pem, algorithm: context.signing_algorithm };
    return new PrivateKeyJwtProvider({ ...common, ...key });
  }
  // Cross-app access (SEP-990): the person's ID token from the enterprise IdP, exchanged
  // there (RFC 8693) for an ID-JAG for this server's authorization server, then a JWT
  // bearer grant (RFC 7523) with this client's secret.
  return new CrossAppAccessProvider({
    ...common,
    clientSecret: context.client_secret,
    assertion: async (ctx) =>
      (
        await requestJwtAuthorizationGrant({
          tokenEndpoint: context.idp_token_endpoint,
          audience: ctx.authorizationServerUrl,
          resource: ctx.resourceUrl,
          idToken: context.idp_id_token,
          clientId: context.idp_client_id,
          scope: ctx.scope,
          fetchFn: ctx.fetchFn,
        })
      ).jwtAuthGrant,
  });
}

const flow = machineFlow(scenario);
const host = flow ? undefined : personHost(NAME, context, scenario);
// A machine client gets its token without a redirect: no sign-in to finish.
const operation = (transport, step) =>
  host ? host.operation(transport, step, { isUnauthorized }) : step();
let client;
let transport;
await operation({ finishAuth: (callback) => transport.finishAuth(callback) }, async () => {
  // A failed connect leaves the client unusable: each attempt gets a new one.
  client = new Client({ name: NAME, version: '1.0.0' }, { capabilities: {} });
  transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: host ?? machineProvider(flow) });
  await client.connect(transport);
});
try {
  await exercise(client, (step) => operation(transport, step));
} finally {
  await client.close();
}
