"""The model's side: a 2026-07-28 MCP client over plain HTTP/1.1.

Each request carries what the specification asks of a 2026-07-28 client: the
`MCP-Protocol-Version`, `Mcp-Method` and (for a named request) `Mcp-Name`
headers, and `_meta` with the protocol version, client info and capabilities.
A reply is read as a JSON body or an event stream (the final response of the
stream is the reply). One keep-alive connection per client.
"""

from __future__ import annotations

import http.client
import itertools
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2026-07-28"
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    message: dict[str, Any] | None  # the JSON-RPC response, when one came
    raw: bytes

    @property
    def result(self) -> dict[str, Any] | None:
        if self.message and isinstance(self.message.get("result"), dict):
            return self.message["result"]
        return None

    @property
    def error(self) -> dict[str, Any] | None:
        if self.message and isinstance(self.message.get("error"), dict):
            return self.message["error"]
        return None

    @property
    def reason(self) -> str | None:
        """The gateway's `data.reason` of a refusal (None for a result or an error
        without one)."""
        err = self.error
        if err and isinstance(err.get("data"), dict) and isinstance(err["data"].get("reason"), str):
            return err["data"]["reason"]
        return None


class Client:
    def __init__(self, url: str, headers: dict[str, str] | None = None, timeout: float = 30.0,
                 capabilities: dict[str, Any] | None = None):
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path or "/"
        self.extra_headers = dict(headers or {})
        self.timeout = timeout
        self.capabilities = capabilities if capabilities is not None else {}
        self._ids = itertools.count(1)
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self._conn

    def request(self, method: str, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        params = dict(params or {})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "portcullis-bench", "version": "1.0.0"},
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        }
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        wire = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL_VERSION,
            "mcp-method": method,
        }
        if method in NAMED and isinstance(params.get(NAMED[method]), str):
            wire["mcp-name"] = params[NAMED[method]]
        wire.update(self.extra_headers)
        wire.update(headers or {})
        return self.post(json.dumps(message, ensure_ascii=False).encode(), wire)

    def post(self, body: bytes, headers: dict[str, str]) -> Reply:
        for attempt in (0, 1):
            conn = self._connection()
            try:
                conn.request("POST", self.path, body=body, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()  # a kept-alive connection the gateway closed meanwhile
                if attempt:
                    raise
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        if hdrs.get("connection", "").lower() == "close":
            self.close()
        return Reply(resp.status, hdrs, parse_reply(raw, hdrs.get("content-type", "")), raw)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def parse_reply(raw: bytes, content_type: str) -> dict[str, Any] | None:
    if content_type.startswith("text/event-stream"):
        final = None
        for block in raw.decode(errors="replace").replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(line[5:].lstrip(" ") if line.startswith("data:") else "" for line in block.split("\n")
                             if line.startswith("data:"))
            if not data:
                continue
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            if isinstance(msg, dict) and ("result" in msg or "error" in msg):
                final = msg
        return final
    try:
        msg = json.loads(raw)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None
