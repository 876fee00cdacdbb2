// Helpers for test/bridge.test.mjs (issue 22, direction A: a 2025-11-25 client in front
// of an upstream that speaks only 2026-07-28):
//
// - startGatewayToml: a gateway process with a config of the test's own (harness.mjs's
//   startGateway writes its own `[state]`, and the bridge tests need `push_timeout`);
// - runInspector: the MCP Inspector CLI (`mcp-inspector --cli`) as its own process;
// - connectLegacy: the TypeScript SDK 1.x client whose "person" also gets the SDK's
//   per-request `extra` (its abort signal), over a fetch that records the wire and can
//   send some requests to another URL (another gateway instance);
// - rawSession: a 2025-11-25 session spoken by hand, for what no SDK lets a test do
//   (close one call's stream, POST an answer after the call ended).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { gatewayBinary } from './harness.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const INSPECTOR = join(HERE, '..', 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');
const READY_TIMEOUT_MS = 20_000;
const INSPECTOR_TIMEOUT_MS = 60_000;

export const LEGACY = '2025-11-25';
export const MODERN = '2026-07-28';
export const FORM_AND_URL = { elicitation: { form: {}, url: {} } };

// Children still running are killed when the test process exits, however it exits.
const running = new Set();
process.on('exit', () => {
  for (const proc of running) proc.kill('SIGKILL');
});

function track(proc) {
  running.add(proc);
  const exited = new Promise((resolve) =>
    proc.once('exit', (code, signal) => {
      running.delete(proc);
      resolve({ code, signal });
    }),
  );
  return exited;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A gateway process on 127.0.0.1 port 0 with `body` as the rest of its config (everything
 * but `[[listener]]` and `[admin]`). `env` adds environment variables (e.g. `keys_env`).
 */
export async function startGatewayToml(body, { env = {} } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'portcullis-interop-bridge-gw-'));
  const config = join(dir, 'gateway.toml');
  writeFileSync(config, ['[[listener]]', 'address = "127.0.0.1:0"', '', '[admin]', 'address = "127.0.0.1:0"', '', body].join('\n'));
  const proc = spawn(gatewayBinary(), ['run', '--config', config], {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  for (const stream of [proc.stdout, proc.stderr]) {
    stream.setEncoding('utf8');
    stream.on('data', (text) => {
      output += text;
    });
  }
  const exited = track(proc);
  let gone = false;
  exited.then(() => {
    gone = true;
  });
  const tail = (lines = 40) => output.split('\n').slice(-lines).join('\n');
  const stop = async () => {
    if (!gone) {
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let addresses;
  while (Date.now() < deadline && !gone) {
    const admin = output.match(/admin listening\b.*?\baddr=(\S+)/)?.[1];
    const listener = output
      .split('\n')
      .filter((l) => !l.includes('admin listening'))
      .map((l) => l.match(/\blistening\b.*?\baddr=(\S+)/)?.[1])
      .find(Boolean);
    if (admin && listener) {
      try {
        if ((await fetch(`http://${admin}/readyz`)).status === 200) {
          addresses = { admin, listener };
          break;
        }
      } catch {
        // not accepting yet
      }
    }
    await sleep(50);
  }
  if (!addresses) {
    await stop();
    throw new Error(`gateway not ready (${gone ? 'exited' : 'timeout'}):\n${tail()}`);
  }
  return { at: (path) => `http://${addresses.listener}${path}`, admin: `http://${addresses.admin}`, stop, tail, log: () => output };
}

/**
 * The MCP Inspector CLI: `mcp-inspector --cli <args>` on this Node.js, with a HOME of its
 * own (it keeps catalogs and OAuth state there). Its result is on stdout, its error
 * envelope (`{"error": {...}}`) on stderr; `error` is that envelope parsed.
 */
export async function runInspector(args) {
  const home = mkdtempSync(join(tmpdir(), 'portcullis-interop-inspector-'));
  const proc = spawn(process.execPath, [INSPECTOR, '--cli', ...args], {
    cwd: home,
    env: { ...process.env, HOME: home, MCP_CATALOG_PATH: join(home, 'mcp.json') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout.setEncoding('utf8').on('data', (t) => (stdout += t));
  proc.stderr.setEncoding('utf8').on('data', (t) => (stderr += t));
  const exited = track(proc);
  const timer = setTimeout(() => proc.kill('SIGKILL'), INSPECTOR_TIMEOUT_MS);
  const { code, signal } = await exited;
  clearTimeout(timer);
  rmSync(home, { recursive: true, force: true });
  const lastJson = (text) => {
    const line = text.trim().split('\n').reverse().find((l) => l.startsWith('{'));
    try {
      return line ? JSON.parse(line) : undefined;
    } catch {
      return undefined;
    }
  };
  return { code, signal, stdout, stderr, result: lastJson(stdout)?.result, error: lastJson(stderr)?.error };
}

/**
 * A fetch that records every request and its answer's status (and, for an answer that is
 * not a 2xx, its body), and sends a request to `reroute(entry)` instead when that gives a URL.
 */
export function wireFetch({ reroute } = {}) {
  const wire = [];
  const recorded = async (url, init = {}) => {
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const body = typeof init.body === 'string' && init.body ? JSON.parse(init.body) : undefined;
    const entry = { method: init.method ?? 'GET', url: String(url), headers, body };
    entry.url = String(reroute?.(entry) ?? url);
    wire.push(entry);
    const response = await fetch(entry.url, init);
    entry.status = response.status;
    entry.contentType = response.headers.get('content-type');
    if (response.status >= 300) entry.text = await response.clone().text();
    return response;
  };
  return { fetch: recorded, wire };
}

/** Whether a wire entry is a JSON-RPC response the client POSTed (an answer to a pushed request). */
export const isAnswer = (w) => w.body && w.body.method === undefined && ('result' in w.body || 'error' in w.body);

/**
 * TypeScript SDK 1.x client (2025-11-25). `answer(params, extra)` answers each
 * elicitation/create (`extra.signal` aborts when the server withdraws the question);
 * `asked` lists every question's params.
 */
export async function connectLegacy(url, answer, { capabilities = FORM_AND_URL, reroute } = {}) {
  const { fetch, wire } = wireFetch({ reroute });
  const asked = [];
  const withdrawn = [];
  const errors = [];
  const client = new Client({ name: 'portcullis-interop-ts-v1-bridge', version: '1.0.0' }, { capabilities });
  client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
    asked.push(request.params);
    extra.signal.addEventListener('abort', () => withdrawn.push(request.params));
    return answer(request.params, extra);
  });
  client.onerror = (e) => errors.push(e);
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch });
  await client.connect(transport);
  return { client, transport, wire, asked, withdrawn, errors, close: () => client.close() };
}

/** Polls `predicate` (sync or async) every 25 ms until it holds or `ms` pass; returns whether it held. */
export async function eventually(predicate, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await predicate()) return true;
    await sleep(25);
  }
  return Boolean(await predicate());
}

/** A gauge or counter of the gateway's /metrics (summed over its label sets). */
export async function metric(admin, name) {
  const text = await (await fetch(`${admin}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

/** Reads SSE `data:` messages from a fetch Response, as parsed JSON, one at a time. */
export function sseMessages(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const queue = [];
  return {
    async next() {
      while (queue.length === 0) {
        const { value, done } = await reader.read();
        if (done) return undefined;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = event
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trimStart())
            .join('\n');
          if (data) queue.push(JSON.parse(data));
        }
      }
      return queue.shift();
    },
    /** Every message left, until the stream ends. */
    async rest() {
      const out = [];
      for (let m = await this.next(); m !== undefined; m = await this.next()) out.push(m);
      return out;
    },
    cancel: () => reader.cancel(),
  };
}

/** A 2025-11-25 session by hand: initialize, notifications/initialized, then `post`. */
export async function rawSession(url, capabilities = { elicitation: {} }) {
  const headers = (sid) => ({
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...(sid ? { 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY } : {}),
  });
  const init = await fetch(url, {
    method: 'POST',
    headers: headers(),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities, clientInfo: { name: 'portcullis-interop-raw', version: '1' } },
    }),
  });
  const initialized = await init.json();
  const sid = init.headers.get('mcp-session-id');
  if (!sid) throw new Error(`no session id: ${init.status} ${JSON.stringify(initialized)}`);
  const post = (message, { signal } = {}) =>
    fetch(url, { method: 'POST', headers: headers(sid), body: JSON.stringify(message), signal });
  await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).arrayBuffer();
  return {
    sid,
    initialized,
    post,
    get: () => fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY } }),
    delete: () => fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY } }),
  };
}
