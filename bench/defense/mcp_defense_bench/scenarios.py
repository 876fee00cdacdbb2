"""mcp-defense-bench fixtures as traffic through the real gateway.

Each fixture type of the benchmark becomes what a model and its servers would
send through a gateway, and the verdict is what the gateway did at run time
(`harness.observe`): enforce = refused or changed on the wire, detect = that or
a verdict in the provenance, the audit trail or the metrics. The translation
is by fixture *type and shape*, never by vector or test-case id, and a test
case's attack and control get the same servers: a scripted server is built
from both inputs (a tool's schema from the arguments either one passes), so
the only thing that differs between the two runs is what the benchmark varies.

| fixture | what happens |
|---|---|
| tool definition | a server lists it; the client lists the tools |
| tool call | a server lists the tool; the client lists, then calls it |
| tool result | a server lists the tool and answers a call with the result; the client lists and calls (with the fixture's arguments, or arguments the schema accepts) |
| definition change | a server lists `before`; the client lists; the server now lists `after`; the client lists again and calls the tool |
| multi-server registry | one server per entry behind a federated route; the client lists the merged tools |
| tool-call sequence | one server per named server (federated when named), each listing the tools it is called with; the calls in order, `{{result_of_previous}}` replaced by the text the client got from the previous call; a refused call ends the sequence (the model has no result to pass on) |
| server identity, change | a server over TLS (a certificate per fingerprint label, all signed by a CA the gateway trusts; the upstream pinned to the `before` certificate's key with `tls_pins`) is discovered and listed, then replaced on the same address by the `after` server, and discovered and listed again |
| server identity, verify; transport scenario | the endpoint is configured as an upstream: `portcullis check`, and whether `portcullis run` starts with it |
| scenario with a request | the request is sent to the gateway with its `Host` and `Origin` (the fixture's port is the gateway's) |
| scenario with an action | a server lists the action's tool; the client lists and calls it |
| capability grant | a server lists the tool; the route forwards the client's `Authorization` (the server does its own authorization); the client lists and calls the tool, and the server answers 403 with `WWW-Authenticate: Bearer error="insufficient_scope", scope="<the requested scopes>"`, the challenge that makes a client ask the person for them |
| config snapshot diff | the gateway's own config: it starts on the `baseline` snapshot, the file is rewritten from the `current` one and reloaded (snapshots.py) |
| consent prompt, registry entry or resolution | not traffic a gateway carries: reported as not seen |
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import schema_args  # noqa: E402
from harness.certs import Certs  # noqa: E402
from harness.gateway import RouteConf, UpstreamConf, judge_config  # noqa: E402
from harness.observe import Outcome  # noqa: E402
from harness.session import Session, result_text  # noqa: E402
from harness.upstream import NEUTRAL_RESULT, ServerScript  # noqa: E402

import snapshots  # noqa: E402

Input = dict[str, Any]
Case = dict[str, Any]  # {"fixture": …, "benignControl": …}: both inputs of one test case
PLACEHOLDER = re.compile(r"\{\{\s*result_of_previous\s*\}\}")
URL_IN_TEXT = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s)\"'<>]+", re.I)
OBJECT_SCHEMA = {"type": "object"}

NOT_RUNTIME = {
    "consent-prompt": "a host's consent dialog, which no MCP message carries",
    "malicious-registry-entry": "an MCP registry entry, read when a server is installed, not in traffic",
    "benign-registry-entry": "an MCP registry entry, read when a server is installed, not in traffic",
    "registry-resolution": "a registry's artifact resolution, done when a server is installed, not in traffic",
}


# --- schemas a scripted server lists ---------------------------------------------------------


def json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    if v is None:
        return "null"
    return "string"


def derived_schema(arg_sets: list[dict[str, Any]]) -> dict[str, Any]:
    """The schema an honest server would list for a tool called with these
    arguments: each property typed by its values (several types: a list)."""
    props: dict[str, set[str]] = {}
    for args in arg_sets:
        for k, v in args.items():
            props.setdefault(k, set()).add(json_type(v))
    out: dict[str, Any] = {}
    for k, types in props.items():
        if "string" in types and len(types) > 1:
            types.discard("string")  # a placeholder string beside a typed value
            types.add("string")
        ts = sorted(types)
        out[k] = {"type": ts[0] if len(ts) == 1 else ts}
    return {"type": "object", "properties": out}


def calls_in(inp: Input) -> list[dict[str, Any]]:
    """Every call an input makes: (server, name, arguments)."""
    found = []
    if isinstance(inp.get("call"), dict):
        found.append(inp["call"])
    for c in inp.get("calls") or []:
        if isinstance(c, dict):
            found.append(c)
    if isinstance(inp.get("action"), dict):
        found.append(inp["action"])
    return found


def tool_schema(case: Case, server: str | None, name: str) -> dict[str, Any]:
    """The `inputSchema` the server lists for `name`: the one a fixture gives, or
    one derived from the arguments either input of the case passes."""
    for inp in case.values():
        tool = inp.get("tool") if isinstance(inp, dict) else None
        if isinstance(tool, dict) and tool.get("name") == name and isinstance(tool.get("inputSchema"), dict):
            return tool["inputSchema"]
    arg_sets = []
    for inp in case.values():
        if not isinstance(inp, dict):
            continue
        for c in calls_in(inp):
            if c.get("name") == name and c.get("server") == server and isinstance(c.get("arguments"), dict):
                arg_sets.append(c["arguments"])
    return derived_schema(arg_sets)


def listed(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as a server lists it: the spec requires an `inputSchema`."""
    out = copy.deepcopy(tool)
    out.setdefault("inputSchema", dict(OBJECT_SCHEMA))
    return out


# --- fixture types -------------------------------------------------------------------------


def tool_definition(inp: Input, case: Case) -> Outcome:
    server = ServerScript("server", tools=[listed(inp["tool"])])
    s = Session([server])
    s.list_tools()
    return s.finish()


def tool_call(inp: Input, case: Case) -> Outcome:
    tool = listed(inp["tool"])
    server = ServerScript("server", tools=[tool])
    s = Session([server])
    s.list_tools()
    call = inp.get("call") or {}
    s.call("server", str(call.get("name", tool["name"])), dict(call.get("arguments") or {}))
    return s.finish()


def tool_result(inp: Input, case: Case) -> Outcome:
    tool = listed(inp["tool"])
    result = copy.deepcopy(inp.get("result") or NEUTRAL_RESULT)
    server = ServerScript("server", tools=[tool], results={tool["name"]: result})
    s = Session([server])
    s.list_tools()
    call = inp.get("call")
    args = dict(call.get("arguments") or {}) if isinstance(call, dict) else schema_args.arguments(tool["inputSchema"])
    s.call("server", tool["name"], args)
    return s.finish()


def definition_change(inp: Input, case: Case) -> Outcome:
    before, after = listed(inp["before"]), listed(inp["after"])
    server = ServerScript("server", tools=[before])
    s = Session([server])
    s.list_tools()
    server.tools = [after]
    s.list_tools()
    s.call("server", after["name"], schema_args.arguments(after["inputSchema"]))
    return s.finish()


def multi_server_registry(inp: Input, case: Case) -> Outcome:
    servers = [ServerScript(str(entry.get("server") or f"server{i}"), tools=[listed(t) for t in entry.get("tools") or []])
               for i, entry in enumerate(inp.get("servers") or [])]
    s = Session(servers, federated=True)
    s.list_tools()
    return s.finish()


def tool_call_sequence(inp: Input, case: Case) -> Outcome:
    calls = [c for c in inp.get("calls") or [] if isinstance(c, dict) and c.get("name")]
    named = any(c.get("server") for c in calls)
    tools: dict[str, list[str]] = {}  # server -> tool names, from both inputs: one server for attack and control
    for other in case.values():
        for c in calls_in(other) if isinstance(other, dict) else []:
            if c.get("name"):
                tools.setdefault(str(c.get("server") or "server"), []).append(str(c["name"]))
    scripts = {
        name: ServerScript(name, tools=[{"name": t, "inputSchema": tool_schema(case, name if named else None, t)}
                                        for t in dict.fromkeys(names)])
        for name, names in tools.items()
    }
    s = Session(list(scripts.values()), federated=named)
    s.list_tools()
    previous = ""
    for c in calls:
        server = str(c.get("server") or "server")
        scripts[server].results[c["name"]] = copy.deepcopy(c.get("result") or NEUTRAL_RESULT)
        args = substitute(copy.deepcopy(c.get("arguments") or {}), previous)
        reply = s.call(server, c["name"], args)
        if reply.reason or reply.result is None:
            s.outcome.notes.append(f"the sequence ends at {c['name']}: the model got no result")
            break
        previous = result_text(reply)
    return s.finish()


def substitute(v: Any, previous: str) -> Any:
    if isinstance(v, str):
        return PLACEHOLDER.sub(lambda _m: previous, v)
    if isinstance(v, dict):
        return {k: substitute(x, previous) for k, x in v.items()}
    if isinstance(v, list):
        return [substitute(x, previous) for x in v]
    return v


_certs: Certs | None = None


def certs() -> Certs:
    global _certs
    if _certs is None:
        _certs = Certs()
    return _certs


def identity_info(identity: dict[str, Any]) -> dict[str, Any]:
    info = {"name": str(identity.get("name") or "server"), "version": str(identity.get("serverVersion") or "1.0.0")}
    return info


def server_identity(inp: Input, case: Case) -> Outcome:
    if inp.get("mode") == "change":
        return identity_change(inp)
    identity = inp.get("identity") or {}
    out = configured_endpoint(str(identity.get("endpoint") or ""))
    out.notes.append("an identity proof is not part of MCP traffic; the endpoint was configured as an upstream")
    return out


def identity_change(inp: Input) -> Outcome:
    before, after = inp.get("before") or {}, inp.get("after") or {}
    c = certs()
    label = lambda ident: str(ident.get("tlsFingerprint") or ident.get("endpoint") or "default")  # noqa: E731
    server = ServerScript("server", tools=[{"name": "status", "inputSchema": dict(OBJECT_SCHEMA)}],
                          server_info=identity_info(before))
    # The operator pinned the key the server had when it was configured
    # (`tls_pins`): the identity the fixture calls pinned.
    s = Session([server], tls=c.leaf(label(before)), ca_file=str(c.ca_cert),
                upstream_extra={"tls_pins": [c.spki_pin(label(before))]})
    s.discover("server")
    s.list_tools()
    s.up.replace(tls=c.leaf(label(after)))
    server.server_info = identity_info(after)
    s.discover("server")
    s.list_tools()
    s.call("server", "status", {})
    return s.finish()


def configured_endpoint(url: str) -> Outcome:
    """An endpoint as an operator would configure it: what `portcullis check`
    says, and whether `portcullis run` starts with it. Only what the gateway
    says about this upstream (its id or URL) counts."""
    out = Outcome()
    if not url:
        out.notes.append("no endpoint to configure")
        return out
    up = UpstreamConf(id="endpoint", name="endpoint", url=url)
    verdict = judge_config([up], [RouteConf("/mcp", ["endpoint"])])
    host = re.sub(r"^[a-z]+://", "", url).split("/")[0]
    about = lambda line: "endpoint" in line or host in line  # noqa: E731
    if not verdict.starts:
        out.refused.append("run: the gateway does not start with this upstream")
        out.notes.append(first_line(verdict.start_output, about))
    for line in verdict.check_output.splitlines():
        if about(line) and re.search(r"\b(error|warning|warn)\b", line, re.I):
            out.recorded.append("check: " + line.strip()[:160])
    for line in verdict.start_output.splitlines():
        if about(line) and re.search(r"\b(WARN|ERROR)\b", line):
            out.recorded.append("run log: " + line.strip()[-160:])
    return out


def first_line(text: str, keep: Callable[[str], bool]) -> str:
    for line in text.splitlines():
        if keep(line):
            return line.strip()[:200]
    return text.strip().splitlines()[-1][:200] if text.strip() else ""


def config_snapshot_diff(inp: Input, case: Case) -> Outcome:
    return snapshots.config_snapshot_diff(inp, certs())


def scenario(inp: Input, case: Case) -> Outcome:
    if isinstance(inp.get("request"), dict):
        return scenario_request(inp["request"])
    if isinstance(inp.get("action"), dict):
        return scenario_action(inp["action"], case, inp)
    url = inp.get("endpoint")
    if not isinstance(url, str):
        m = URL_IN_TEXT.search(str(inp.get("setup") or ""))
        url = m.group(0).rstrip(".,;") if m else None
    if url:
        return configured_endpoint(url)
    out = Outcome()
    out.notes.append("a scenario with no request, action or endpoint: nothing to send")
    return out


def scenario_request(request: dict[str, Any]) -> Outcome:
    """A request with the fixture's `Host` and `Origin`, the fixture's port
    standing for the gateway's."""
    host = str(request.get("host") or "")
    port = host.rsplit(":", 1)[1] if ":" in host else None
    server = ServerScript("server", tools=[])
    s = Session([server])
    headers = {}
    if host:
        headers["host"] = with_port(host, port, s.gw.port)
    if request.get("origin"):
        headers["origin"] = with_port(str(request["origin"]), port, s.gw.port)
    s.client.extra_headers.update(headers)
    s.list_tools()
    return s.finish()


def with_port(text: str, fixture_port: str | None, port: int) -> str:
    if fixture_port and text.endswith(f":{fixture_port}"):
        return text[: -len(fixture_port)] + str(port)
    return text


def scenario_action(action: dict[str, Any], case: Case, inp: Input) -> Outcome:
    name = str(action.get("name") or "action")
    m = re.search(r"[Ss]erver '([^']+)'", str(inp.get("setup") or ""))
    server = ServerScript(m.group(1) if m else "server",
                          tools=[{"name": name, "inputSchema": tool_schema(case, None, name)}])
    s = Session([server])
    s.list_tools()
    s.call(server.name, name, dict(action.get("arguments") or {}))
    return s.finish()


def capability_grant(inp: Input, case: Case) -> Outcome:
    tool = listed(inp["tool"])
    scopes = " ".join(str(s) for s in inp.get("requestedScopes") or [])
    challenge = f'Bearer error="insufficient_scope", scope="{scopes}"'
    server = ServerScript("server", tools=[tool], http_refusals={tool["name"]: (403, {"www-authenticate": challenge})})
    s = Session([server], upstream_extra={"forward_authorization": True},
                client_headers={"authorization": "Bearer a-token-with-fewer-scopes"})
    s.list_tools()
    reply = s.call("server", tool["name"], schema_args.arguments(tool["inputSchema"]))
    if not reply.reason and reply.headers.get("www-authenticate") != challenge:
        # The client could not follow the server's own challenge: the gateway changed the answer.
        s.outcome.changed.append("tools/call: the server's WWW-Authenticate challenge did not reach the client")
    return s.finish()


HANDLERS: dict[str, Callable[[Input, Case], Outcome]] = {
    "malicious-tool-definition": tool_definition,
    "benign-tool-definition": tool_definition,
    "tool-call": tool_call,
    "malicious-tool-result": tool_result,
    "benign-tool-result": tool_result,
    "definition-change": definition_change,
    "multi-server-registry": multi_server_registry,
    "tool-call-sequence": tool_call_sequence,
    "server-identity": server_identity,
    "scenario": scenario,
    "config-snapshot-diff": config_snapshot_diff,
    "capability-grant": capability_grant,
}


def assess(inp: Input, case: Case) -> dict[str, Any]:
    kind = str(inp.get("type"))
    if kind in NOT_RUNTIME:
        return {"detect": False, "enforce": False, "signal": f"not seen at run time: {NOT_RUNTIME[kind]}"}
    handler = HANDLERS.get(kind)
    if handler is None:
        return {"detect": False, "enforce": False, "signal": f"no translation for fixture type {kind!r}"}
    return handler(inp, case).verdict()
