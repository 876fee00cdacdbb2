// A 2025-11-25-only MCP server on the TypeScript SDK 1.x (@modelcontextprotocol/sdk), like
// ts_v1_server.mjs, with every flow of flows.json as a tool: each question of a flow is
// pushed as an `elicitation/create` request during the call (one at a time, in the order
// of the flow), and the tool answers with the flows' outcome text. Plus `echo`.
//
// ts_v1_server.mjs serves only `book` and `echo`; the bridge's tests (a 2026-07-28 client
// through the gateway, tests/python/test_bridge_legacy_upstream.py) also need several
// rounds, a password form, the round limit, and to see what the server received.
//
// For the tests it says what it received (never a value typed into a form):
//   GET /received  [{http, method, session, sid, version, name, caps, protocolVersion}]
//                  every HTTP request at /mcp: `session` whether it carried an
//                  Mcp-Session-Id (`sid`: which one), `version` its MCP-Protocol-Version
//                  header, `caps` and `protocolVersion` those of an `initialize`
//   GET /calls     [{tool, session, replies: [{key, action, fields} | {key, error, reason}], end,
//                  aborted}] every tools/call of a flow: how each pushed question was
//                  answered (`fields`: the names of the fields it got, never their values; `error`: the JSON-RPC error code the push got, or "not sent"
//                  when the SDK refused to push it; `reason` its data.reason), and how the call ended ("result", "error", or null while
//                  it still runs)
//   POST /forget   ends every session, as a restart would (their ids then get 404)
//
//   node ts_v1_flows_server.mjs     listens on 127.0.0.1, a port the OS picks
// prints "listening http://127.0.0.1:PORT/mcp" once it accepts connections.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import * as z from 'zod';
import { FLOW_NAMES, roundsOf, outcomeText, flowDescription } from './flows.mjs';

// How long a pushed question waits for its answer (the SDK's default is 60 s).
const PUSH_TIMEOUT_MS = Number(process.env.PUSH_TIMEOUT_MS ?? 30000);

const received = [];
const calls = [];

const ARGS = {
  book: { hint: z.string().optional() },
  endless: { rounds: z.number().int().min(1).max(50).optional() },
};

function question(q) {
  return q.url
    ? { mode: 'url', message: q.message, url: q.url, elicitationId: randomUUID() }
    : { mode: 'form', message: q.message, requestedSchema: q.schema };
}

function text(tool, outcome) {
  return { content: [{ type: 'text', text: outcomeText(tool, outcome) }] };
}

function buildServer() {
  const server = new McpServer(
    { name: 'portcullis-interop-ts-v1-flows', version: '1.0.0' },
    { instructions: 'Test server: the question flows of flows.json, asked as pushed requests.' },
  );
  for (const name of FLOW_NAMES) {
    server.registerTool(name, { description: flowDescription(name), inputSchema: ARGS[name] ?? {} }, async (args, extra) => {
      const call = { tool: name, session: extra.sessionId ?? null, replies: [], end: null, aborted: false };
      calls.push(call);
      extra.signal.addEventListener('abort', () => {
        call.aborted = true;
      });
      const answers = {};
      for (const round of roundsOf(name, args)) {
        for (const [key, q] of Object.entries(round)) {
          let reply;
          try {
            // On the call's own stream (see ts_v1_server.mjs).
            reply = await server.server.elicitInput(question(q), {
              relatedRequestId: extra.requestId,
              timeout: PUSH_TIMEOUT_MS,
            });
          } catch (error) {
            // A JSON-RPC error answer has a numeric code; the SDK's own refusal to send
            // (a session without the elicitation capability) has none.
            const code = typeof error?.code === 'number' ? error.code : 'not sent';
            call.replies.push({ key, error: code, reason: error?.data?.reason ?? null });
            call.end = 'error';
            throw error;
          }
          call.replies.push({ key, action: reply.action, fields: Object.keys(reply.content ?? {}).sort() });
          if (reply.action !== 'accept') {
            call.end = 'result';
            return text(name, { stopped: { key, action: reply.action } });
          }
          answers[key] = reply.content ?? null;
        }
      }
      call.end = 'result';
      return text(name, { answers });
    });
  }
  server.registerTool(
    'echo',
    { description: 'Answers with its text.', inputSchema: { text: z.string() } },
    async ({ text: said }) => ({ content: [{ type: 'text', text: said }] }),
  );
  return server;
}

const sessions = new Map(); // Mcp-Session-Id -> transport

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks).toString('utf8');
  return body ? JSON.parse(body) : undefined;
}

function refuse(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message } }));
}

function record(req, body) {
  const params = body && typeof body === 'object' && typeof body.params === 'object' ? body.params ?? {} : {};
  let method = null;
  if (body && typeof body === 'object') method = body.method ?? ('id' in body ? '(response)' : null);
  received.push({
    http: req.method,
    method,
    session: Boolean(req.headers['mcp-session-id']),
    sid: req.headers['mcp-session-id'] ?? null,
    version: req.headers['mcp-protocol-version'] ?? null,
    name: params.name ?? null,
    caps: method === 'initialize' ? params.capabilities ?? null : null,
    protocolVersion: method === 'initialize' ? params.protocolVersion ?? null : null,
  });
}

function sendJson(res, value) {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

async function handle(req, res) {
  const path = new URL(req.url, 'http://localhost').pathname;
  if (req.method === 'GET' && path === '/received') return sendJson(res, received);
  if (req.method === 'GET' && path === '/calls') return sendJson(res, calls);
  if (req.method === 'POST' && path === '/forget') {
    // As after a restart: every session ends; their ids get 404 from now on.
    const ended = [...sessions.values()];
    sessions.clear();
    await Promise.all(ended.map((t) => t.close()));
    return sendJson(res, { ended: ended.length });
  }
  if (path !== '/mcp') return refuse(res, 404, 'Not found');
  const sessionId = req.headers['mcp-session-id'];
  const body = req.method === 'POST' ? await readJson(req).catch(() => null) : undefined;
  record(req, body);
  if (body === null) return refuse(res, 400, 'Parse error');
  let transport = sessionId ? sessions.get(sessionId) : undefined;
  if (!transport) {
    if (sessionId) return refuse(res, 404, 'Session not found');
    // Anything but initialize without a session (a server/discover probe, say) goes to a
    // fresh transport too, so the SDK itself answers it as a 2025-11-25 server does.
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await buildServer().connect(transport);
  }
  await transport.handleRequest(req, res, body);
  if (!transport.sessionId) await transport.close(); // refused before a session began
}

const listener = http.createServer((req, res) => {
  handle(req, res).catch((error) => {
    if (!res.headersSent) refuse(res, 500, String(error));
  });
});
listener.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  console.log(`listening http://127.0.0.1:${listener.address().port}/mcp`);
});
