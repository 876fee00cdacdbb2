// What the two control clients for the conformance suite's `auth/*` client scenarios share
// (client.mjs, the TypeScript SDK 1.x client; auth_client.mjs, the v2 client): the host's
// side of a sign-in with no person, and what one scenario asks of the client.
//
// The suite's authorization server answers GET /authorize at once with a 302 to the
// redirect URI carrying `code` (and `state`, `iss`); playing the browser is reading that
// Location. The host (lib/oauth_host.mjs, the same in-memory host the OAuth interop tests
// sign in to the gateway with) keeps the callback for the SDK's finishAuth.
import { MemoryOAuthHost, withSignIn } from '../lib/oauth_host.mjs';

/** The URL-based client id (SEP-991) the suite's authorization server in auth/basic-cimd
 * expects (the SDKs use one only when the server advertises
 * client_id_metadata_document_supported). Given in that scenario only: elsewhere (as in
 * auth/offline-access-scope) the suite would try to fetch the document from that host,
 * which is neither resolvable nor 127.0.0.1; there the host registers (DCR) instead. */
export const CLIENT_METADATA_URL = 'https://conformance-test.local/client-metadata.json';

/** Sign-ins a host allows for one operation before it gives up (the spec's "clients SHOULD
 * implement retry limits"; the suite's auth/scope-retry-limit allows 3). */
export const SIGN_INS_PER_OPERATION = 3;

/** What the suite hands a scenario's client: the server URL (last argument) and context. */
export function scenarioInput() {
  return {
    serverUrl: new URL(process.argv.at(-1)),
    scenario: process.env.MCP_CONFORMANCE_SCENARIO ?? '',
    context: JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || '{}'),
  };
}

/** The `extension` scenarios need a machine client, not a person's sign-in. */
export function machineFlow(scenario) {
  return {
    'auth/client-credentials-basic': 'client_credentials',
    'auth/client-credentials-jwt': 'private_key_jwt',
    'auth/cross-app-access-complete-flow': 'cross_app_access',
  }[scenario];
}

/** The browser: follows nothing, reads the authorization endpoint's redirect. */
async function followRedirect(url) {
  const resp = await fetch(url, { redirect: 'manual' });
  const location = resp.headers.get('location');
  if (!location) throw new Error(`the authorization endpoint answered ${resp.status} without a redirect`);
  return new URL(location, url).searchParams;
}

/** A host for a person's sign-in: pre-registered when the scenario says so (context
 * client_id/client_secret), otherwise registering (DCR) or using its metadata URL (CIMD). */
export function personHost(name, context, scenario) {
  let signIns = 0;
  const registered = context.client_id
    ? { client_id: context.client_id, client_secret: context.client_secret }
    : undefined;
  const host = new MemoryOAuthHost(
    async (url) => {
      if (++signIns > SIGN_INS_PER_OPERATION) {
        throw new Error(`${name}: gave up after ${SIGN_INS_PER_OPERATION} sign-ins for one operation`);
      }
      return followRedirect(url);
    },
    { name, registered },
  );
  if (scenario === 'auth/basic-cimd') host.clientMetadataUrl = CLIENT_METADATA_URL;
  /** Runs one operation (connect, a list, a call), signing in as often as it asks. */
  host.operation = (transport, step, options) => {
    signIns = 0;
    return withSignIn(host, transport, step, options);
  };
  return host;
}

/**
 * The scenario's traffic once connected: list the tools and call each (the step-up
 * scenarios ask for more scope on a call than on a list). A call's failure is the
 * scenario's verdict to give, not the client's.
 */
export async function exercise(client, operation) {
  const { tools } = await operation(() => client.listTools());
  for (const tool of tools) {
    await operation(() => client.callTool({ name: tool.name, arguments: {} })).catch((e) =>
      console.error(`call ${tool.name}: ${e.message}`),
    );
  }
}
