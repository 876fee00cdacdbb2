#!/usr/bin/env python3
"""server-everything's elicitation demo through the gateway, as a 2026-07-28 client.

The official reference server (`@modelcontextprotocol/server-everything`, a
2025-11-25 stdio program) pushes a form during its `trigger-elicitation-request`
call. Behind the gateway, a 2026-07-28 client should receive that form as an
`input_required` result, answer it, and get the program's own completion. For
each preset (`untrusted`, `trusted`) this starts `portcullis run` in front of
the program (listener and admin on port 0 of 127.0.0.1), lists the tools, calls
the demo tool, and says what came back: the form delivered as `input_required`
(with the fields the program asked for), or refused (the gateway's reason).
When delivered, it answers the form and checks that the program's completion
arrives.

The program is the one tests/interop installs (`npm ci` there), or the corpus'
install in the realworld cache. Standard library only.

  elicitation.py --bin PATH [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import ROOT, cache_dir  # noqa: E402

MODERN = "2026-07-28"
TOOL = "trigger-elicitation-request"
PRESETS = ("untrusted", "trusted")
READY_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 60.0
# The demo's required field and a few others, answered as a person would.
ANSWER = {"name": "Ada Lovelace", "check": True, "email": "ada@example.org", "integer": 7}
_LISTENER = re.compile(r"\blistening\b.*?\baddr=(\S+)")
_ADMIN = re.compile(r"\badmin listening\b.*?\baddr=(\S+)")


class Unavailable(Exception):
    """The program or the gateway cannot be run here."""


@dataclass(frozen=True)
class Program:
    node: Path
    script: Path
    version: str


def find_program() -> Program:
    """server-everything: tests/interop's install first, then the corpus cache's."""
    interop = ROOT / "tests" / "interop" / "node_modules"
    corpus = cache_dir() / "npm" / "modelcontextprotocol+server-everything" / "node_modules"
    nodes = [interop / ".bin" / "node", cache_dir() / "node" / "node_modules" / ".bin" / "node"]
    for modules in (interop, corpus):
        package = modules / "@modelcontextprotocol" / "server-everything"
        script = package / "dist" / "index.js"
        if not script.is_file():
            continue
        node = next((n for n in [modules / ".bin" / "node", *nodes] if n.is_file()), None)
        if node is None:
            continue
        version = json.loads((package / "package.json").read_text()).get("version", "?")
        return Program(node, script, version)
    raise Unavailable(f"server-everything is not installed (npm ci in {interop.parent}, or scripts/realworld --subset)")


def config(program: Program, preset: str) -> str:
    command = json.dumps([str(program.node), str(program.script), "stdio"])
    return f"""[[listener]]
address = "127.0.0.1:0"

[admin]
address = "127.0.0.1:0"

[audit]
sink = "off"

[[upstream]]
id = "everything"
name = "Everything"
command = {command}
policy = "{preset}"
response_timeout = "30s"
stop_timeout = "1s"

[[route]]
path = "/mcp"
upstream = "everything"
"""


class Gateway:
    """`portcullis run` on a config written into a scratch folder."""

    def __init__(self, binary: str, text: str, folder: Path) -> None:
        (folder / "gateway.toml").write_text(text)
        self.log_path = folder / "gateway.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [binary, "run", "--config", "gateway.toml"],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url, admin = self._addresses()
        self._wait_ready(admin)

    def _addresses(self) -> tuple[str, str]:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            listener = admin = None
            for line in self.log_path.read_text(errors="replace").splitlines():
                if m := _ADMIN.search(line):
                    admin = m.group(1)
                elif m := _LISTENER.search(line):
                    listener = listener or m.group(1)
            if listener and admin:
                return f"http://{listener}/mcp", f"http://{admin}"
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise Unavailable(f"the gateway did not listen: {self.tail()}")

    def _wait_ready(self, admin: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(admin + "/readyz", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise Unavailable(f"the gateway was not ready: {self.tail()}")

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-600:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


class Client:
    """A 2026-07-28 client over streamable HTTP: one request per POST, no session."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.next_id = 0

    def request(self, method: str, params: dict, name: str | None = None) -> dict:
        self.next_id += 1
        params = dict(params)
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
        }
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        req = urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=CALL_TIMEOUT_S) as resp:
                kind = resp.headers.get("Content-Type", "")
                raw = resp.read().decode()
        except urllib.error.HTTPError as e:
            kind, raw = e.headers.get("Content-Type", ""), e.read().decode(errors="replace")
        return _response(raw, kind, self.next_id)


def _response(raw: str, kind: str, rid: int) -> dict:
    """The JSON-RPC response to `rid` in a JSON body or an event stream."""
    if "text/event-stream" not in kind:
        try:
            return json.loads(raw)
        except ValueError:
            return {"error": {"message": f"not JSON: {raw[:200]}"}}
    for event in raw.split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith("data:"))
        if not data:
            continue
        try:
            msg = json.loads(data)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("id") == rid and ("result" in msg or "error" in msg):
            return msg
    return {"error": {"message": "the stream ended without a response"}}


def _texts(result: dict) -> list[str]:
    return [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict)]


def outcome(client: Client) -> dict:
    """What a 2026-07-28 client gets from the demo, round by round."""
    listing = client.request("tools/list", {})
    tools = [t.get("name") for t in (listing.get("result") or {}).get("tools") or []]
    out: dict = {"tool_listed": TOOL in tools}
    first = client.request("tools/call", {"name": TOOL, "arguments": {}}, TOOL)
    if "error" in first:
        err = first["error"]
        out.update(delivered=False, how="error", reason=(err.get("data") or {}).get("reason"),
                   message=str(err.get("message"))[:300])
        return out
    result = first.get("result") or {}
    if result.get("resultType") != "input_required":
        out.update(delivered=False, how="error result" if result.get("isError") else "result",
                   message=" ".join(_texts(result))[:300])
        return out
    asks = {k: v for k, v in (result.get("inputRequests") or {}).items() if v.get("method") == "elicitation/create"}
    if not asks:
        out.update(delivered=False, how="input_required without a form", message=json.dumps(result)[:300])
        return out
    key, ask = next(iter(asks.items()))
    schema = (ask.get("params") or {}).get("requestedSchema") or {}
    out.update(delivered=True, how="input_required", fields=sorted((schema.get("properties") or {})))
    retry = client.request(
        "tools/call",
        {"name": TOOL, "arguments": {}, "inputResponses": {key: {"action": "accept", "content": ANSWER}},
         "requestState": result.get("requestState")},
        TOOL,
    )
    final = retry.get("result") or {}
    out["answered"] = (
        "result" in retry
        and final.get("resultType", "complete") == "complete"
        and not final.get("isError")
        and any("Ada Lovelace" in t for t in _texts(final))
    )
    if not out["answered"]:
        out["answer_error"] = json.dumps(retry)[:300]
    return out


def measure(binary: str) -> dict:
    """Per preset: the demo's outcome; or why it could not be measured."""
    try:
        program = find_program()
    except Unavailable as e:
        return {"error": str(e)}
    report: dict = {"server_everything": program.version}
    for preset in PRESETS:
        with tempfile.TemporaryDirectory(prefix="portcullis-elicitation-") as tmp:
            try:
                gw = Gateway(binary, config(program, preset), Path(tmp))
            except Unavailable as e:
                report[preset] = {"error": str(e)}
                continue
            try:
                report[preset] = outcome(Client(gw.url))
            except (OSError, urllib.error.URLError) as e:
                report[preset] = {"error": f"{type(e).__name__}: {e}; log: {gw.tail()}"}
            finally:
                gw.stop()
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "target" / "debug" / "portcullis"))
    args = ap.parse_args(argv)
    report = measure(args.bin)
    print(json.dumps(report, indent=2, ensure_ascii=False))
    ok = all(isinstance(report.get(p), dict) and report[p].get("delivered") and report[p].get("answered")
             for p in PRESETS)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
