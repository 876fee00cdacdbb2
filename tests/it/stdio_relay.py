"""A stdio MCP program that is another server's messages, relayed: every line
it reads on stdin is POSTed to the HTTP server at argv[1] (a scripted upstream
of the integration tests), and every JSON-RPC message of the answer — a JSON
body, or each event of a stream, as it arrives — is written on stdout, one per
line. So a test written against a scripted HTTP upstream runs, unchanged,
against a stdio upstream (tests/it/common: `over_both_kinds!`).

Each message is relayed on a thread of its own, so a program's answer can go
up while the call it answers still streams. A 2025-11-25 session is the one
its `initialize` answer opened; a 2026-07-28 request carries its method and
name in headers as the transport says. Python standard library only.
"""

import json
import sys
import threading
import urllib.error
import urllib.request

URL = sys.argv[1]
out_lock = threading.Lock()
session = {"id": None, "version": None}


def emit(text: str) -> None:
    text = text.strip()
    if not text:
        return
    with out_lock:
        sys.stdout.write(text.replace("\r", " ").replace("\n", " ") + "\n")
        sys.stdout.flush()


def headers_for(msg: dict) -> dict:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    version = meta.get("io.modelcontextprotocol/protocolVersion")
    if isinstance(version, str):
        headers["mcp-protocol-version"] = version
        headers["mcp-method"] = str(msg.get("method", ""))
        name = params.get("name") or params.get("uri")
        if isinstance(name, str) and name.isascii() and name.isprintable():
            headers["mcp-name"] = name
    elif session["version"]:
        headers["mcp-protocol-version"] = session["version"]
    if session["id"] and "mcp-method" not in headers:
        headers["mcp-session-id"] = session["id"]
    return headers


def relay(line: str) -> None:
    try:
        msg = json.loads(line)
    except ValueError:
        return
    if msg.get("method") == "ping" and "id" in msg:
        # The program's own liveness: answered here, as any program does,
        # never a request of the server behind it.
        emit(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}))
        return
    req = urllib.request.Request(URL, data=line.encode(), headers=headers_for(msg), method="POST")
    try:
        resp = urllib.request.urlopen(req, timeout=60)
    except urllib.error.HTTPError as e:
        resp = e
    except OSError as e:
        if "id" in msg and "method" in msg:
            emit(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32603, "message": f"relay: {e}"}}))
        return
    with resp:
        if msg.get("method") == "initialize" and resp.headers.get("mcp-session-id"):
            session["id"] = resp.headers.get("mcp-session-id")
        ctype = resp.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            data = []
            for raw in resp:
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not text:
                    if data:
                        emit("\n".join(data))
                    data = []
                elif text.startswith("data:"):
                    data.append(text[5:].lstrip(" "))
            if data:
                emit("\n".join(data))
            return
        body = resp.read().decode("utf-8", "replace")
    if msg.get("method") == "initialize":
        try:
            session["version"] = json.loads(body)["result"]["protocolVersion"]
        except (ValueError, KeyError, TypeError):
            pass
    if body.strip().startswith("{"):
        emit(body)
    elif "id" in msg and "method" in msg:
        emit(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32603, "message": f"relay: HTTP {resp.status}"}}))


for line in sys.stdin:
    if line.strip():
        threading.Thread(target=relay, args=(line,), daemon=True).start()
