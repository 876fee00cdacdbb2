// Try the gateway as an OAuth protected resource on your own machine (the book's
// "Authorization (OAuth)" page): a real authorization server (oidc-provider, the one the
// OAuth interop tests sign in to) on 127.0.0.1, the gateway config that trusts it, and a
// token for the user alice. Run through scripts/try-oauth.
//
//   scripts/try-oauth [--gateway http://127.0.0.1:8080] [--upstream http://127.0.0.1:9100/mcp] [--out DIR]
//       writes DIR/gateway.toml (default target/try-oauth), prints it, a token and the
//       commands to try; serves until Ctrl-C.
//   scripts/try-oauth --check
//       the same, end to end: the demo server and a gateway started from the written
//       config, a call without a token (401 naming the metadata), the metadata, and a
//       call with the token (200); prints "try-oauth: N passed, M failed" and exits.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { startAuthServer, USER } from './auth_server.mjs';
import { REPO, gatewayBinary, startDemoServer } from './harness.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const check = args.includes('--check');
const out = option('--out', join(REPO, 'target', 'try-oauth'));
const PATH = '/mcp/rooms';

function configText(issuer, listen, upstream) {
  return `# Written by scripts/try-oauth: the gateway as an OAuth protected resource of the
# authorization server it started on ${issuer} (alive while the script runs).
[[listener]]
address = "${listen}"

[admin]
address = "127.0.0.1:0"

[[auth]]
name = "local"
type = "oauth"
issuer = "${issuer}"
scopes = ["mcp:tools"]
required_scopes = ["mcp:tools"]

[[upstream]]
id = "rooms"
name = "Room booking (demo)"
url = "${upstream}"

[[route]]
path = "${PATH}"
upstream = "rooms"
auth = ["local"]
`;
}

/** A child process whose output is kept; `waitFor(re)` resolves with the first match. */
function child(command, commandArgs) {
  const proc = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const waiters = [];
  const feed = (d) => {
    output += d;
    for (const w of waiters) {
      const m = output.match(w.re);
      if (m) w.resolve(m);
    }
  };
  proc.stdout.on('data', feed);
  proc.stderr.on('data', feed);
  return {
    output: () => output,
    stop: () => proc.kill('SIGTERM'),
    waitFor: (re, what) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${what} within 30 s:\n${output}`)), 30_000);
        waiters.push({ re, resolve: (m) => (clearTimeout(timer), resolve(m)) });
        feed('');
      }),
  };
}

const server = await startAuthServer();
const gatewayUrl = option('--gateway', 'http://127.0.0.1:8080');
const stopAll = [() => server.stop()];
let failed = 0;
let passed = 0;
const expect = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  ok ? passed++ : failed++;
};
try {
  if (!check) {
    mkdirSync(out, { recursive: true });
    const config = join(out, 'gateway.toml');
    const listen = new URL(gatewayUrl).host;
    writeFileSync(config, configText(server.issuer, listen, option('--upstream', 'http://127.0.0.1:9100/mcp')));
    const { access_token: token } = await server.userToken(`${gatewayUrl}${PATH}`, 'mcp:tools');
    console.log(`authorization server ${server.issuer} (user ${USER}; tokens live 10 minutes)\n`);
    console.log(`# ${config}:\n${configText(server.issuer, listen, option('--upstream', 'http://127.0.0.1:9100/mcp'))}`);
    console.log(`# in other terminals: the demo server, then the gateway with this config`);
    console.log(`cargo run --release -- demo-upstream`);
    console.log(`cargo run --release -- run --config ${config}\n`);
    console.log(`# without a token: 401, and WWW-Authenticate names the resource metadata`);
    console.log(`curl -si ${gatewayUrl}${PATH} -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -d '{}' | grep -i www-authenticate`);
    console.log(`# alice's token, for the resource ${gatewayUrl}${PATH}:`);
    console.log(`TOKEN=${token}`);
    console.log(`# tools/list as alice:`);
    console.log(
      `curl -s ${gatewayUrl}${PATH} -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' ` +
        `-H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' ` +
        `-d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'`,
    );
    console.log(`\nCtrl-C stops the authorization server.`);
    await new Promise((resolve) => {
      for (const s of ['SIGINT', 'SIGTERM']) process.once(s, resolve);
    });
  } else {
    const demo = await startDemoServer();
    stopAll.push(demo.stop);
    // The gateway's port is picked first, so the token names its resource.
    const port = await new Promise((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const p = probe.address().port;
        probe.close(() => resolve(p));
      });
    });
    mkdirSync(out, { recursive: true });
    const config = join(out, 'gateway.toml');
    writeFileSync(config, configText(server.issuer, `127.0.0.1:${port}`, demo.url));
    const gateway = child(gatewayBinary(), ['run', '--config', config]);
    stopAll.push(gateway.stop);
    await gateway.waitFor(/listening listener=\S+ addr=127\.0\.0\.1:\d+/, 'the gateway listening');
    const url = `http://127.0.0.1:${port}${PATH}`;
    const list = (headers) =>
      fetch(url, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'MCP-Protocol-Version': '2026-07-28',
          'Mcp-Method': 'tools/list',
          ...headers,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/list',
          params: {
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': {},
            },
          },
        }),
      });
    const anonymous = await list({});
    const challenge = anonymous.headers.get('www-authenticate') ?? '';
    expect(anonymous.status === 401 && /resource_metadata="[^"]+"/.test(challenge), `no token: 401, ${challenge}`);
    const metadataUrl = challenge.match(/resource_metadata="([^"]+)"/)?.[1];
    const metadata = metadataUrl ? await (await fetch(metadataUrl)).json() : {};
    expect(
      metadata.resource === url && metadata.authorization_servers?.includes(server.issuer),
      `the resource metadata names ${url} and the issuer`,
    );
    const { access_token: token } = await server.userToken(url, 'mcp:tools');
    const signedIn = await list({ Authorization: `Bearer ${token}` });
    const body = await signedIn.text();
    expect(signedIn.status === 200 && body.includes('book_room'), `alice's token: ${signedIn.status}, the demo's tools`);
    if (failed) console.log(gateway.output());
  }
} finally {
  for (const stop of stopAll.reverse()) await stop();
}
if (check) {
  console.log(`try-oauth: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
process.exit(0);
