// Real processes for the interop tests: the gateway binary ($PORTCULLIS_BIN, or
// <repo>/target/debug/portcullis) with a config written to a temporary directory,
// and the test MCP servers in servers/. Every process listens on port 0 of 127.0.0.1 and says where in its output.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, accessSync, rmSync, constants } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
export const REPO = join(HERE, '..', '..', '..');
const SERVERS = join(HERE, '..', 'servers');
const READY_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 10_000;

/** Rounds the gateway allows in one operation in these tests (`[state] max_rounds`). */
export const GATEWAY_MAX_ROUNDS = 3;

/**
 * Where a gateway started on port 0 listens, from its log: `listening … addr=`
 * and `admin listening addr=` (no port is chosen before the gateway binds it).
 */
function boundAddresses(output) {
  const admin = output.match(/admin listening\b.*?\baddr=(\S+)/)?.[1];
  const listener = output
    .split('\n')
    .filter((l) => !l.includes('admin listening'))
    .map((l) => l.match(/\blistening\b.*?\baddr=(\S+)/)?.[1])
    .find(Boolean);
  return admin && listener ? { admin, listener } : undefined;
}

function requireExecutable(path, hint) {
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`${path} is missing: ${hint}`);
  }
  return path;
}

export function gatewayBinary() {
  return requireExecutable(
    process.env.PORTCULLIS_BIN || join(REPO, 'target', 'debug', 'portcullis'),
    'run `cargo build`, or set PORTCULLIS_BIN to the binary to test',
  );
}

export function pythonBinary() {
  return requireExecutable(
    process.env.PORTCULLIS_PYTHON || join(REPO, '.venv', 'bin', 'python'),
    'run ./scripts/test once (it makes .venv with the MCP SDK), or set PORTCULLIS_PYTHON',
  );
}

// Every child still running; killed when this process exits, however it exits, so a
// crashed or interrupted test run leaves no gateway or server behind.
const running = new Set();
process.on('exit', () => {
  for (const proc of running) proc.kill('SIGKILL');
});
for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]]) process.once(signal, () => process.exit(code));

/** A child process whose output we keep, to show when a test fails. */
class Child {
  constructor(name, command, args, env = {}) {
    this.name = name;
    this.dir = mkdtempSync(join(tmpdir(), `portcullis-interop-${name}-`));
    this.output = '';
    this.proc = spawn(command, args, {
      cwd: this.dir,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [this.proc.stdout, this.proc.stderr]) {
      stream.setEncoding('utf8');
      stream.on('data', (text) => {
        this.output += text;
      });
    }
    running.add(this.proc);
    this.exited = new Promise((resolve) =>
      this.proc.once('exit', (code, signal) => {
        running.delete(this.proc);
        resolve({ code, signal });
      }),
    );
  }

  tail(lines = 40) {
    return this.output.split('\n').slice(-lines).join('\n');
  }

  /** Polls `predicate` until it gives a value; stops the process when it never does. */
  async waitFor(predicate, what) {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    let exited = false;
    this.exited.then(() => {
      exited = true;
    });
    let problem = `no ${what} after ${READY_TIMEOUT_MS} ms`;
    while (Date.now() < deadline) {
      const found = await predicate();
      if (found) return found;
      if (exited) {
        problem = `exited before ${what}`;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    await this.stop();
    throw new Error(`${this.name}: ${problem}:\n${this.tail()}`);
  }

  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await this.exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true }); // its output stays in this.output
  }
}

async function startServer(name, command, args) {
  const child = new Child(name, command, args);
  const url = await child.waitFor(
    () => child.output.match(/listening (http:\/\/127\.0\.0\.1:\d+\/mcp)/)?.[1],
    'listening line',
  );
  return { name, url, stop: () => child.stop(), tail: () => child.tail() };
}

export const startTsV2Server = () => startServer('ts-v2-server', process.execPath, [join(SERVERS, 'ts_v2_server.mjs')]);
export const startTsV1Server = () => startServer('ts-v1-server', process.execPath, [join(SERVERS, 'ts_v1_server.mjs')]);
export const startPythonServer = () => startServer('python-server', pythonBinary(), [join(SERVERS, 'py_server.py')]);

/** The gateway binary's own demo MCP server (`portcullis demo-upstream`, rmcp, 2026-07-28 only). */
export async function startDemoServer() {
  const child = new Child('demo-server', gatewayBinary(), ['demo-upstream', '--listen', '127.0.0.1:0']);
  const url = await child.waitFor(
    () => child.output.match(/demo MCP server on (http:\/\/127\.0\.0\.1:\d+\/mcp)/)?.[1],
    'listening line',
  );
  return { name: 'demo-server', url, stop: () => child.stop(), tail: () => child.tail() };
}

/** `portcullis keygen` output: one sealing key line (KID:BASE64URL). */
export async function keygen(id = 'k1') {
  const child = new Child('keygen', gatewayBinary(), ['keygen', '--id', id]);
  const { code } = await child.exited;
  await child.stop();
  if (code !== 0) throw new Error(`portcullis keygen failed:\n${child.tail()}`);
  return child.output.trim();
}

/**
 * A gateway process in front of the given upstreams ({id: url}); each is routed at
 * /mcp/<id>. `stateKeys` (from keygen) go to the process through `[state] keys_env`,
 * so two gateways with the same keys can serve one operation.
 */
export async function startGateway(upstreams, { stateKeys, extraToml = '', adminAddress = '127.0.0.1:0' } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'portcullis-interop-gw-'));
  const lines = [
    '[[listener]]',
    'address = "127.0.0.1:0"',
    '',
    '[admin]',
    `address = "${adminAddress}"`,
    '',
    '[state]',
    `max_rounds = ${GATEWAY_MAX_ROUNDS}`,
    ...(stateKeys ? ['keys_env = "PORTCULLIS_STATE_KEYS"'] : []),
    '',
  ];
  for (const [id, url] of Object.entries(upstreams)) {
    lines.push('[[upstream]]', `id = "${id}"`, `name = "Interop ${id}"`, `url = "${url}"`, '');
    lines.push('[[route]]', `path = "/mcp/${id}"`, `upstream = "${id}"`, '');
  }
  const config = join(dir, 'gateway.toml');
  writeFileSync(config, lines.join('\n') + extraToml);
  const env = stateKeys ? { PORTCULLIS_STATE_KEYS: stateKeys } : {};
  const child = new Child('gateway', gatewayBinary(), ['run', '--config', config], env);
  const { listener, admin } = await child.waitFor(() => boundAddresses(child.output), 'listening lines');
  await child.waitFor(async () => {
    try {
      return (await fetch(`http://${admin}/readyz`)).status === 200;
    } catch {
      return false;
    }
  }, '200 from /readyz');
  return {
    url: (id) => `http://${listener}/mcp/${id}`,
    /** A route configured by path in `extraToml`. */
    at: (path) => `http://${listener}${path}`,
    admin: `http://${admin}`,
    upstreamName: (id) => `Interop ${id}`,
    config,
    stop: async () => {
      await child.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    tail: () => child.tail(),
  };
}

/**
 * The node:test form of pytest's xfail(strict=True): the body must fail today. If it
 * passes, the test fails, so whoever lands the feature flips it to a plain test.
 */
export function xfail(reason, body) {
  return async (t) => {
    try {
      await body(t);
    } catch (error) {
      t.diagnostic(`expected failure (${reason}): ${String(error?.message ?? error).split('\n')[0]}`);
      return;
    }
    throw new Error(`XPASS(strict): passed although marked as expected to fail (${reason}); make it a plain test`);
  };
}

/**
 * A fetch that records each request and response status, for assertions on the wire.
 * `continueAt`: once the initialize exchange is done, every later request goes to this
 * URL instead (a session carried on by a second gateway process).
 */
export function recordingFetch({ continueAt } = {}) {
  const wire = [];
  const recorded = async (url, init = {}) => {
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const body = typeof init.body === 'string' && init.body ? JSON.parse(init.body) : undefined;
    const target = continueAt && wire.some((w) => w.body?.method === 'initialize' && w.status) ? continueAt : url;
    const entry = { method: init.method ?? 'GET', url: String(target), headers, body, status: undefined };
    wire.push(entry);
    const response = await fetch(target, init);
    entry.status = response.status;
    entry.contentType = response.headers.get('content-type');
    return response;
  };
  return { fetch: recorded, wire };
}
