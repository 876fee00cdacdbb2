"""Stdio upstreams (issue 23, Evidence) with real programs people install, driven by the
official Python SDK client (mcp 2.3.0) in both protocol generations through the gateway:

- `@modelcontextprotocol/server-everything` (TypeScript SDK 1.x, 2025-11-25 over stdio): its
  tools for a 2025-11-25 and a 2026-07-28 client; its form elicitation
  (`trigger-elicitation-request`, pushed by the program during the call) through the bridge
  under a policy that lets the form through, and refused under the default policy;
- `server-filesystem` confined by `[upstream.sandbox]` to a temporary folder T although the
  program itself is told it may use T's parent; and in front of a route's `roots`;
- `server-memory`: state kept by the program from one call to the next;
- the Python SDK stdio server (tests/interop/servers/py_stdio_server.py), which speaks
  2026-07-28 over stdio: its MRTR questions for a 2026-07-28 client, pushed to a 2025-11-25
  client through the bridge;
- the lifecycle: `eager`, `idle_timeout`, drain on SIGTERM, `max_processes`.

The npm packages are the pinned ones of tests/interop/package.json (`npm ci` there); the
gateway binary is $PORTCULLIS_BIN. Every gateway listens on port 0 of 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from conftest import _binary, bound_addresses
from interop_peers import INTEROP, Gateway, Process, _ready, _spawn, _wait, require_node

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = [LEGACY, MODERN]

NODE_MODULES = INTEROP / "node_modules"
NODE = NODE_MODULES / ".bin" / "node"
PACKAGES = NODE_MODULES / "@modelcontextprotocol"
EVERYTHING = [NODE, PACKAGES / "server-everything" / "dist" / "index.js", "stdio"]
FILESYSTEM = [NODE, PACKAGES / "server-filesystem" / "dist" / "index.js"]
MEMORY = [NODE, PACKAGES / "server-memory" / "dist" / "index.js"]
PY_STDIO = [Path(sys.executable), INTEROP / "servers" / "py_stdio_server.py"]
BWRAP = Path("/usr/bin/bwrap")

STOP_TIMEOUT_S = 1  # `stop_timeout` of the lifecycle upstreams
ROOTS_SETTLE_S = 3.0  # how long server-filesystem may take to apply the roots it was given
IN_A_ROW = 400  # sequential calls of one client in the reuse test
LONG_OP_S = 1  # `duration` of server-everything's trigger-long-running-operation

# server-everything's form (dist/tools/trigger-elicitation-request.js).
EVERYTHING_MESSAGE = "Please provide inputs for the following fields:"
EVERYTHING_FIELDS = [
    "name", "check", "firstLine", "email", "homepage", "birthdate", "integer", "number",
    "untitledSingleSelectEnum", "untitledMultipleSelectEnum", "titledSingleSelectEnum",
    "titledMultipleSelectEnum", "legacyTitledEnum",
]  # fmt: skip
EVERYTHING_TOOLS = {
    "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
    "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
    "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
    "trigger-elicitation-request", "trigger-url-elicitation", "simulate-research-query",
}  # fmt: skip
ANSWER = {"name": "Ada Lovelace", "check": True, "email": "ada@example.org", "integer": 7}
# Its integer field's description: "(do not give us your phone number, pin, or other sensitive
# info)": a negated request, which asks for no PIN (both presets deliver the form).
# A policy that lets that form through: the trusted preset, with the field named `integer`
# not taken for a secret.
FORM_POLICY = """\
extends = "trusted"
description = "server-everything's demo form: its integer field only mentions a pin it tells people not to give"
[secret_fields]
allow_names = ["integer"]
"""

STARTED = re.compile(r"stdio program started upstream=(\S+) pid=(\d+)")
GENERATION = re.compile(r"stdio program's generation upstream=(\S+) pid=\d+ generation=\"([^\"]+)\"")


# --- peers and gateways ---------------------------------------------------------------


def require_peers() -> None:
    """Node.js, the three npm servers and bubblewrap: a failure under
    PORTCULLIS_REQUIRE_PEERS=1, like every peer of these tests."""
    require_node()
    missing = [str(p[1]) for p in (EVERYTHING, FILESYSTEM, MEMORY) if not Path(p[1]).is_file()]
    if not BWRAP.is_file():
        missing.append(f"{BWRAP} (Debian package bubblewrap)")
    if missing:
        message = f"not installed: {', '.join(missing)} (run `npm ci` in {INTEROP})"
        if os.environ.get("PORTCULLIS_REQUIRE_PEERS") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def toml(value: Any) -> str:
    """A TOML value: strings and lists of strings are written as JSON writes them."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    if isinstance(value, Path):
        value = str(value)
    return json.dumps(value)


def upstream(uid: str, command: list[Any], route: str | None = None, **keys: Any) -> str:
    """One `[[upstream]]` (keys: TOML values, `sandbox` a dict, `roots` the route's) and its
    `[[route]]` at /<uid> (or `route`)."""
    sandbox = keys.pop("sandbox", None)
    roots = keys.pop("roots", None)
    lines = ["[[upstream]]", f"id = {toml(uid)}", f"name = {toml(keys.pop('name', uid))}", f"command = {toml(command)}"]
    for key, value in keys.items():
        if isinstance(value, dict):
            lines.append(f"{key} = {{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }")
        elif isinstance(value, bool):
            lines.append(f"{key} = {str(value).lower()}")
        elif isinstance(value, int):
            lines.append(f"{key} = {value}")
        else:
            lines.append(f"{key} = {toml(value)}")
    if sandbox is not None:
        lines.append("[upstream.sandbox]")
        lines += [f"{k} = {toml(v)}" for k, v in sandbox.items()]
    lines += ["[[route]]", f"path = {toml(route or '/' + uid)}", f"upstream = {toml(uid)}"]
    if roots is not None:
        lines.append(f"roots = {toml(roots)}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Running:
    gateway: Gateway
    process: Process

    def url(self, route: str) -> str:
        return self.gateway.at("/" + route)

    def log(self) -> str:
        return self.process.log_path.read_text(errors="replace")

    def metrics(self) -> dict[str, float]:
        """The gateway's /metrics samples, by `name{labels}` as written."""
        with urllib.request.urlopen(self.gateway.admin + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    def processes(self, uid: str) -> float | None:
        return self.metrics().get(f'portcullis_stdio_processes{{upstream="{uid}"}}')

    def starts(self, uid: str) -> float | None:
        return self.metrics().get(f'portcullis_stdio_starts_total{{upstream="{uid}"}}')

    def pids(self, uid: str) -> list[int]:
        return [int(pid) for u, pid in STARTED.findall(self.log()) if u == uid]

    def generation(self, uid: str) -> list[str]:
        return [g for u, g in GENERATION.findall(self.log()) if u == uid]


@contextmanager
def stdio_gateway(body: str) -> Iterator[Running]:
    """A `portcullis run` with `body` (upstreams and routes) after its listener and admin."""
    require_peers()
    config = '[[listener]]\naddress = "127.0.0.1:0"\n[admin]\naddress = "127.0.0.1:0"\n' + body
    with _spawn([str(_binary()), "run", "--config", "gateway.toml"], files={"gateway.toml": config}) as process:
        bound = bound_addresses(process.log_path, process.proc, ("listener", "admin"))
        _wait(process, lambda: _ready(f"http://{bound['admin']}/readyz"), "200 from /readyz")
        yield Running(Gateway(f"http://{bound['listener']}", f"http://{bound['admin']}", process.log_path), process)


# --- the SDK client -------------------------------------------------------------------


Answer = Callable[[types.ElicitRequestParams], types.ElicitResult]


def accept(content: dict[str, Any]) -> Answer:
    return lambda params: types.ElicitResult(action="accept", content=content)


@dataclass
class Session:
    client: Client | None = None
    asked: list[tuple[Any, types.ElicitRequestParams]] = field(default_factory=list)  # (request id or key, params)
    roots_asked: list[Any] = field(default_factory=list)  # the list_roots callback's calls
    sent: list[dict[str, Any]] = field(default_factory=list)  # every JSON body the client POSTed

    def calls(self, tool: str) -> list[dict[str, Any]]:
        return [b for b in self.sent if b.get("method") == "tools/call" and b["params"]["name"] == tool]

    def answers_sent(self) -> list[dict[str, Any]]:
        """A 2025-11-25 client's JSON-RPC responses to pushed requests."""
        return [b for b in self.sent if "method" not in b and "id" in b]


@asynccontextmanager
async def connect(url: str, era: str, answer: Answer | None = None, roots: bool = False) -> AsyncIterator[Session]:
    """The SDK client at `url` in `era` (2025-11-25: mode="legacy"; 2026-07-28: discovered).
    `answer` is the person behind the elicitation callback (None: no elicitation capability);
    `roots` gives the client a roots callback that records its calls."""
    s = Session()

    async def on_elicit(context, params):
        s.asked.append((context.request_id, params))
        return answer(params)

    async def on_roots(context):
        s.roots_asked.append(context)
        return types.ListRootsResult(roots=[types.Root(uri="file:///the/client/own/root", name="client")])

    async def on_request(request: httpx2.Request) -> None:
        if request.content:
            s.sent.append(json.loads(request.content))

    kwargs: dict[str, Any] = {}
    if answer is not None:
        kwargs["elicitation_callback"] = on_elicit
    if roots:
        kwargs["list_roots_callback"] = on_roots
    if era == LEGACY:
        kwargs["mode"] = "legacy"
    http = create_mcp_http_client()
    http.event_hooks["request"].append(on_request)
    async with http:
        s.client = Client(streamable_http_client(url, http_client=http), **kwargs)
        async with s.client:
            assert s.client.protocol_version == era
            yield s


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


def the_error(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def call_once(url: str, era: str, tool: str, args: dict[str, Any]) -> types.CallToolResult:
    """One call by a fresh client; a refusal fails the test with what the gateway said."""
    try:
        async with connect(url, era) as s:
            return await s.client.call_tool(tool, args)
    except BaseException as e:  # noqa: BLE001 - the SDK wraps errors in exception groups
        error = the_error(e)
        if isinstance(error, MCPError):
            pytest.fail(f"{tool} at {url} was refused: {error.error.message} {error.error.data}", pytrace=False)
        raise


# === 1. server-everything ================================================================


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, shared_tmp_factory) -> Iterator[tuple[Running, dict[str, Path]]]:
    """One gateway in front of every program of cases 1-5; the folders they use."""
    policies = tmp_path_factory.mktemp("policies")
    (policies / "everything-form.toml").write_text(FORM_POLICY)
    # The sandboxed program runs as an unprivileged user when the tests run as root.
    parent = shared_tmp_factory.mktemp("files")
    allowed = parent / "allowed"
    allowed.mkdir()
    allowed.chmod(0o777)
    (allowed / "inside.txt").write_text("inside text\n")
    (parent / "outside.txt").write_text("outside text\n")
    rooted = tmp_path_factory.mktemp("rooted")
    (rooted / "note.txt").write_text("a note in the root\n")
    memory = tmp_path_factory.mktemp("memory")
    timeouts = {"response_timeout": "10s", "stop_timeout": "1s"}
    body = f"[policies]\ndir = {toml(policies)}\n" + "".join(
        [
            upstream("everything", EVERYTHING, name="Everything", **timeouts),
            upstream("everything-trusted", EVERYTHING, name="Everything (trusted)", policy="trusted", **timeouts),
            upstream("everything-form", EVERYTHING, name="Everything (form)", policy="everything-form", **timeouts),
            upstream(
                "files",
                FILESYSTEM + [parent],
                name="Files",
                sandbox={"read_only": [NODE_MODULES], "writable": [allowed]},
                **timeouts,
            ),
            upstream("files-open", FILESYSTEM + [parent], name="Files (no sandbox)", **timeouts),
            upstream("files-rooted", FILESYSTEM, name="Files (roots)", roots=[rooted], **timeouts),
            upstream("memory", MEMORY, name="Memory", env={"MEMORY_FILE_PATH": memory / "memory.jsonl"}, **timeouts),
            upstream("py", PY_STDIO, name="Python SDK stdio", **timeouts),
        ]
    )
    with stdio_gateway(body) as running:
        yield running, {"parent": parent, "allowed": allowed, "rooted": rooted, "memory": memory}


@pytest.fixture(scope="module")
def gw(servers) -> Running:
    return servers[0]


@pytest.fixture(scope="module")
def dirs(servers) -> dict[str, Path]:
    return servers[1]


@pytest.mark.parametrize("era", ERAS)
async def test_everything_lists_and_echoes(gw, era):
    async with connect(gw.url("everything"), era, accept(ANSWER)) as s:
        listing = await s.client.list_tools()
        result = await s.client.call_tool("echo", {"message": f"hello from {era}"})
    # Every tool, the ones a client with elicitation gets included.
    assert {t.name for t in listing.tools} == EVERYTHING_TOOLS
    assert texts(result) == [f"Echo: hello from {era}"] and not result.is_error
    assert s.asked == []
    # The program speaks the sessions generation over stdio.
    assert set(gw.generation("everything")) == {LEGACY}, gw.log()[-3000:]


@pytest.mark.parametrize("era", ERAS)
async def test_everything_elicitation_answered(gw, era):
    """The program pushes its form during the call; the client's elicitation callback gets
    it (the 2026-07-28 client as an input_required round), and the answer reaches the program."""
    async with connect(gw.url("everything-form"), era, accept(ANSWER)) as s:
        result = await s.client.call_tool("trigger-elicitation-request", {})
    [(key, asked)] = s.asked
    assert isinstance(asked, types.ElicitRequestFormParams), asked
    assert asked.message == EVERYTHING_MESSAGE
    schema = asked.requested_schema
    assert list(schema["properties"]) == EVERYTHING_FIELDS
    assert schema["required"] == ["name"]
    assert schema["properties"]["integer"] == {
        "title": "Integer",
        "type": "integer",
        "description": "Your favorite integer (do not give us your phone number, pin, or other sensitive info)",
        "minimum": 1,
        "maximum": 100,
        "default": 42,
    }
    provenance = asked.meta["dev.portcullis/provenance"]
    assert provenance["upstream"]["name"] == "Everything (form)"
    assert provenance["policy"] == "everything-form" and provenance["mode"] == "enforce"
    # The program's own words for what it received.
    assert not result.is_error, texts(result)
    done, inputs, raw = texts(result)
    assert done == "✅ User provided the requested information!"
    assert inputs == "User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Email: ada@example.org\n- Favorite Integer: 7"
    assert raw.startswith("\nRaw result: ")
    assert json.loads(raw.removeprefix("\nRaw result: ")) == {"action": "accept", "content": ANSWER}
    if era == MODERN:
        # The push came as an input_required round: key `answer`, the gateway's sealed state.
        assert key == "answer"
        first, retry = s.calls("trigger-elicitation-request")
        assert "inputResponses" not in first["params"]
        assert retry["params"]["inputResponses"] == {"answer": {"action": "accept", "content": ANSWER}}
        assert retry["params"]["requestState"].startswith("pbh1."), retry["params"]["requestState"][:16]
    else:
        [sent] = s.answers_sent()
        assert sent["result"] == {"action": "accept", "content": ANSWER}
        assert len(s.calls("trigger-elicitation-request")) == 1


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("route, name", [("everything", "Everything"), ("everything-trusted", "Everything (trusted)")])
async def test_everything_elicitation_delivered(gw, era, route, name):
    """Under `untrusted` (the default) and `trusted` alike, the form is delivered: its
    integer field tells people *not* to give a PIN, which asks for none (issue 35). The
    person is shown the form once and the program's call completes with their answer."""
    async with connect(gw.url(route), era, accept(ANSWER)) as s:
        result = await s.client.call_tool("trigger-elicitation-request", {})
    assert len(s.asked) == 1, texts(result)
    assert not result.is_error, texts(result)


# === 2. server-filesystem, confined ======================================================


async def fs_call(gw: Running, route: str, tool: str, args: dict[str, Any]) -> types.CallToolResult:
    async with connect(gw.url(route), MODERN) as s:
        return await s.client.call_tool(tool, args)


async def test_sandboxed_filesystem_reads_inside(gw, dirs):
    result = await fs_call(gw, "files", "read_text_file", {"path": str(dirs["allowed"] / "inside.txt")})
    assert not result.is_error, texts(result)
    assert texts(result) == ["inside text\n"]


async def test_sandbox_hides_the_sibling(gw, dirs):
    """The program was told it may use the parent folder, so it would read the sibling
    file itself (see the control below); the sandbox does not show it the file."""
    sibling = dirs["parent"] / "outside.txt"
    async with connect(gw.url("files"), MODERN) as s:
        allowed = await s.client.call_tool("list_allowed_directories", {})
        read = await s.client.call_tool("read_text_file", {"path": str(sibling)})
        listing = await s.client.call_tool("list_directory", {"path": str(dirs["parent"])})
    assert texts(allowed) == [f"Allowed directories:\n{dirs['parent']}"]
    assert read.is_error
    assert texts(read) == [f"ENOENT: no such file or directory, open '{sibling}'"]
    assert not listing.is_error, texts(listing)
    entries = texts(listing)[0].splitlines()
    assert "[DIR] allowed" in entries and "[FILE] outside.txt" not in entries, entries


async def test_sandboxed_filesystem_writes_inside(gw, dirs):
    target = dirs["allowed"] / "written.txt"
    result = await fs_call(gw, "files", "write_file", {"path": str(target), "content": "written in the sandbox"})
    assert not result.is_error, texts(result)
    assert texts(result) == [f"Successfully wrote to {target}"]
    assert target.read_text() == "written in the sandbox"


async def test_a_write_outside_the_writable_folder_does_not_reach_the_host(gw, dirs):
    """The parent folder inside the sandbox is the sandbox's own scratch space."""
    target = dirs["parent"] / "escape.txt"
    await fs_call(gw, "files", "write_file", {"path": str(target), "content": "out"})
    assert not target.exists()
    assert sorted(p.name for p in dirs["parent"].iterdir()) == ["allowed", "outside.txt"]


async def test_without_the_sandbox_the_sibling_is_read(gw, dirs):
    """Control: the same program and arguments, no [upstream.sandbox]."""
    result = await fs_call(gw, "files-open", "read_text_file", {"path": str(dirs["parent"] / "outside.txt")})
    assert not result.is_error, texts(result)
    assert texts(result) == ["outside text\n"]


# === 3. server-memory ====================================================================


async def test_memory_keeps_the_graph_between_calls(gw, dirs):
    entities = [
        {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
        {"name": "Engine", "entityType": "machine", "observations": ["analytical"]},
    ]
    async with connect(gw.url("memory"), MODERN) as s:
        created = await s.client.call_tool("create_entities", {"entities": entities})
        graph = await s.client.call_tool("read_graph", {})
    assert not created.is_error and not graph.is_error, (texts(created), texts(graph))
    assert created.structured_content == {"entities": entities}
    assert graph.structured_content == {"entities": entities, "relations": []}
    # Another client, later: the same program state, and the file it keeps it in.
    again = await call_once(gw.url("memory"), MODERN, "read_graph", {})
    assert again.structured_content == {"entities": entities, "relations": []}
    lines = (dirs["memory"] / "memory.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"type": "entity", **e} for e in entities]


# === 4. the Python SDK stdio server (2026-07-28 natively) ================================


async def test_py_stdio_modern_client(gw):
    async with connect(gw.url("py"), MODERN, accept({"room_id": "nook"})) as s:
        echoed = await s.client.call_tool("echo", {"text": "hello over stdio"})
        booked = await s.client.call_tool("book", {"hint": "the quiet one"})
    assert texts(echoed) == ["hello over stdio"] and not echoed.is_error
    assert json.loads(texts(booked)[0]) == {"tool": "book", "answers": {"room": {"room_id": "nook"}}}
    [(key, asked)] = s.asked
    assert key == "room"  # the program's own input-request key: MRTR end to end
    assert asked.message == "Which room do you mean by the quiet one?"
    assert asked.requested_schema["properties"]["room_id"]["enum"] == ["atrium", "studio-b", "nook"]
    first, retry = s.calls("book")
    assert retry["params"]["inputResponses"] == {"room": {"action": "accept", "content": {"room_id": "nook"}}}
    assert isinstance(retry["params"]["requestState"], str) and retry["params"]["requestState"]
    # Used in 2026-07-28, found by server/discover at its first start.
    assert gw.generation("py") == [MODERN], gw.log()[-3000:]


async def test_py_stdio_modern_client_three_rounds(gw):
    answers = {"What is the event called?": {"title": "Review"}, "How many people come?": {"people": 12}, "Book it?": {"go": True}}
    async with connect(gw.url("py"), MODERN, lambda p: types.ElicitResult(action="accept", content=answers[p.message])) as s:
        result = await s.client.call_tool("wizard", {})
    assert json.loads(texts(result)[0]) == {
        "tool": "wizard",
        "answers": {"name": {"title": "Review"}, "size": {"people": 12}, "confirm": {"go": True}},
    }
    assert [(k, p.message) for k, p in s.asked] == [("name", "What is the event called?"), ("size", "How many people come?"), ("confirm", "Book it?")]
    assert len(s.calls("wizard")) == 4


async def test_py_stdio_legacy_client_through_the_bridge(gw):
    async with connect(gw.url("py"), LEGACY, accept({"room_id": "atrium"})) as s:
        echoed = await s.client.call_tool("echo", {"text": "hello, old client"})
        booked = await s.client.call_tool("book", {"hint": "the bright one"})
    assert texts(echoed) == ["hello, old client"]
    assert json.loads(texts(booked)[0]) == {"tool": "book", "answers": {"room": {"room_id": "atrium"}}}
    [(push_id, asked)] = s.asked
    assert asked.message == "Which room do you mean by the bright one?"
    # Pushed on the call's stream by the gateway (its sealed request id), answered by a POST.
    assert isinstance(push_id, str) and push_id.startswith("psr1."), push_id
    [sent] = s.answers_sent()
    assert sent["result"] == {"action": "accept", "content": {"room_id": "atrium"}}
    assert len(s.calls("book")) == 1


# === 5. roots ============================================================================


@pytest.mark.parametrize("era", ERAS)
async def test_route_roots_answer_the_program(gw, dirs, era):
    """server-filesystem started without a folder asks for the client's roots: the gateway
    answers with the route's; the client's own roots callback is never called.

    The program asks after `notifications/initialized` and applies the answer on its own
    time (it checks each folder), while a call the gateway sends right after initialize
    may already be waiting on its stdin: until then it lists no folder. So the listing
    is asked until it names one (at most ROOTS_SETTLE_S), and must then name T only."""
    rooted = dirs["rooted"]
    listed: list[list[str]] = []
    async with connect(gw.url("files-rooted"), era, roots=True) as s:
        deadline = time.monotonic() + ROOTS_SETTLE_S
        while True:
            allowed = await s.client.call_tool("list_allowed_directories", {})
            assert not allowed.is_error, texts(allowed)
            listed.append(texts(allowed))
            if listed[-1] != ["Allowed directories:\n"] or time.monotonic() > deadline:
                break
            await anyio.sleep(0.05)
        inside = await s.client.call_tool("read_text_file", {"path": str(rooted / "note.txt")})
        outside = await s.client.call_tool("read_text_file", {"path": str(dirs["parent"] / "outside.txt")})
    assert listed[-1] == [f"Allowed directories:\n{rooted}"], listed
    assert texts(inside) == ["a note in the root\n"] and not inside.is_error
    assert outside.is_error
    assert texts(outside) == [f"Access denied - path outside allowed directories: {dirs['parent'] / 'outside.txt'} not in {rooted}"]
    assert s.roots_asked == [], "the client was asked for its roots"
    # What the program said when it took the gateway's answer (its stderr, in the gateway's log).
    assert "stderr=Updated allowed directories from MCP roots: 1 valid directories" in gw.log()


# === 6. lifecycle ========================================================================


def eager_gateway(uid: str) -> Iterator[Running]:
    return stdio_gateway(upstream(uid, EVERYTHING, eager=True, stop_timeout=f"{STOP_TIMEOUT_S}s", response_timeout="5s"))


async def raw_call(http: httpx2.AsyncClient, url: str, rid: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 tools/call on the wire (no discover, no listing): its JSON answer."""
    body = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}},
            "name": tool,
            "arguments": arguments,
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    resp = await http.post(url, json=body, headers=headers)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/json"), resp.text
    return resp.json()


async def test_eager_starts_one_process_before_any_call():
    with eager_gateway("eager") as gw:
        # Right after /readyz answered 200, before any request.
        assert gw.processes("eager") == 1, gw.metrics()
        assert gw.starts("eager") == 1
        async with httpx2.AsyncClient(timeout=10) as http:
            answer = await raw_call(http, gw.url("eager"), 1, "echo", {"message": "first"})
        assert answer["result"]["content"] == [{"type": "text", "text": "Echo: first"}], answer
        # The first caller got the process started at start.
        assert gw.starts("eager") == 1 and gw.processes("eager") == 1
        assert len(gw.pids("eager")) == 1


def exited(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet (it has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def test_sigterm_to_the_gateway_stops_the_program():
    with eager_gateway("drain") as gw:
        deadline = time.monotonic() + 10
        while not gw.pids("drain") and time.monotonic() < deadline:
            time.sleep(0.05)
        [pid] = gw.pids("drain")
        assert not exited(pid)
        assert "server-everything" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        gw.process.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        while not exited(pid) and time.monotonic() - signalled < STOP_TIMEOUT_S + 1:
            time.sleep(0.02)
        took = time.monotonic() - signalled
        assert exited(pid), f"the program (pid {pid}) still runs {took:.1f}s after SIGTERM to the gateway"
        assert gw.process.proc.wait(timeout=10) is not None


@pytest.fixture(scope="module")
def lifecycle() -> Iterator[Running]:
    """Upstreams whose settings differ (so none shares another's processes)."""
    one = {"max_processes": 1, "connect_timeout": "10s", "response_timeout": "10s", "stop_timeout": "1s"}
    body = "".join(
        [
            upstream("idle", EVERYTHING, idle_timeout="1s", stop_timeout=f"{STOP_TIMEOUT_S}s"),
            upstream("idle-again", EVERYTHING, env={"VARIANT": "again"}, idle_timeout="1s", stop_timeout=f"{STOP_TIMEOUT_S}s"),
            upstream("reuse", EVERYTHING, env={"VARIANT": "reuse"}, response_timeout="5s"),
            upstream("one-cold", EVERYTHING, env={"VARIANT": "cold"}, **one),
            upstream("one-warm", EVERYTHING, env={"VARIANT": "warm"}, **one),
        ]
    )
    with stdio_gateway(body) as gw:
        yield gw


async def idle_stop(gw: Running, uid: str) -> None:
    """One call, then wait for the idle stop (idle_timeout = 1 s, checked every second)."""
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await raw_call(http, gw.url(uid), 1, "echo", {"message": "before"})
    assert answer["result"]["content"] == [{"type": "text", "text": "Echo: before"}], answer
    assert gw.processes(uid) == 1
    deadline = time.monotonic() + 5
    while gw.processes(uid) != 0 and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert gw.processes(uid) == 0, gw.metrics()
    [pid] = gw.pids(uid)
    assert exited(pid)


async def test_an_idle_process_is_stopped(lifecycle):
    await idle_stop(lifecycle, "idle")
    assert lifecycle.starts("idle") == 1
    assert lifecycle.metrics().get('portcullis_stdio_exits_total{how="signalled",upstream="idle"}') == 1


async def test_a_call_right_after_an_idle_stop_starts_the_program_again(lifecycle):
    """An idle stop is the gateway's own doing, not a crash: the next caller gets a new
    process at once, not a refusal while a crash backoff runs out."""
    gw = lifecycle
    await idle_stop(gw, "idle-again")
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await raw_call(http, gw.url("idle-again"), 2, "echo", {"message": "after"})
    assert answer.get("result", {}).get("content") == [{"type": "text", "text": "Echo: after"}], answer
    assert gw.starts("idle-again") == 2 and gw.processes("idle-again") == 1


async def test_calls_in_a_row_share_one_process(lifecycle):
    """One 2026-07-28 caller's calls, one after the other, to a program of the sessions
    generation: each is a session of its own the gateway opens and ends, on the same
    process; none of them needs a second one."""
    gw = lifecycle
    async with httpx2.AsyncClient(timeout=10) as http:
        for i in range(IN_A_ROW):
            answer = await raw_call(http, gw.url("reuse"), i, "echo", {"message": f"call {i}"})
            assert answer["result"]["content"] == [{"type": "text", "text": f"Echo: call {i}"}], answer
    assert gw.starts("reuse") == 1, f"{IN_A_ROW} calls in a row started another process:\n" + "\n".join(
        line for line in gw.log().splitlines() if "upstream=reuse " in line and "stderr=" not in line
    )


@pytest.mark.parametrize("uid", ["one-cold", "one-warm"])
async def test_max_processes_one_makes_the_second_caller_wait(lifecycle, uid):
    """Two 2026-07-28 clients at once on the slow tool of an upstream with one process:
    both complete, one after the other. `one-cold` has no process yet when both arrive;
    `one-warm` has one (a call before). (The SDK lists the tools after each call, so the
    first client's call_tool also waits for the second's call: the pair is timed.)"""
    gw = lifecycle
    if uid == "one-warm":
        assert texts(await call_once(gw.url(uid), MODERN, "echo", {"message": "warm"})) == ["Echo: warm"]
    most = 0.0
    results: dict[int, list[str]] = {}

    async def caller(i: int) -> None:
        result = await call_once(gw.url(uid), MODERN, "trigger-long-running-operation", {"duration": LONG_OP_S, "steps": 2})
        results[i] = texts(result)

    async def watch() -> None:
        nonlocal most
        while True:
            most = max(most, await anyio.to_thread.run_sync(gw.processes, uid) or 0)
            await anyio.sleep(0.05)

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        async with anyio.create_task_group() as callers:
            callers.start_soon(caller, 1)
            callers.start_soon(caller, 2)
        took = time.monotonic() - started
        tg.cancel_scope.cancel()
    done = f"Long running operation completed. Duration: {LONG_OP_S} seconds, Steps: 2."
    assert results == {1: [done], 2: [done]}
    assert most <= 1, f"{most:.0f} processes ran at once under max_processes = 1:\n" + "\n".join(
        line for line in gw.log().splitlines() if f"upstream={uid} " in line and "stderr=" not in line
    )
    assert gw.starts(uid) == 1 and gw.processes(uid) == 1, gw.metrics()
    assert took >= 2 * LONG_OP_S * 0.9, f"both calls were done after {took:.2f}s: they ran at the same time"
