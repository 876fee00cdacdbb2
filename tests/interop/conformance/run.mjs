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
// - With --oauth, also the server scenarios through a route of the gateway that is an OAuth
//   protected resource (`type = "oauth"`, issuer: oidc-provider from lib/auth_server.mjs),
//   each request carrying alice's token for that route (the suite's client has no OAuth of
//   its own, so a proxy on 127.0.0.1 adds the header); and, as the negative control,
//   server-initialize at that route with no token, which must fail.
//
//   node run.mjs [--out DIR] [--strict] [--auth-only] [--oauth]
// --auth-only: only the auth/* control (no Python server, no gateway binary needed).
// --strict: exit 1 when a scenario passes directly but not through the gateway (a plain
// or the federated route), or when a bridged-route or auth-control row fails without
// being named in tests/conformance/expected-failures.json (or passes while named there).
import { spawn } from 'node:child_process';
import { createServer, request } from 'node:http';
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
// The auth/* client scenarios: a control, run directly with the two SDK clients the OAuth
// interop tests (test/oauth.test.mjs) sign in with: auth_client.mjs (v2) and client.mjs
// (1.x), each with the tests' in-memory OAuth host. No server scenario of the suite is about
// authorization, and a gateway cannot stand between a client and another resource's
// sign-in (it is itself the protected resource), so these say how far those clients follow
// the spec on their own. Reported, not held to --strict.
const AUTH_CLIENTS = { v2: join(HERE, 'auth_client.mjs'), v1: CLIENT };
// Scenarios at once (each starts its own servers on port 0).
const AUTH_PARALLEL = 4;

const args = process.argv.slice(2);
const out = args.includes('--out')
  ? args[args.indexOf('--out') + 1]
  : mkdtempSync(join(tmpdir(), 'portcullis-conformance-'));
const strict = args.includes('--strict');
const authOnly = args.includes('--auth-only');
const oauth = args.includes('--oauth');

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
      failure: ((c) => c && (c.errorMessage ?? c.description))(checks.find((c) => c.status === 'FAILURE')),
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

/** Every auth/* client scenario the suite lists, with the spec versions it names. */
async function authScenarioNames() {
  const { output } = await run(process.execPath, [CLI, 'list', '--client']);
  return [...output.matchAll(/^\s*- (auth\/\S+) \[([^\]]*)\]/gm)].map((m) => ({ name: m[1], spec: m[2] }));
}

async function authScenarios(names, client, dir) {
  const command = [process.execPath, client].join(' ');
  const queue = [...names];
  const worker = async () => {
    for (let scenario; (scenario = queue.shift()); ) {
      await run(process.execPath, [CLI, 'client', '--command', command, '--scenario', scenario, '-o', dir]);
    }
  };
  await Promise.all(Array.from({ length: AUTH_PARALLEL }, worker));
  return results(dir, '');
}

/** Every auth/* scenario with each control client: {v2: {scenario: r}, v1: {...}}. */
async function authControl() {
  const listed = await authScenarioNames();
  const names = listed.map((s) => s.name);
  const spec = Object.fromEntries(listed.map((s) => [s.name, s.spec]));
  const found = {};
  for (const [version, client] of Object.entries(AUTH_CLIENTS)) {
    found[version] = await authScenarios(names, client, join(out, `auth-direct-${version}`));
  }
  return { names, spec, found };
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

/**
 * A proxy on 127.0.0.1 in front of `target` (a gateway listener, host:port) that adds
 * `Authorization: Bearer <token>` to every request and otherwise passes requests and
 * (streamed) responses through as they are. A request addressed to the proxy itself is
 * addressed to the gateway (its Host the gateway's, as a reverse proxy in front of it
 * would send, so the gateway's checked Host and resource are its own); any other Host
 * (the dns-rebinding scenario's) is passed on for the gateway to refuse.
 */
async function bearerProxy(target, token) {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  let own;
  const proxy = createServer((req, res) => {
    const addressed = own.test(req.headers.host ?? '') ? target : req.headers.host;
    // The page's own origin, when it is the proxy's, is the gateway's as well.
    const origin = req.headers.origin;
    const fromOwn = origin && own.test(origin.replace(/^https?:\/\//, ''));
    const upstream = request(
      {
        host,
        port,
        method: req.method,
        path: req.url,
        headers: {
          ...req.headers,
          host: addressed,
          ...(fromOwn ? { origin: `http://${target}` } : {}),
          authorization: `Bearer ${token}`,
        },
      },
      (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  own = new RegExp(`^(127\\.0\\.0\\.1|localhost|\\[::1\\]):${proxy.address().port}$`, 'i');
  return {
    at: (path) => `http://127.0.0.1:${proxy.address().port}${path}`,
    stop: () => new Promise((resolve) => (proxy.closeAllConnections(), proxy.close(resolve))),
  };
}

/** The server and client scenarios, directly and through the gateway: the table's rows. */
async function gatewayRuns() {
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
  // --oauth: the same server behind a route whose clients sign in to an authorization
  // server (issue 24): the gateway is the protected resource, and the upstream gets no token.
  const OAUTH = '/oauth/conformance';
  const as = oauth ? await (await import('../lib/auth_server.mjs')).startAuthServer() : undefined;
  const oauthToml = as
    ? `[[auth]]\nname = "conformance-oauth"\ntype = "oauth"\nissuer = "${as.issuer}"\nscopes = ["mcp:tools"]\n` +
      `[[upstream]]\nid = "conformance-oauth"\nname = "Conformance (OAuth route)"\nurl = "${server.url}"\n` +
      `[[route]]\npath = "${OAUTH}"\nupstream = "conformance-oauth"\nauth = ["conformance-oauth"]\n`
    : '';
  const gateway = await startGateway(
    { conformance: server.url },
    {
      extraToml:
        `[[upstream]]\nid = "conformance-fed"\nname = "Conformance (federated)"\nurl = "${server.url}"\nprefix = ""\n` +
        `[[route]]\npath = "${FEDERATED}"\nupstreams = ["conformance-fed"]\n` +
        `[[upstream]]\nid = "conformance-bridged"\nname = "Conformance (bridged)"\nurl = "${server.url}"\ngenerations = ["2026-07-28"]\n` +
        `[[route]]\npath = "${BRIDGED}"\nupstream = "conformance-bridged"\n` +
        oauthToml,
    },
  );
  let proxy;
  try {
    let serverOauth = {};
    let unauthenticated;
    if (as) {
      // Alice's token for the route's resource (its default: the listener's URL and path),
      // the long way: registration, authorization code with PKCE and `resource`.
      const { access_token: token } = await as.userToken(gateway.at(OAUTH), 'mcp:tools');
      proxy = await bearerProxy(new URL(gateway.at(OAUTH)).host, token);
      serverOauth = await serverScenarios(proxy.at(OAUTH), join(out, 'server-oauth'));
      const dir = join(out, 'server-oauth-no-token');
      await run(process.execPath, [CLI, 'server', '--url', gateway.at(OAUTH), '--scenario', 'server-initialize', '-o', dir]);
      unauthenticated = results(dir, 'server-')['server-initialize'];
    }
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
    return [
      ...Object.keys(serverDirect).map((s) => [
        'server',
        s,
        serverDirect[s],
        serverGateway[s],
        serverFederated[s],
        serverBridged[s],
        as ? serverOauth[s] : null,
      ]),
      ...CLIENT_SCENARIOS.map((s) => ['client', s, clientDirect[s], clientGateway[s], null, null, null]),
      ...(as ? [['no token', 'server-initialize', null, null, null, null, unauthenticated]] : []),
    ];
  } finally {
    await proxy?.stop();
    await gateway.stop();
    await as?.stop();
    server.stop();
  }
}

// The rows that fail by design, each with why: a FAIL there is expected; one that
// fails and is not listed, or is listed and passes, fails --strict.
const EXPECTED = JSON.parse(readFileSync(join(REPO, 'tests', 'conformance', 'expected-failures.json'), 'utf8'));
const expectedBridged = EXPECTED.bridged ?? {};
const expectedAuth = EXPECTED.auth ?? {};
/** A cell's verdict, with "expected" where the row is listed as failing by design. */
function verdictExpected(r, why) {
  return r && !passes(r) && why ? `FAIL, expected (${r.passed}/${r.passed + r.failed})` : verdict(r);
}

const started = Date.now();
const rows = authOnly ? [] : await gatewayRuns();
const auth = await authControl();

/** The gist of a failure for one table cell: the gateway's refusal reason when there is one. */
function gist(r) {
  const why = r?.why ?? '';
  const refusal = why.match(/"message":"((?:[^"\\]|\\.)*)","data":\{"reason":"([a-z_]+)"/);
  if (refusal) return `${refusal[2]}: ${refusal[1]}`;
  return why.replace(/\s+/g, ' ').replace(/\|/g, '/').slice(0, 140);
}
if (rows.length) {
  const oauthColumn = oauth ? ' through an OAuth-protected route (token added) |' : '';
  console.log(
    '| kind | scenario | direct | through the gateway | through a federated route of one upstream | through a bridged route (2025-11-25 client, upstream as 2026-07-28) |' +
      `${oauthColumn} first failure through the gateway |`,
  );
  console.log(`|---|---|---|---|---|---|${oauth ? '---|' : ''}---|`);
  for (const [kind, scenario, direct, via, federated, bridged, oauthed] of rows) {
    const cell = (r) => (r === null ? '–' : verdict(r));
    if (kind === 'no token') {
      // The negative control: the OAuth route with no token must refuse.
      const refused = !passes(oauthed);
      console.log(
        `| ${kind} | ${scenario} | – | – | – | – | ${refused ? 'refused, as it must' : 'FAIL: served without a token'} | ${gist(oauthed)} |`,
      );
      continue;
    }
    const failure = [via, federated, expectedBridged[scenario] ? null : bridged, oauthed].find((r) => r && !passes(r));
    console.log(
      `| ${kind} | ${scenario} | ${verdict(direct)} | ${verdict(via)} | ${cell(federated)} | ` +
        `${bridged === null ? '–' : verdictExpected(bridged, expectedBridged[scenario])} |` +
        `${oauth ? ` ${cell(oauthed)} |` : ''} ${failure ? gist(failure) : ''} |`,
    );
  }
  for (const kind of ['server', 'client']) {
    const mine = rows.filter((r) => r[0] === kind);
    const federated =
      kind === 'server'
        ? `, ${mine.filter((r) => passes(r[4])).length}/${mine.length} through the federated route, ` +
          `${mine.filter((r) => passes(r[5])).length}/${mine.length} through the bridged route` +
          (oauth ? `, ${mine.filter((r) => passes(r[6])).length}/${mine.length} through the OAuth route` : '')
        : '';
    console.log(
      `\n${kind} scenarios: ${mine.filter((r) => passes(r[2])).length}/${mine.length} pass directly, ` +
        `${mine.filter((r) => passes(r[3])).length}/${mine.length} through the gateway${federated}`,
    );
  }
}
/** Why an auth/* control run failed: the suite's check, or the client's own error. */
function authGist(r) {
  const check = r?.failure && !/^Expected Check Missing/.test(r.failure) ? r.failure : undefined;
  // The client's own last word: the error it stopped on.
  const said = (r?.why ?? '').match(/^(?:\w*Error\b|client\.mjs:).*$/m)?.[0];
  return [check, said && `the client: ${said}`, !check && !said && r?.failure]
    .filter(Boolean)
    .join('; ')
    .replace(/\s+/g, ' ')
    .replace(/\|/g, '/')
    .slice(0, 220);
}
console.log(
  '\n| auth client scenario (control, directly) | spec | TS SDK v2 client (auth_client.mjs) | TS SDK 1.x client (client.mjs) | first failure |',
);
console.log('|---|---|---|---|---|');
for (const name of auth.names) {
  const [v2, v1] = [auth.found.v2[name], auth.found.v1[name]];
  const failing = [v2, v1]
    .map((r, i) => (r && !passes(r) ? `${i ? '1.x' : 'v2'}: ${authGist(r)}` : ''))
    .filter(Boolean);
  console.log(
    `| ${name} | ${auth.spec[name]} | ${verdictExpected(v2, expectedAuth.v2?.[name])} | ` +
      `${verdictExpected(v1, expectedAuth.v1?.[name])} | ${failing.join('; ')} |`,
  );
}
const authPassing = (v) => auth.names.filter((n) => passes(auth.found[v][n])).length;
console.log(
  `\nauth client scenarios (control, directly): ${authPassing('v2')}/${auth.names.length} pass with the v2 client, ` +
    `${authPassing('v1')}/${auth.names.length} with the 1.x client`,
);
console.log(
  `(checks passed / checks run in brackets; results in ${out}; took ${((Date.now() - started) / 1000).toFixed(1)} s)`,
);
const lost = rows.filter(
  (r) =>
    (r[0] === 'server' || r[0] === 'client') &&
    passes(r[2]) &&
    (!passes(r[3]) || (r[4] !== null && !passes(r[4])) || (r[6] !== null && !passes(r[6]))),
);
const servedWithoutToken = rows.some((r) => r[0] === 'no token' && passes(r[6]));
if (strict && servedWithoutToken) {
  console.log('conformance: the OAuth route served server-initialize without a token');
  process.exit(1);
}
// Rows that fail by design are named; anything else that fails there, or a named row
// that now passes, is a surprise.
const surprises = [];
const bridgedRows = rows.filter((r) => r[0] === 'server' && r[5]);
for (const [, scenario, direct, , , bridged] of bridgedRows) {
  const why = expectedBridged[scenario];
  if (passes(direct) && !passes(bridged) && !why) surprises.push(`${scenario} fails through the bridged route`);
  if (passes(bridged) && why) surprises.push(`${scenario} passes through the bridged route: remove it from expected-failures.json`);
}
if (!authOnly) {
  for (const scenario of Object.keys(expectedBridged)) {
    if (!bridgedRows.some((r) => r[1] === scenario)) surprises.push(`expected-failures.json names ${scenario}, which did not run`);
  }
}
for (const v of ['v2', 'v1']) {
  for (const name of auth.names) {
    const [r, why] = [auth.found[v][name], expectedAuth[v]?.[name]];
    if (r && !passes(r) && !why) surprises.push(`auth ${name} fails with the ${v} client`);
    if (passes(r) && why) surprises.push(`auth ${name} passes with the ${v} client: remove it from expected-failures.json`);
  }
  for (const name of Object.keys(expectedAuth[v] ?? {})) {
    if (!auth.names.includes(name)) surprises.push(`expected-failures.json names auth ${name}, which did not run`);
  }
}
const expectedCount =
  bridgedRows.filter((r) => !passes(r[5]) && expectedBridged[r[1]]).length +
  ['v2', 'v1'].reduce((n, v) => n + auth.names.filter((a) => !passes(auth.found[v][a]) && expectedAuth[v]?.[a]).length, 0);
console.log(`expected failures (tests/conformance/expected-failures.json): ${expectedCount}; unexpected: ${surprises.length}`);
if (strict && surprises.length) {
  console.log(`conformance: unexpected results: ${surprises.join('; ')}`);
  process.exit(1);
}
if (strict && lost.length) {
  console.log(
    `conformance: ${lost.length} scenarios pass directly but not through the gateway: ${lost.map((r) => r[1]).join(', ')}`,
  );
  process.exit(1);
}
