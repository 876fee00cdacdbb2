// Runs the MCP conformance suite (@modelcontextprotocol/conformance) directly and
// through the gateway, and prints one table: per scenario, pass/fail on each path.
//
// - Server scenarios: the suite (a 2025-11-25 client) against the Python SDK server
//   tests/conformance/everything_server.py, at its own URL, behind a gateway, and behind
//   a federated route (`upstreams = [...]`) of that one upstream.
// - Client scenarios: the suite starts each scenario's server and runs client.mjs (the
//   TypeScript SDK 1.x client) against it; with --via-gateway the client puts a
//   gateway process in front of the scenario server first.
//
//   node run.mjs [--out DIR] [--strict]
// --strict: exit 1 when a scenario passes directly but not through the gateway (a plain
// or the federated route).
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startGateway, pythonBinary, REPO } from '../lib/harness.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, '..', 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const CLIENT = join(HERE, 'client.mjs');
const SERVER = join(REPO, 'tests', 'conformance', 'everything_server.py');
// The client scenarios that are not OAuth flows, run directly and through the gateway.
const CLIENT_SCENARIOS = ['initialize', 'tools_call', 'elicitation-sep1034-client-defaults', 'sse-retry'];
// The auth/* client scenarios, a control run directly with auth_client.mjs (the TS SDK v2
// client the OAuth interop tests use): no server scenario of the suite is about
// authorization, and a gateway cannot stand between a client and another resource's
// sign-in (it is itself the protected resource), so these say how far the client used in
// test/oauth.test.mjs follows the spec on its own. Reported, not held to --strict.
const AUTH_CLIENT = join(HERE, 'auth_client.mjs');

const args = process.argv.slice(2);
const out = args.includes('--out')
  ? args[args.indexOf('--out') + 1]
  : mkdtempSync(join(tmpdir(), 'portcullis-conformance-'));
const strict = args.includes('--strict');

function run(command, commandArgs) {
  return new Promise((resolve) => {
    const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

/** {scenario: {passed, failed, ran}} from the suite's result folders (<prefix><scenario>-<timestamp>/checks.json). */
function results(dir, prefix) {
  const found = {};
  if (!existsSync(dir)) return found;
  for (const entry of readdirSync(dir, { recursive: true })) {
    if (!String(entry).endsWith('checks.json')) continue;
    const folder = String(entry).slice(0, -'/checks.json'.length);
    const scenario = folder.replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, '').replace(prefix, '');
    const checks = JSON.parse(readFileSync(join(dir, entry), 'utf8'));
    const stderr = join(dir, folder, 'stderr.txt'); // client scenarios: what the client said
    found[scenario] = {
      passed: checks.filter((c) => c.status === 'SUCCESS').length,
      failed: checks.filter((c) => c.status === 'FAILURE').length,
      // Only INFO records (or none): the scenario never got as far as a verdict.
      ran: checks.some((c) => c.status === 'SUCCESS' || c.status === 'WARNING'),
      why:
        checks.find((c) => c.status === 'FAILURE')?.errorMessage ??
        (existsSync(stderr) ? readFileSync(stderr, 'utf8') : undefined),
    };
  }
  return found;
}

async function serverScenarios(url, dir) {
  await run(process.execPath, [CLI, 'server', '--url', url, '--suite', 'all', '-o', dir]);
  return results(dir, 'server-');
}

async function clientScenarios(viaGateway, dir) {
  const command = [process.execPath, CLIENT, ...(viaGateway ? ['--via-gateway'] : [])].join(' ');
  for (const scenario of CLIENT_SCENARIOS) {
    await run(process.execPath, [CLI, 'client', '--command', command, '--scenario', scenario, '-o', dir]);
  }
  return results(dir, '');
}

/** Every auth/* client scenario the suite lists. */
async function authScenarioNames() {
  const { output } = await run(process.execPath, [CLI, 'list']);
  return [...output.matchAll(/^\s*- (auth\/\S+)/gm)].map((m) => m[1]);
}

async function authScenarios(names, dir) {
  const command = [process.execPath, AUTH_CLIENT].join(' ');
  for (const scenario of names) {
    await run(process.execPath, [CLI, 'client', '--command', command, '--scenario', scenario, '-o', dir]);
  }
  return results(dir, '');
}

async function startEverythingServer() {
  // stderr ignored: the dns-rebinding scenario makes the server log each refused Host.
  const child = spawn(pythonBinary(), [SERVER], { stdio: ['ignore', 'pipe', 'ignore'] });
  const url = await new Promise((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (d) => {
      text += d;
      const m = text.match(/listening (http:\S+)/);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`everything_server.py exited with ${code}`)));
  });
  return { url, stop: () => child.kill('SIGTERM') };
}

const passes = (r) => r && r.failed === 0 && r.ran;
function verdict(r) {
  if (!r) return 'not run';
  if (!r.ran && r.failed === 0) return 'FAIL (no verdict: nothing reached the scenario server)';
  return `${passes(r) ? 'pass' : 'FAIL'} (${r.passed}/${r.passed + r.failed})`;
}

const started = Date.now();
const server = await startEverythingServer();
// A federated route whose one member is the same server, with an empty
// prefix: its names as they are, so the scenarios name them as directly.
const FEDERATED = '/fed/conformance';
// A bridged route: the same server, configured as speaking only 2026-07-28,
// so the suite's 2025-11-25 client gets a bridged session (README "Bridging
// the two generations"). Reported, not held to --strict: what 2026-07-28 has
// no place for (a session's own stream, resumption, subscriptions) is not
// carried by design.
const BRIDGED = '/bridged/conformance';
const gateway = await startGateway(
  { conformance: server.url },
  {
    extraToml:
      `[[upstream]]\nid = "conformance-fed"\nname = "Conformance (federated)"\nurl = "${server.url}"\nprefix = ""\n` +
      `[[route]]\npath = "${FEDERATED}"\nupstreams = ["conformance-fed"]\n` +
      `[[upstream]]\nid = "conformance-bridged"\nname = "Conformance (bridged)"\nurl = "${server.url}"\ngenerations = ["2026-07-28"]\n` +
      `[[route]]\npath = "${BRIDGED}"\nupstream = "conformance-bridged"\n`,
  },
);
let rows;
let authNames = [];
let authDirect = {};
try {
  const [serverDirect, serverGateway, serverFederated, serverBridged] = [
    await serverScenarios(server.url, join(out, 'server-direct')),
    await serverScenarios(gateway.url('conformance'), join(out, 'server-gateway')),
    await serverScenarios(gateway.at(FEDERATED), join(out, 'server-federated')),
    await serverScenarios(gateway.at(BRIDGED), join(out, 'server-bridged')),
  ];
  const [clientDirect, clientGateway] = [
    await clientScenarios(false, join(out, 'client-direct')),
    await clientScenarios(true, join(out, 'client-gateway')),
  ];
  authNames = await authScenarioNames();
  authDirect = await authScenarios(authNames, join(out, 'auth-direct'));
  rows = [
    ...Object.keys(serverDirect).map((s) => [
      'server',
      s,
      serverDirect[s],
      serverGateway[s],
      serverFederated[s],
      serverBridged[s],
    ]),
    ...CLIENT_SCENARIOS.map((s) => ['client', s, clientDirect[s], clientGateway[s], null, null]),
  ];
} finally {
  await gateway.stop();
  server.stop();
}

/** The gist of a failure for one table cell: the gateway's refusal reason when there is one. */
function gist(r) {
  const why = r?.why ?? '';
  const refusal = why.match(/"message":"((?:[^"\\]|\\.)*)","data":\{"reason":"([a-z_]+)"/);
  if (refusal) return `${refusal[2]}: ${refusal[1]}`;
  return why.replace(/\s+/g, ' ').replace(/\|/g, '/').slice(0, 140);
}
console.log(
  '| kind | scenario | direct | through the gateway | through a federated route of one upstream | through a bridged route (2025-11-25 client, upstream as 2026-07-28) | first failure through the gateway |',
);
console.log('|---|---|---|---|---|---|---|');
for (const [kind, scenario, direct, via, federated, bridged] of rows) {
  const failure = [via, federated, bridged].find((r) => r && !passes(r));
  const cell = (r) => (r === null ? '–' : verdict(r));
  console.log(
    `| ${kind} | ${scenario} | ${verdict(direct)} | ${verdict(via)} | ${cell(federated)} | ${cell(bridged)} | ${failure ? gist(failure) : ''} |`,
  );
}
for (const kind of ['server', 'client']) {
  const mine = rows.filter((r) => r[0] === kind);
  const federated =
    kind === 'server'
      ? `, ${mine.filter((r) => passes(r[4])).length}/${mine.length} through the federated route, ` +
        `${mine.filter((r) => passes(r[5])).length}/${mine.length} through the bridged route`
      : '';
  console.log(
    `\n${kind} scenarios: ${mine.filter((r) => passes(r[2])).length}/${mine.length} pass directly, ` +
      `${mine.filter((r) => passes(r[3])).length}/${mine.length} through the gateway${federated}`,
  );
}
console.log('\n| auth client scenario (control: the TS SDK v2 client, directly) | result | first failure |');
console.log('|---|---|---|');
for (const name of authNames) {
  const r = authDirect[name];
  console.log(`| ${name} | ${verdict(r)} | ${r && !passes(r) ? gist(r) : ''} |`);
}
console.log(
  `\nauth client scenarios (control, direct): ${authNames.filter((n) => passes(authDirect[n])).length}/${authNames.length} pass`,
);
console.log(
  `(checks passed / checks run in brackets; results in ${out}; took ${((Date.now() - started) / 1000).toFixed(1)} s)`,
);
const lost = rows.filter((r) => passes(r[2]) && (!passes(r[3]) || (r[4] !== null && !passes(r[4]))));
if (strict && lost.length) {
  console.log(
    `conformance: ${lost.length} scenarios pass directly but not through the gateway: ${lost.map((r) => r[1]).join(', ')}`,
  );
  process.exit(1);
}
