/**
 * Portcullis adapter for mcp-defense-bench (adapters/CONTRACT.md).
 *
 * Drives the real gateway binary ($PORTCULLIS_BIN, the `untrusted` preset) over
 * loopback: each input is played by driver.py as a model and its MCP servers
 * would send it, through a fresh gateway, and the answer is only what the
 * gateway did at run time — enforce: it refused or changed a message on the
 * wire; detect: that, or a verdict it recorded (provenance, audit trail,
 * metrics). Fixture types that are not MCP traffic are reported as not seen.
 *
 * The driver gets the two inputs of the test case (attack and control) so that
 * both runs meet the same scripted servers; the case's id, vector and
 * expectations are never sent to it.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

export const meta = { tool: "portcullis", class: "runtime-proxy", reproducible: true };

const driverPath = process.env.PORTCULLIS_DEFENSE_DRIVER;
if (!driverPath) throw new Error("PORTCULLIS_DEFENSE_DRIVER must name bench/defense/mcp_defense_bench/driver.py");

let driver;
let lines;
const waiting = [];

function start() {
  driver = spawn(process.env.PYTHON ?? "python3", [driverPath], { stdio: ["pipe", "pipe", "inherit"] });
  lines = createInterface({ input: driver.stdout });
  lines.on("line", (line) => waiting.shift()?.resolve(line));
  driver.on("exit", (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`driver exited (${code})`));
    driver = undefined;
  });
  // Let the benchmark's runner exit when it is done: the driver ends on EOF.
  driver.unref();
  driver.stdin.unref?.();
  driver.stdout.unref?.();
}

function ask(message) {
  if (!driver) start();
  driver.stdout.ref?.();
  return new Promise((resolve, reject) => {
    waiting.push({ resolve, reject });
    driver.stdin.write(JSON.stringify(message) + "\n");
  }).finally(() => driver?.stdout.unref?.());
}

export async function assess(input, testcase) {
  const { fixture, benignControl } = testcase ?? {};
  const strip = (x) => {
    if (!x || typeof x !== "object") return x;
    const { expected: _e, ...rest } = x;
    return rest;
  };
  const line = await ask({ input: strip(input), case: { fixture: strip(fixture), benignControl: strip(benignControl) } });
  const answer = JSON.parse(line);
  if (answer.error) throw new Error(`portcullis adapter: ${answer.error}\n${answer.trace ?? ""}`);
  return { detect: !!answer.detect, enforce: !!answer.enforce, signal: answer.signal };
}
