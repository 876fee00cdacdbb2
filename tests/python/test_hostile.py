"""The hostile-upstream suite: every row of `hostile_cases.py`, played twice.

Directly (a client talking straight to the hostile upstream): the case's
marker reaches the client (or, for an attack on the answers, the upstream),
so the danger is real. Through the gateway (a real `portcullis run` process
per row, with the row's settings): the client gets a JSON-RPC error with
exactly the row's `data.reason` and HTTP status, nothing of the dangerous
message (no marker anywhere in any reply), and the admin /metrics count the
refusal under that reason.

A table of the results: `.venv/bin/python tests/python/test_hostile.py`.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import hostile_cases
from hostile_cases import Case
from conftest import bound_addresses, metric, wait_ready
from hostile_upstream import HostileUpstream

REPO = Path(__file__).resolve().parents[2]
VERSION = "2026-07-28"
LEGACY = "2025-11-25"
DIRECT_TIMEOUT_S = 2.5  # longer than any gateway timeout a row sets (1s)
CLIENT_TIMEOUT_S = 15.0
CASES = {c.name: c for c in hostile_cases.CASES}


# ------------------------------------------------------------------ the client

def request(c: Case, rid: int, extra: dict | None = None) -> tuple[dict, bytes]:
    """Headers and body of the client's request (a retry when `extra`)."""
    params: dict = {"_meta": {"io.modelcontextprotocol/protocolVersion": c.ask.version,
                              "io.modelcontextprotocol/clientCapabilities": c.ask.caps}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": c.ask.version, "mcp-method": c.ask.method}
    if c.ask.target and c.ask.method.startswith("tasks/"):
        params.update(taskId=c.ask.target)
        headers["mcp-name"] = c.ask.target
    elif c.ask.target:
        params.update(name=c.ask.target, arguments={"hint": "the big room"})
        headers["mcp-name"] = c.ask.target
    params.update(extra or {})
    body = {"jsonrpc": "2.0", "id": rid, "method": c.ask.method, "params": params}
    return headers, json.dumps(body).encode()


def answers(question: dict, c: Case) -> dict:
    """Accept every form, filling each field from what was offered."""
    out = {}
    for key, q in question.get("result", {}).get("inputRequests", {}).items():
        props = q.get("params", {}).get("requestedSchema", {}).get("properties", {})
        content = {name: (p["enum"][0] if "enum" in p else c.answer_text) for name, p in props.items()}
        out[key] = {"action": "accept", "content": content}
    return out


@dataclass
class Reply:
    status: int | None
    text: str  # everything the client received (head and body)
    data: str | None  # the final JSON-RPC message's text (a JSON body or the last event's data)
    body: bytes = b""
    timed_out: bool = False

    def header(self, name: str) -> str | None:
        """A response header (the head is the text up to the first blank line)."""
        for line in re.split(r"\r?\n", self.text):
            if not line.strip():
                return None
            k, sep, v = line.partition(":")
            if sep and k.strip().lower() == name:
                return v.strip()
        return None

    @property
    def message(self) -> dict | None:
        try:
            return json.loads(self.data) if self.data is not None else None
        except ValueError:
            return None


def last_data(body: str, is_stream: bool) -> str | None:
    """The text of the final message: the body, or the last event's data."""
    if not is_stream:
        return body
    events = [e for e in re.split(r"\r?\n\r?\n", body) if "data:" in e]
    if not events:
        return None
    return "\n".join(line[5:].removeprefix(" ") for line in re.split(r"\r?\n", events[-1])
                     if line.startswith("data:"))


def dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            return out + body
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


def send_raw(url: str, headers: dict, body: bytes, method: str = "POST") -> Reply:
    """A raw HTTP/1.1 exchange: what a client straight at the upstream gets,
    whatever the upstream does (a hang is `timed_out`)."""
    host, port = re.match(r"http://([^:/]+):(\d+)", url).groups()
    path = url.split(f":{port}", 1)[1]
    head = f"{method} {path} HTTP/1.1\r\nhost: {host}:{port}\r\nconnection: close\r\ncontent-length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    data, timed_out = b"", False
    with socket.create_connection((host, int(port)), timeout=DIRECT_TIMEOUT_S) as s:
        s.sendall(head.encode() + body)
        deadline = time.monotonic() + DIRECT_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                part = s.recv(65536)
                if not part:
                    break
                data += part
            else:
                timed_out = True
        except socket.timeout:
            timed_out = True
        except ConnectionError:
            pass
    text = data.decode("utf-8", "replace")
    status = int(text[9:12]) if text.startswith("HTTP/1.1 ") else None
    head, _, body = data.partition(b"\r\n\r\n")
    head_text = head.decode("latin-1").lower()
    if "transfer-encoding: chunked" in head_text:
        body = dechunk(body)
    body_text = body.decode("utf-8", "replace")
    message = last_data(body_text, "text/event-stream" in head_text) if not timed_out else None
    return Reply(status, text, message, body, timed_out)


def send_http(client: httpx2.Client, url: str, headers: dict, body: bytes, method: str = "POST") -> Reply:
    r = client.request(method, url, headers=headers, content=body)
    head = "".join(f"{k}: {v}\n" for k, v in r.headers.items())
    is_stream = r.headers.get("content-type", "").startswith("text/event-stream")
    return Reply(r.status_code, head + "\n" + r.text, last_data(r.text, is_stream), r.content)


def play_resumed(c: Case, send) -> list[Reply]:
    """A 2025-11-25 session (initialize, notifications/initialized), then its
    stream resumed with Last-Event-ID: the replayed events are the last reply."""
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            "mcp-protocol-version": LEGACY}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": c.ask.caps, "clientInfo": {"name": "hostile-suite", "version": "1"}}}
    first = send(base, json.dumps(init).encode())
    session = first.header("mcp-session-id")
    assert session, f"{c.name}: initialize gave no session:\n{first.text[:500]}"
    base["mcp-session-id"] = session
    initialized = send(base, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    listen = {"accept": "text/event-stream", "mcp-protocol-version": LEGACY, "mcp-session-id": session,
              "last-event-id": "r0"}
    return [first, initialized, send(listen, b"", "GET")]


def create_task(c: Case, send) -> Reply:
    """The tools/call that creates the task a tasks/* case is about."""
    params = {"_meta": {"io.modelcontextprotocol/protocolVersion": c.ask.version,
                        "io.modelcontextprotocol/clientCapabilities": c.ask.caps},
              "name": "hostile_tool", "arguments": {}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": c.ask.version, "mcp-method": "tools/call", "mcp-name": "hostile_tool"}
    body = {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": params}
    return send(headers, json.dumps(body).encode())


def play(c: Case, send) -> list[Reply]:
    """The client's side of a case: ask, and answer up to `rounds` questions."""
    if c.ask.resume:
        return play_resumed(c, send)
    if c.ask.version != VERSION:
        pytest.fail(f"{c.name}: add the {c.ask.version} session handshake to play() first", pytrace=False)
    replies: list[Reply] = []
    extra = None
    if c.ask.method.startswith("tasks/"):
        # A task is polled with the state its creation gave (the gateway's own).
        created = create_task(c, send)
        replies.append(created)
        state = ((created.message or {}).get("result") or {}).get("requestState")
        extra = {"requestState": state} if state else None
    headers, body = request(c, 1, extra)
    for n in range(c.rounds + 1):
        reply = send(headers, body)
        replies.append(reply)
        q = reply.message or {}
        if n == c.rounds or q.get("result", {}).get("resultType") != "input_required":
            break
        time.sleep(c.pause)
        retry = {"requestState": q["result"]["requestState"], "inputResponses": answers(q, c)}
        headers, body = request(c, n + 2, retry)
    return replies


async def sdk_exchange(url: str, c: Case) -> dict[str, list[str]]:
    """The official Python SDK as the client, straight at `url`: what its
    elicitation and sampling callbacks were shown, and the tool's result."""
    seen: dict[str, list[str]] = {"person": [], "model": [], "result": []}

    async def on_elicit(context, params):
        seen["person"].append(params.model_dump_json(by_alias=True))
        return types.ElicitResult(action="decline")

    async def on_sample(context, params):
        seen["model"].append(params.model_dump_json(by_alias=True))
        return types.CreateMessageResult(role="assistant", model="none",
                                         content=types.TextContent(type="text", text="no"))

    http = create_mcp_http_client()
    try:
        async with http, Client(streamable_http_client(url, http_client=http), mode=VERSION,
                                elicitation_callback=on_elicit, sampling_callback=on_sample,
                                input_required_max_rounds=1, read_timeout_seconds=DIRECT_TIMEOUT_S) as client:
            with anyio.fail_after(2 * DIRECT_TIMEOUT_S):
                res = await client.call_tool(c.ask.target or "hostile_tool", {"hint": "the big room"})
            seen["result"].append(res.model_dump_json(by_alias=True))
    except Exception:  # the SDK gives up after the one round; what it showed is recorded
        pass
    return seen


# ----------------------------------------------------------------- the gateway

def config_text(c: Case, upstream_url: str, policies: Path | None) -> str:
    upstream = {"connect_timeout": '"1s"', "response_timeout": '"1s"', "stream_idle_timeout": '"1s"'}
    if c.policy:
        upstream["policy"] = '"hostile"'
    upstream.update(c.upstream)
    lines = "".join(f"{k} = {v}\n" for k, v in upstream.items())
    policy_dir = f"[policies]\ndir = {json.dumps(str(policies))}\n" if policies else ""
    return (f'[[listener]]\naddress = "127.0.0.1:0"\n[admin]\naddress = "127.0.0.1:0"\n'
            f'[audit]\nsink = "off"\n{policy_dir}'
            f'[[upstream]]\nid = "hostile"\nname = "Hostile upstream"\nurl = "{upstream_url}"\n{lines}'
            f'[[route]]\npath = "/mcp"\nupstream = "hostile"\n{c.gateway}')


def binary() -> Path:
    path = Path(os.environ.get("PORTCULLIS_BIN") or REPO / "target" / "debug" / "portcullis")
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"portcullis binary not found at {path}: run `cargo build`", pytrace=False)
    return path


@contextmanager
def gateway_for(c: Case, upstream: HostileUpstream):
    """A `portcullis run` process routing /mcp to the case's path."""
    with tempfile.TemporaryDirectory() as tmp:
        policies = None
        if c.policy:
            policies = Path(tmp) / "policies"
            policies.mkdir()
            (policies / "hostile.toml").write_text(c.policy)
        config = Path(tmp) / "gateway.toml"
        config.write_text(config_text(c, upstream.url(c.name), policies))
        log = Path(tmp) / "gateway.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([str(binary()), "run", "--config", str(config)],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            try:
                bound = bound_addresses(log, proc, ("listener", "admin"))
                wait_ready(f"http://{bound['admin']}/readyz", proc, log)
                yield f"http://{bound['listener']}/mcp", f"http://{bound['admin']}"
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)



# ------------------------------------------------------------------- the checks

def check_direct(c: Case, upstream: HostileUpstream) -> str:
    upstream.received[c.name].clear()
    replies = play(c, lambda h, b, m="POST": send_raw(upstream.url(c.name), h, b, m))
    last = replies[-1]
    if c.leak == "upstream":
        reached = any(c.marker.encode() in r.body for r in upstream.received[c.name])
        assert reached, f"{c.name}: directly, the answers never reached the upstream"
        return "the answers reach the upstream"
    if c.direct == "hangs":
        assert last.timed_out and c.marker not in last.text, f"{c.name}: directly, the client got an answer"
        return f"the client hangs past {DIRECT_TIMEOUT_S}s"
    if c.direct == "gzip":
        assert c.marker.encode() in gzip.decompress(last.body), f"{c.name}: directly, nothing compressed"
        return "reaches the client compressed"
    assert c.marker in last.text, f"{c.name}: directly, the dangerous message never reached the client:\n{last.text[:500]}"
    if c.proof:
        why = c.proof(last.data or "")
        assert why is None, f"{c.name}: directly, {why}"
    if c.sdk:
        seen = anyio.run(sdk_exchange, upstream.url(c.name), c)
        assert any(c.marker in s for s in seen[c.sdk]), f"{c.name}: the SDK did not pass it to the {c.sdk}: {seen}"
        return SDK_SAYS[c.sdk]
    return "reaches the client"


SDK_SAYS = {"person": "the Python SDK shows it to the person",
            "model": "the Python SDK hands it to the model",
            "result": "the Python SDK returns it as the tool's result"}


def check_gateway(c: Case, upstream: HostileUpstream) -> tuple[str, str]:
    with gateway_for(c, upstream) as (url, admin):
        upstream.received[c.name].clear()
        with httpx2.Client(timeout=CLIENT_TIMEOUT_S) as client:
            replies = play(c, lambda h, b, m="POST": send_http(client, url, h, b, m))
        last = replies[-1]
        error = (last.message or {}).get("error") or {}
        reason = error.get("data", {}).get("reason")
        assert reason == c.reason, f"{c.name}: expected {c.reason}, got {reason}: {last.text[:800]}"
        assert last.status == c.status, f"{c.name}: HTTP {last.status}, expected {c.status}"
        assert (last.message or {}).get("result") is None
        for r in replies:
            assert c.marker not in r.text, f"{c.name}: the dangerous message reached the client:\n{r.text[:800]}"
        if c.leak == "upstream":
            leaked = [r for r in upstream.received[c.name] if c.marker.encode() in r.body]
            assert not leaked, f"{c.name}: the answers reached the upstream"
        with urllib.request.urlopen(f"{admin}/metrics", timeout=5) as m:
            metrics = m.read().decode()
    counted = metric(metrics, "portcullis_requests_total", upstream="hostile", method=c.ask.metric_method,
                     outcome=c.reason)
    assert counted == 1, f"{c.name}: portcullis_requests_total{{outcome={c.reason}}} is {counted}, not 1"
    seen = [f"requests_total{{outcome={c.reason}}}=1"]
    for name, labels in also_counted(c):
        value = metric(metrics, name, **labels)
        assert value >= 1, f"{c.name}: {name}{labels} is {value}"
        seen.append(f"{name.removeprefix('portcullis_')}=" + str(int(value)))
    return f"{reason}, HTTP {last.status}", "; ".join(seen)


# The reasons under [upstream] that the reason table counts as the upstream's
# failures (`Reason::is_upstream_failure`; tests/it/hostile_reasons.rs keeps
# this set equal to that column).
UPSTREAM_FAILURES = {"upstream_bad_response", "upstream_timeout", "upstream_connection_closed",
                     "upstream_response_too_large", "upstream_protocol_violation", "upstream_refused"}
POLICY_CODE = -32010


def also_counted(c: Case) -> list[tuple[str, dict]]:
    """The counters besides requests_total that a refusal of this kind moves."""
    reads_text = c.ask.resume or c.ask.method in {"server/discover", "tools/list", "prompts/list", "resources/list",
                                                  "resources/templates/list"}
    if (reads_text and c.reason == "prompt_injection") or not c.question:
        # Not a question: the text rules' verdict is what is counted.
        rule = {"invalid_name": "name"}.get(c.reason, c.reason)
        if c.policy == hostile_cases.LISTING_REFUSES:
            # What a server lists is judged by the intent detector.
            rule = "listing_intent"
        return [("portcullis_policy_verdicts_total", {"upstream": "hostile", "rule": rule, "action": "block"})]
    if c.reason in UPSTREAM_FAILURES:
        return [("portcullis_upstream_errors_total", {"upstream": "hostile", "reason": c.reason})]
    if c.name == "task_without_capability":
        # The missing capability is the Tasks extension itself: no question was asked.
        return []
    if c.reason in {"invalid_input_required", "unknown_input_request_method",
                    "schema_not_allowed", "limit_exceeded", "secret_field_requested", "unsafe_option_value",
                    "url_mode_not_allowed", "url_not_allowed", "deprecated_request_kind",
                    "sampling_context_not_allowed", "prompt_injection", "missing_client_capability",
                    "input_required_not_allowed", "replayed_question"}:
        return [("portcullis_input_required_total", {"upstream": "hostile", "outcome": "refused"})]
    if c.reason == "rate_limited":
        return [("portcullis_rate_limited_total", {"upstream": "hostile", "scope": "input_required_rounds"})]
    return []


# ------------------------------------------------------------------ pytest glue

@pytest.fixture(scope="module")
def hostile() -> HostileUpstream:
    return HostileUpstream(hostile_cases.scripts()).start_in_thread()


@pytest.mark.parametrize("name", list(CASES))
def test_danger_is_real_directly_and_gone_through_the_gateway(hostile: HostileUpstream, name: str) -> None:
    c = CASES[name]
    check_direct(c, hostile)
    check_gateway(c, hostile)


REWRITES = {r.name: r for r in hostile_cases.REWRITES}


def strings_of(reply: Reply) -> list[str]:
    """Every string of every JSON-RPC message the client decoded."""
    body = reply.text.split("\n\n", 1)[-1] if reply.text.startswith("HTTP/") else reply.text
    texts = [reply.data or ""]
    texts += ["\n".join(line[5:].removeprefix(" ") for line in event.splitlines() if line.startswith("data:"))
              for event in re.split(r"\r?\n\r?\n", body)]
    out: list[str] = []

    def walk(v) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                out.append(k)
                walk(x)

    for t in texts:
        try:
            walk(json.loads(t))
        except ValueError:
            pass
    return out


def dangerous(r: hostile_cases.Rewrite, reply: Reply) -> bool:
    if r.chars is None:
        return r.marker in reply.text
    return any(re.search(r.chars, s) for s in strings_of(reply))


def check_rewritten(r: hostile_cases.Rewrite, upstream: HostileUpstream) -> tuple[str, str]:
    c = Case(r.name, "", r.attack, r.script, 200, ask=r.ask)
    direct = play(c, lambda h, b: send_raw(upstream.url(r.name), h, b))[-1]
    assert dangerous(r, direct), f"{r.name}: directly, the danger never reached the client:\n{direct.text[:600]}"
    with gateway_for(c, upstream) as (url, admin):
        with httpx2.Client(timeout=CLIENT_TIMEOUT_S) as client:
            last = play(c, lambda h, b: send_http(client, url, h, b))[-1]
        with urllib.request.urlopen(f"{admin}/metrics", timeout=5) as m:
            metrics = m.read().decode()
    error = (last.message or {}).get("error") or {}
    assert "reason" not in (error.get("data") or {}), f"{r.name}: refused, not rewritten: {last.text[:600]}"
    assert last.status == 200, f"{r.name}: HTTP {last.status}"
    assert not dangerous(r, last), f"{r.name}: the danger reached the client through the gateway:\n{last.text[:800]}"
    assert any(r.kept in s for s in strings_of(last)), f"{r.name}: {r.kept!r} did not arrive:\n{last.text[:800]}"
    removed = sum(metric(metrics, "portcullis_policy_verdicts_total", upstream="hostile", rule=rule, action=action)
                  for rule, action in [("text_safety", "sanitize"), ("provenance", "remove"),
                                       ("listing_intent", "remove")])
    assert removed >= 1, f"{r.name}: no removal counted in policy_verdicts_total"
    return "delivered without it", f"policy_verdicts_total={int(removed)}"


@pytest.mark.parametrize("name", list(REWRITES))
def test_rewritten_danger_is_real_directly_and_gone_through_the_gateway(hostile: HostileUpstream, name: str) -> None:
    check_rewritten(REWRITES[name], hostile)


def upstream_reasons() -> dict[str, str]:
    with (Path(__file__).parent / "hostile_reasons.toml").open("rb") as f:
        return tomllib.load(f)["upstream"]


def test_every_reason_an_upstream_can_provoke_has_a_case() -> None:
    covered = {c.reason for c in hostile_cases.CASES}
    missing = sorted(set(upstream_reasons()) - covered)
    assert not missing, f"add a row to hostile_cases.py for: {missing}"
    stray = sorted(covered - set(upstream_reasons()))
    assert not stray, f"rows for reasons not under [upstream] in hostile_reasons.toml: {stray}"


def test_case_names_and_markers_are_unique() -> None:
    names = [c.name for c in hostile_cases.CASES] + [r.name for r in hostile_cases.REWRITES]
    assert len(names) == len(set(names))
    markers = [c.marker for c in hostile_cases.CASES] + [r.marker for r in hostile_cases.REWRITES]
    assert not any(a != b and a in b for a in markers for b in markers), "a marker inside another"


def main() -> None:
    """Play every row and print the table (reason, attack, direct, gateway)."""
    up = HostileUpstream(hostile_cases.scripts()).start_in_thread()
    print("| reason | attack | directly | through the gateway | counted |")
    print("|---|---|---|---|---|")
    failed = 0
    for c in hostile_cases.CASES:
        try:
            direct = check_direct(c, up)
            refused, counted = check_gateway(c, up)
        except (AssertionError, pytest.fail.Exception) as e:
            failed += 1
            direct, refused, counted = "?", f"FAILED: {str(e).splitlines()[0]}", ""
        print(f"| `{c.reason}` | {c.attack} | {direct} | {refused} | {counted} |", flush=True)
    for r in hostile_cases.REWRITES:
        try:
            delivered, counted = check_rewritten(r, up)
        except (AssertionError, pytest.fail.Exception) as e:
            failed += 1
            delivered, counted = f"FAILED: {str(e).splitlines()[0]}", ""
        print(f"| (rewritten) | {r.attack} | reaches the client | {delivered} | {counted} |", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
