// The flows of flows.json served by the TypeScript SDK v2 (@modelcontextprotocol/server)
// as a 2026-07-28-ONLY server: `createMcpHandler(factory, {legacy: 'reject'})`, so a
// 2025-11-25 `initialize` is refused with the SDK's unsupported-protocol-version error
// and `server/discover` lists no 2025 version. Each question is asked through
// `input_required` (MRTR). It keeps what each request carried (see `seen`), so a test
// can check what a gateway in front of it sent upstream; never the values answered.
//
//   node ts_v2_modern_server.mjs     listens on 127.0.0.1, a port the OS picks,
// prints "listening http://127.0.0.1:PORT/mcp"; or import { serveModernOnly }.
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { McpServer, createMcpHandler, inputRequired } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import * as z from 'zod';
import { FLOW_NAMES, flowDescription, roundsOf, step, outcomeText, encodeState, decodeState } from './flows.mjs';

const ARGUMENTS = {
  book: z.object({ hint: z.string() }),
  endless: z.object({ rounds: z.number().int().min(1).max(50) }),
};
const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const CAPS_KEY = 'io.modelcontextprotocol/clientCapabilities';

function question(q) {
  if (q.url) return inputRequired.elicitUrl({ message: q.message, url: q.url });
  return inputRequired.elicit({ message: q.message, requestedSchema: q.schema });
}

function flowTool(name) {
  return async (args, ctx) => {
    const rounds = roundsOf(name, args);
    const result = step(rounds, decodeState(ctx.mcpReq.requestState()), ctx.mcpReq.inputResponses);
    if (result.done) return { content: [{ type: 'text', text: outcomeText(name, result.done) }] };
    const inputRequests = Object.fromEntries(Object.entries(result.ask).map(([key, q]) => [key, question(q)]));
    return inputRequired({ inputRequests, requestState: encodeState(result.progress) });
  };
}

function factory() {
  const server = new McpServer(
    { name: 'portcullis-interop-ts-v2-modern', version: '2.4.0-modern' },
    { instructions: 'Flows of flows.json; 2026-07-28 only.' },
  );
  for (const name of FLOW_NAMES) {
    server.registerTool(
      name,
      { description: flowDescription(name), inputSchema: ARGUMENTS[name] ?? z.object({}) },
      flowTool(name),
    );
  }
  return server;
}

/** What one request carried: its headers that matter and the shape of its body (no answer values). */
function summary(req, body) {
  let message;
  try {
    message = JSON.parse(body);
  } catch {
    return { httpMethod: req.method, unparsed: true };
  }
  const params = message.params ?? {};
  const responses = params.inputResponses ?? {};
  return {
    httpMethod: req.method,
    protocolHeader: req.headers['mcp-protocol-version'],
    methodHeader: req.headers['mcp-method'],
    nameHeader: req.headers['mcp-name'],
    sessionHeader: req.headers['mcp-session-id'],
    id: message.id,
    method: message.method,
    name: params.name,
    version: params._meta?.[VERSION_KEY],
    capabilities: params._meta?.[CAPS_KEY],
    protocolVersionParam: params.protocolVersion,
    answered: Object.fromEntries(Object.entries(responses).map(([k, r]) => [k, r?.action])),
    requestState: params.requestState,
  };
}

/** Serve on 127.0.0.1 (port 0: the OS picks); `seen` lists every request, in order. */
export async function serveModernOnly({ port = 0 } = {}) {
  const seen = [];
  const handle = toNodeHandler(createMcpHandler(factory, { legacy: 'reject' }));
  const listener = http.createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    seen.push(summary(req, body));
    let parsed;
    try {
      parsed = body ? JSON.parse(body) : undefined;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }));
    }
    await handle(req, res, parsed);
  });
  await new Promise((resolve) => listener.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${listener.address().port}/mcp`,
    seen,
    stop: () => new Promise((resolve) => listener.close(resolve).closeAllConnections()),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const server = await serveModernOnly({ port: Number(process.env.PORT ?? 0) });
  console.log(`listening ${server.url}`);
}
