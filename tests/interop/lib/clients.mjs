// The official TypeScript SDK clients, connected over real HTTP, with every request
// they send recorded (see recordingFetch). The elicitation handler is the test's
// "person": it gets each question and returns the answer.
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { recordingFetch } from './harness.mjs';

const FORM_AND_URL = { elicitation: { form: {}, url: {} } };

/**
 * TypeScript SDK v2 client in `auto` negotiation mode (server/discover first, the
 * 2025-11-25 initialize handshake only when the server is not a 2026-07-28 one), or
 * `negotiation: 'legacy'` (initialize only: a 2025-11-25 session).
 * `answer(params)` answers each elicitation/create; `asked` lists every question;
 * `headers` go with every request (a caller's credentials).
 */
export async function connectV2(url, answer, { capabilities = FORM_AND_URL, maxRounds, negotiation = 'auto', headers } = {}) {
  const { fetch, wire } = recordingFetch();
  const asked = [];
  const client = new ClientV2(
    { name: 'portcullis-interop-ts-v2-client', version: '1.0.0' },
    { capabilities, versionNegotiation: { mode: negotiation }, ...(maxRounds ? { inputRequired: { maxRounds } } : {}) },
  );
  client.setRequestHandler('elicitation/create', async (request) => {
    asked.push(request.params);
    return answer(request.params);
  });
  const transport = new TransportV2(new URL(url), { fetch, ...(headers ? { requestInit: { headers } } : {}) });
  await client.connect(transport);
  return { client, transport, wire, asked, close: () => client.close() };
}

/** TypeScript SDK 1.x client: 2025-11-25 only (initialize, session, pushed elicitation). */
export async function connectV1(url, answer, { capabilities = FORM_AND_URL, continueAt, headers } = {}) {
  const { fetch, wire } = recordingFetch({ continueAt });
  const asked = [];
  const client = new ClientV1({ name: 'portcullis-interop-ts-v1-client', version: '1.0.0' }, { capabilities });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params);
    return answer(request.params);
  });
  const transport = new TransportV1(new URL(url), { fetch, ...(headers ? { requestInit: { headers } } : {}) });
  await client.connect(transport);
  return { client, transport, wire, asked, close: () => client.close() };
}

/** The JSON text a flow tool answers with (see servers/flows.mjs). */
export function flowOutcome(result) {
  const text = result.content?.find((c) => c.type === 'text')?.text;
  if (text === undefined) throw new Error(`no text in the tool result: ${JSON.stringify(result)}`);
  return JSON.parse(text);
}

/** The property names a form question asks for. */
export function fieldsOf(params) {
  return Object.keys(params.requestedSchema?.properties ?? {});
}

/**
 * The person: accepts each question with a value made from its schema
 * (enum → the `pick` value or the first option, string → `text`, number → 2,
 * boolean → true, URL mode → plain accept).
 */
export function acceptAll({ pick = {}, text = 'Team offsite', email = 'ada@example.com' } = {}) {
  return (params) => {
    if (params.mode === 'url') return { action: 'accept' };
    const content = {};
    for (const [field, schema] of Object.entries(params.requestedSchema.properties)) {
      if (schema.enum) content[field] = pick[field] ?? schema.enum[0];
      else if (schema.type === 'boolean') content[field] = true;
      else if (schema.type === 'integer' || schema.type === 'number') content[field] = 2;
      else if (schema.format === 'email') content[field] = email;
      else content[field] = pick[field] ?? text;
    }
    return { action: 'accept', content };
  };
}

/** Every tools/call the client put on the wire for `tool`. */
export function toolCalls(wire, tool) {
  return wire.filter((w) => w.body?.method === 'tools/call' && w.body.params?.name === tool);
}
