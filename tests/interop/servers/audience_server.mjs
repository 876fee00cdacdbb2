// An upstream MCP server (TypeScript SDK v2) that is itself an OAuth protected resource:
// every request needs `Authorization: Bearer <JWT>` from the authorization server at
// `issuer`, verified against that server's published keys (jwks_uri of its metadata), with
// `aud` naming this server's own audience (RFC 8707; default its own URL) — or, with
// `staticKey`, exactly that key. Anything else gets 401. It keeps every Authorization value
// it was sent (`seen`; run as a program it prints each as a line `authorization <value>`),
// so a test can assert that a client's own token never reached it.
//
// Tools: `whoami` (the verified token's sub, act, aud, scope and client_id, as JSON text),
// `get_room`, `admin_reset`.
//
// As a program: `ISSUER=http://127.0.0.1:P node audience_server.mjs` (or `STATIC_KEY=…`,
// optional `AUDIENCE=…`, `PORT=…`) prints `listening http://127.0.0.1:PORT/mcp`.
import http from 'node:http';
import { AsyncLocalStorage } from 'node:async_hooks';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import * as z from 'zod';

function factory(caller) {
  const server = new McpServer({ name: 'portcullis-interop-audience', version: '1.0.0' });
  server.registerTool('whoami', { description: 'Who the upstream was told is calling.', inputSchema: z.object({}) }, async () => ({
    content: [{ type: 'text', text: JSON.stringify(caller()) }],
  }));
  server.registerTool('get_room', { description: 'A room.', inputSchema: z.object({}) }, async () => ({
    content: [{ type: 'text', text: 'room 101' }],
  }));
  server.registerTool('admin_reset', { description: 'Resets the rooms.', inputSchema: z.object({}) }, async () => ({
    content: [{ type: 'text', text: 'reset' }],
  }));
  return server;
}

/** Serves on 127.0.0.1 (a port the OS picks). */
export async function serveAudience({ issuer, staticKey, audience, port = 0, onAuthorization } = {}) {
  const seen = [];
  const listener = http.createServer();
  await new Promise((resolve) => listener.listen(port, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${listener.address().port}/mcp`;
  audience ??= url;
  let keys;
  if (issuer) {
    const metadata = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
    keys = createRemoteJWKSet(new URL(metadata.jwks_uri));
  }
  // The verified caller of the request being handled, for `whoami`.
  const caller = new AsyncLocalStorage();
  const handle = toNodeHandler(createMcpHandler(() => factory(() => caller.getStore())));
  listener.on('request', async (req, res) => {
    const auth = req.headers.authorization;
    seen.push(auth ?? null);
    onAuthorization?.(auth ?? null);
    const token = auth?.startsWith('Bearer ') ? auth.slice(7) : undefined;
    let claims;
    if (staticKey) {
      claims = token === staticKey ? { sub: 'static' } : undefined;
    } else if (token) {
      try {
        ({ payload: claims } = await jwtVerify(token, keys, { issuer, audience, typ: 'at+jwt' }));
      } catch {
        claims = undefined;
      }
    }
    if (!claims) {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer error="invalid_token"' });
      return res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'unauthorized' } }));
    }
    const who = { sub: claims.sub, act: claims.act, aud: claims.aud, scope: claims.scope, client_id: claims.client_id };
    let body = '';
    for await (const chunk of req) body += chunk;
    await caller.run(who, () => handle(req, res, body ? JSON.parse(body) : undefined));
  });
  return {
    url,
    audience,
    seen,
    stop: () => new Promise((resolve) => listener.close(resolve).closeAllConnections()),
  };
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const server = await serveAudience({
    issuer: process.env.ISSUER,
    staticKey: process.env.STATIC_KEY,
    audience: process.env.AUDIENCE,
    port: Number(process.env.PORT ?? 0),
    onAuthorization: (value) => console.log(`authorization ${value ?? '-'}`),
  });
  console.log(`listening ${server.url}`);
}
