// A 2025-11-25-only MCP server on the TypeScript SDK 1.x (@modelcontextprotocol/sdk):
// stateful Streamable HTTP sessions (initialize, Mcp-Session-Id, GET stream, DELETE)
// and elicitation pushed as a server-to-client request. It knows nothing of
// 2026-07-28, so a negotiating client has to fall back to `initialize`.
//
//   node ts_v1_server.mjs            listens on 127.0.0.1, a port the OS picks
// prints "listening http://127.0.0.1:PORT/mcp" once it accepts connections.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import * as z from 'zod';
import { roundsOf, outcomeText, flowDescription } from './flows.mjs';

function buildServer() {
  const server = new McpServer({ name: 'portcullis-interop-ts-v1', version: '1.0.0' });
  server.registerTool(
    'book',
    { description: flowDescription('book'), inputSchema: { hint: z.string() } },
    async ({ hint }, extra) => {
      const [round] = roundsOf('book', { hint });
      const [[key, question]] = Object.entries(round);
      // On the call's own stream: without relatedRequestId the SDK sends it on the
      // standalone GET stream, and drops it when that stream is not open yet (the
      // client opens it without waiting, so a tools/call can overtake it).
      const reply = await server.server.elicitInput(
        { mode: 'form', message: question.message, requestedSchema: question.schema },
        { relatedRequestId: extra.requestId },
      );
      const result =
        reply.action === 'accept' ? { answers: { [key]: reply.content } } : { stopped: { key, action: reply.action } };
      return { content: [{ type: 'text', text: outcomeText('book', result) }] };
    },
  );
  server.registerTool(
    'echo',
    { description: 'Answers with its text.', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  return server;
}

const sessions = new Map(); // Mcp-Session-Id -> transport

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

function refuse(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message } }));
}

async function handle(req, res) {
  const sessionId = req.headers['mcp-session-id'];
  const body = req.method === 'POST' ? await readJson(req).catch(() => null) : undefined;
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
