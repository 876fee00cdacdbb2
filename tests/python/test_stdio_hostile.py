"""A hostile stdio program behind the gateway (issue 23): `hostile_stdio.py`, one
program whose misbehaviour is chosen by the tool called, run as many `[[upstream]]
command = [...]` entries of one gateway (each with its own environment, so each
has its own processes, restarts and metrics).

Every case asserts the safe outcome exactly: the client's HTTP status and
`data.reason`, the counters on the admin listener's /metrics, what the gateway
logged, what the program received (it records every line it reads to the file
named by HOSTILE_RECORD), and the processes' state read from /proc.

The client is a 2026-07-28 client (one POST per call; the gateway bridges it to
the program's 2025-11-25 session) except for the pushed password form, which
needs a 2025-11-25 session (initialize, then a tools/call read as SSE).

Run: `/work/main/.venv/bin/python -m pytest tests/python/test_stdio_hostile.py`
(the gateway binary from $PORTCULLIS_BIN, bubblewrap at /usr/bin/bwrap).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from conftest import _binary, _stop, bound_addresses, metric, wait_ready

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "hostile_stdio.py"
# The system's Python: it lives under /usr, which a sandboxed program can read.
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
MAX_LINE = 65536  # [limits] max_response_body_bytes
RESPONSE_TIMEOUT_S = 2.0
BACKOFF_S = 1.0  # the first restart after a program ended within 10 s of its start
KEYS_ENV = "PORTCULLIS_TEST_KEYS"
SECRET_ENV = {"AWS_SECRET_ACCESS_KEY": "x-not-a-real-secret", "GITHUB_TOKEN": "ghp_" + "0" * 36,
              "DATABASE_PASSWORD": "hunter2"}
PASSED = "HOSTILE_PASSED"  # the one variable named in `env_from`
STDERR_LINE_BYTES = 2048
STDERR_LINES_PER_SECOND = 50


# ------------------------------------------------------------------ the gateway

@dataclass
class Upstream:
    id: str
    extra: dict = field(default_factory=dict)  # more keys of its [[upstream]] (TOML values)
    sandbox: str | None = None  # the body of its [upstream.sandbox]


def upstreams(tmp: Path) -> list[Upstream]:
    box = f'read_only = ["{HERE}"]\nwritable = ["{tmp}"]\n'
    return [
        Upstream("obj"), Upstream("arr"), Upstream("text"), Upstream("huge"), Upstream("utf8"),
        Upstream("idnum"), Upstream("idstr"), Upstream("flood"), Upstream("peer"), Upstream("exit"),
        Upstream("backoff"), Upstream("hang"), Upstream("hang2", {"max_processes": "2", "connect_timeout": '"2s"'}),
        Upstream("spin", {"max_processes": "1"}), Upstream("midline", {"max_processes": "1"}),
        Upstream("group", {"idle_timeout": '"1s"'}),
        Upstream("boxed", {"idle_timeout": '"1s"'}, box),
        Upstream("env", {"env_from": f'["{PASSED}"]'}),
        Upstream("envbox", {"env_from": f'["{PASSED}"]'}, box),
        Upstream("push"),
        Upstream("netoff", {}, box),
        Upstream("neton", {}, box + "network = true\n"),
        Upstream("limits", {"max_open_files": "64", "max_memory_bytes": "268435456"}),
    ]


def upstream_toml(u: Upstream, tmp: Path) -> str:
    keys = {"response_timeout": f'"{RESPONSE_TIMEOUT_S:g}s"', "connect_timeout": '"5s"', "stop_timeout": '"1s"'}
    keys.update(u.extra)
    env = f'{{ HOSTILE_RECORD = "{tmp / (u.id + ".jsonl")}", HOSTILE_CASE = "{u.id}" }}'
    text = (f'[[upstream]]\nid = "{u.id}"\nname = "Hostile {u.id}"\n'
            f'command = ["{PYTHON}", "{PROGRAM}"]\nenv = {env}\n'
            + "".join(f"{k} = {v}\n" for k, v in keys.items()))
    if u.sandbox is not None:
        text += "[upstream.sandbox]\n" + u.sandbox
    return text + f'[[route]]\npath = "/{u.id}"\nupstream = "{u.id}"\n'


def config_text(ups: list[Upstream], tmp: Path) -> str:
    return ('[[listener]]\naddress = "127.0.0.1:0"\n[admin]\naddress = "127.0.0.1:0"\n'
            f'[audit]\nsink = "off"\n[state]\nkeys_env = "{KEYS_ENV}"\n'
            f"[limits]\nmax_response_body_bytes = {MAX_LINE}\n"
            + "".join(upstream_toml(u, tmp) for u in ups))


def keygen() -> str:
    out = subprocess.run([str(_binary()), "keygen"], check=True, capture_output=True, text=True)
    key = out.stdout.strip()
    assert re.fullmatch(r"k1:[A-Za-z0-9_-]{43}", key), key
    return key


def gateway_env(keys: str) -> dict[str, str]:
    return {**os.environ, KEYS_ENV: keys, PASSED: "passed-through", **SECRET_ENV}


@dataclass
class Gateway:
    base: str
    admin: str
    log_path: Path
    proc: subprocess.Popen
    tmp: Path
    keys: str

    def url(self, upstream: str) -> str:
        return f"{self.base}/{upstream}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"{self.admin}/metrics", timeout=5) as r:
            return r.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        return metric(self.metrics(), name, **labels)

    def metric_total(self, name: str, **labels: str) -> float:
        """The sum of every sample of `name` with these labels (whatever its others)."""
        return metric_total(self.metrics(), name, **labels)

    def ready(self) -> int | None:
        try:
            with urllib.request.urlopen(f"{self.admin}/readyz", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except (urllib.error.URLError, OSError):
            return None

    def record(self, upstream: str) -> list[dict]:
        """What the program(s) of `upstream` read, in order."""
        path = self.tmp / f"{upstream}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@contextmanager
def running(ups: list[Upstream], tmp: Path):
    """A `portcullis run` of `ups` (each routed at /<id>), its log in `tmp`."""
    config = tmp / "gateway.toml"
    config.write_text(config_text(ups, tmp))
    keys = keygen()
    log_path = tmp / "gateway.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([str(_binary()), "run", "--config", str(config)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, cwd=tmp, env=gateway_env(keys))
        try:
            bound = bound_addresses(log_path, proc, ("listener", "admin"))
            admin = f"http://{bound['admin']}"
            wait_ready(f"{admin}/readyz", proc, log_path)
            yield Gateway(f"http://{bound['listener']}", admin, log_path, proc, tmp, keys)
        finally:
            _stop(proc)


@pytest.fixture(scope="module")
def gw(shared_tmp_factory):
    if not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.fail("bubblewrap is not installed (/usr/bin/bwrap; Debian: apt-get install bubblewrap)",
                    pytrace=False)
    tmp = shared_tmp_factory.mktemp("stdio-hostile")
    with running(upstreams(tmp), tmp) as gateway:
        yield gateway



def metric_total(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if m:
            found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
            if all(found.get(k) == v for k, v in labels.items()):
                total += float(m.group(2))
    return total


# ------------------------------------------------------------------ the clients

@dataclass
class Reply:
    status: int
    message: dict
    elapsed: float
    raw: str = ""

    @property
    def reason(self) -> str | None:
        return ((self.message.get("error") or {}).get("data") or {}).get("reason")

    @property
    def value(self) -> dict:
        """The tool's answer: the JSON text of its result."""
        result = self.message.get("result")
        assert result and not result.get("isError"), f"not a tool answer: {self.raw[:800]}"
        return json.loads(result["content"][0]["text"])


def call(gw: Gateway, upstream: str, tool: str, arguments: dict | None = None, rid: int | str = 1,
         timeout: float = 20) -> Reply:
    """One tools/call of a 2026-07-28 client."""
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments or {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool}
    req = urllib.request.Request(gw.url(upstream), data=json.dumps(body).encode(), headers=headers)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, ctype, text = r.status, r.headers.get("content-type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        status, ctype, text = e.code, e.headers.get("content-type", ""), e.read().decode()
    elapsed = time.monotonic() - started
    data = last_event(text) if ctype.startswith("text/event-stream") else text
    try:
        message = json.loads(data)
    except (TypeError, ValueError):
        pytest.fail(f"{upstream}/{tool}: HTTP {status}, not a JSON-RPC message: {text[:800]!r}", pytrace=False)
    return Reply(status, message, elapsed, text)


def events(text: str) -> list[str]:
    """The data of each SSE event of `text`."""
    out = []
    for block in re.split(r"\r?\n\r?\n", text):
        data = [line[5:].removeprefix(" ") for line in re.split(r"\r?\n", block) if line.startswith("data:")]
        if data:
            out.append("\n".join(data))
    return out


def last_event(text: str) -> str | None:
    found = events(text)
    return found[-1] if found else None


def pid_of(gw: Gateway, upstream: str) -> int:
    reply = call(gw, upstream, "pid")
    assert reply.status == 200, reply.raw
    return reply.value["pid"]


def refused(reply: Reply, reason: str, status: int, rid: int | str = 1) -> None:
    """The call was refused with exactly `reason`, under the client's own id."""
    assert reply.reason == reason, f"expected {reason}, got HTTP {reply.status}: {reply.raw[:800]}"
    assert reply.status == status, f"HTTP {reply.status}, expected {status}: {reply.raw[:800]}"
    assert reply.message.get("id") == rid, f"the refusal is not under the client's id {rid!r}: {reply.raw[:800]}"
    assert "result" not in reply.message


# ------------------------------------------------------------------ /proc

def alive(pid: int) -> bool:
    """`pid` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(check, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


def pids_with(marker: str) -> list[int]:
    """Running processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def vm_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def log_lines(gw: Gateway, *needles: str) -> list[str]:
    return [line for line in gw.log().splitlines() if all(n in line for n in needles)]


def receiver(gw: Gateway, upstream: str, tool: str) -> int:
    """The pid of the process that was sent the last call of `tool`."""
    got = [r["pid"] for r in gw.record(upstream)
           if "line" in r and (json.loads(r["line"]).get("params") or {}).get("name") == tool]
    assert got, f"{upstream}: no program was sent a call of {tool}: {gw.record(upstream)}"
    return got[-1]


def restarted(gw: Gateway, upstream: str, old: int, crashes: int = 1) -> int:
    """The program `old` was killed; after the backoff (1 s, 2 s, 4 s… for the
    `crashes`-th end within 10 s of a start), a new process answers."""
    assert wait_until(lambda: not alive(old), 3), f"{upstream}: the program {old} still runs"
    # The backoff runs from the end of the program's supervisor, which the gateway logs.
    assert wait_until(lambda: log_lines(gw, "stdio program ended", f"upstream={upstream}", f"pid={old}"), 3), \
        f"{upstream}: the gateway did not see {old} end"
    time.sleep(BACKOFF_S * 2 ** (crashes - 1) + 0.2)
    new = pid_of(gw, upstream)
    assert new != old, f"{upstream}: the killed program {old} answered again"
    return new


# ==================================================================== stdout

@pytest.mark.parametrize("upstream,line", [("obj", '{"hello":1}'), ("arr", "[1,2]")])
def test_json_that_is_not_jsonrpc_fails_the_call_and_restarts_the_program(gw, upstream, line):
    reply = call(gw, upstream, "garbage", {"line": line})
    first = receiver(gw, upstream, "garbage")
    refused(reply, "upstream_bad_response", 502)
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream=upstream, kind="not_jsonrpc") == 1
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream=upstream, kind="text") == 0
    assert log_lines(gw, "not a JSON-RPC 2.0 message on stdout; restarting it", f'upstream="{upstream}"',
                     f"pid={first}"), gw.log()[-3000:]
    restarted(gw, upstream, first)
    assert gw.metric("portcullis_stdio_exits_total", upstream=upstream, how="signalled") == 1


def test_text_lines_on_stdout_are_skipped(gw):
    lines = ["starting the hostile server", "[INFO] listening on stdio", "   indented: 1", "DEBUG {not json"]
    reply = call(gw, "text", "text_logs", {"lines": lines})
    assert reply.status == 200, reply.raw
    first = receiver(gw, "text", "text_logs")
    assert reply.value == {"pid": first, "after": "text"}
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream="text", kind="text") == len(lines)
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream="text", kind="not_jsonrpc") == 0
    assert alive(first), "a program that logs to stdout was stopped"
    assert pid_of(gw, "text") > 0
    assert gw.metric_total("portcullis_stdio_exits_total", upstream="text") == 0


def test_an_oversized_line_fails_the_call_with_bounded_memory(gw):
    # Warm up: one line over the limit, so what the gateway allocates once is counted before.
    refused(call(gw, "huge", "huge", {"bytes": 2 * MAX_LINE}), "upstream_bad_response", 502)
    first = receiver(gw, "huge", "huge")
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream="huge", kind="oversized") == 1
    restarted(gw, "huge", first)
    before = vm_rss_kib(gw.proc.pid)
    reply = call(gw, "huge", "huge", {"bytes": 50 << 20})
    after = vm_rss_kib(gw.proc.pid)
    refused(reply, "upstream_bad_response", 502)
    second = receiver(gw, "huge", "huge")
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream="huge", kind="oversized") == 2
    grew = (after - before) / 1024
    assert grew < 30, f"the gateway's RSS grew by {grew:.1f} MiB reading a 50 MiB line ({before} -> {after} KiB)"
    assert log_lines(gw, "a line longer than the limit on stdout; restarting it", 'upstream="huge"',
                     f"pid={second}"), gw.log()[-3000:]
    restarted(gw, "huge", second, crashes=2)


def test_a_line_that_is_not_utf8_fails_the_call(gw):
    refused(call(gw, "utf8", "bad_utf8"), "upstream_bad_response", 502)
    first = receiver(gw, "utf8", "bad_utf8")
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream="utf8", kind="not_utf8") == 1
    assert log_lines(gw, "not UTF-8 on stdout; restarting it", 'upstream="utf8"', f"pid={first}")
    restarted(gw, "utf8", first)


@pytest.mark.parametrize("upstream,stray_id", [("idnum", 999999), ("idstr", "abc")])
def test_a_response_to_an_unknown_id_fails_the_call(gw, upstream, stray_id):
    refused(call(gw, upstream, "unknown_id", {"id": stray_id}), "upstream_bad_response", 502)
    first = receiver(gw, upstream, "unknown_id")
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream=upstream, kind="unknown_id") == 1
    assert log_lines(gw, "a response to an id the gateway did not send on stdout; restarting it",
                     f'upstream="{upstream}"', f"pid={first}")
    restarted(gw, upstream, first)


# ==================================================================== stderr

def stderr_lines(gw: Gateway, upstream: str) -> list[tuple[datetime, str]]:
    out = []
    for line in gw.log().splitlines():
        if f"upstream={upstream} " in line and " stderr=" in line:
            stamp = datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))
            out.append((stamp, line))
    return out


def test_a_flood_on_stderr_is_bounded_and_the_gateway_stays_responsive(gw):
    escapes = "\x1b[31mRED\x1b[0m bell\x07 cr\r 2026-01-01T00:00:00Z ERROR portcullis: forged\x1b]0;title\x07"
    pid_of(gw, "peer")  # started before: what is timed is the flood, not a program's start
    reply = call(gw, "flood", "stderr_flood", {"lines": 100_000, "seconds": 3, "long_line": 10_000,
                                               "escapes": escapes})
    pid = reply.value["pid"]
    assert reply.value == {"pid": pid, "flooding": True}
    # While it floods: the same program and another route answer promptly, side by side.
    def timed_call(upstream: str) -> tuple[str, float]:
        started = time.monotonic()
        pid_of(gw, upstream)
        return upstream, time.monotonic() - started

    took = []
    with ThreadPoolExecutor(2) as pool:
        for _ in range(8):
            took += pool.map(timed_call, ["flood", "peer"])
            time.sleep(0.25)
    slow = [(u, round(t, 2)) for u, t in took if t > 1.0]
    assert not slow, f"calls took over a second during the flood: {slow}"
    time.sleep(1.5)  # the flood's last window
    assert gw.metric("portcullis_stdio_stderr_dropped_total", upstream="flood") > 0
    logged = stderr_lines(gw, "flood")
    assert logged, "nothing of the program's stderr was logged"
    span = (logged[-1][0] - logged[0][0]).total_seconds()
    assert len(logged) <= STDERR_LINES_PER_SECOND * (span + 2), f"{len(logged)} stderr lines in {span:.1f}s"
    # No second of the log holds more than two windows' worth.
    per_second = Counter(stamp.replace(microsecond=0) for stamp, _ in logged)
    assert max(per_second.values()) <= 2 * STDERR_LINES_PER_SECOND, per_second.most_common(3)
    longest = max(len(line.encode()) for _, line in logged)
    assert longest <= 2560, f"a stderr log line of {longest} bytes"
    runs = [max(map(len, re.findall("L+", line))) for _, line in logged if "LLLL" in line]
    assert runs and max(runs) <= STDERR_LINE_BYTES, f"the 10000-byte line was not cut: {runs}"
    text = gw.log_path.read_bytes()
    for raw in (b"\x1b", b"\x07", b"\r"):
        assert raw not in text, f"a raw {raw!r} from the program's stderr is in the gateway's log"
    forged = [line for _, line in logged if "forged" in line]
    assert forged and r"\u{1b}[31mRED" in forged[0], forged
    assert not [line for line in gw.log().splitlines() if line.startswith("2026-01-01T00:00:00Z")]
    assert alive(pid), "the flooding program was stopped"
    assert gw.metric_total("portcullis_stdio_exits_total", upstream="flood") == 0


# ==================================================================== exit, silence

def test_a_program_that_exits_mid_call(gw):
    refused(call(gw, "exit", "exit"), "upstream_connection_closed", 502)
    first = receiver(gw, "exit", "exit")
    assert wait_until(lambda: gw.metric("portcullis_stdio_exits_total", upstream="exit", how="failed") == 1, 3), \
        gw.metrics()
    restarted(gw, "exit", first)


def test_a_call_during_the_restart_backoff_is_refused_under_its_own_id(gw):
    """Right after a crash the next start waits (1 s): the refusal is the client's."""
    refused(call(gw, "backoff", "exit"), "upstream_connection_closed", 502)
    first = receiver(gw, "backoff", "exit")
    assert wait_until(lambda: not alive(first), 3)
    refused(call(gw, "backoff", "pid", rid=41), "upstream_unreachable", 502, rid=41)
    restarted(gw, "backoff", first)


def test_a_program_that_never_answers(gw):
    reply = call(gw, "hang", "hang", rid=7)
    first = receiver(gw, "hang", "hang")
    refused(reply, "upstream_timeout", 504, rid=7)
    assert RESPONSE_TIMEOUT_S - 0.1 <= reply.elapsed < RESPONSE_TIMEOUT_S + 2, reply.elapsed

    def cancelled() -> list[dict]:
        lines = [json.loads(r["line"]) for r in gw.record("hang") if "line" in r and r["pid"] == first]
        [asked] = [m for m in lines if (m.get("params") or {}).get("name") == "hang"]
        return [m for m in lines if m.get("method") == "notifications/cancelled"
                and m["params"].get("requestId") == asked["id"]]

    assert wait_until(lambda: cancelled(), 3), f"no notifications/cancelled for the call: {gw.record('hang')}"
    after = call(gw, "hang", "pid")
    assert after.status == 200 and after.value["pid"] > 0, after.raw


def test_programs_that_never_answer_do_not_use_up_the_processes(gw):
    """max_processes = 2: three calls that time out, then an honest call still works."""
    replies = [call(gw, "hang2", "hang", rid=rid) for rid in (1, 2, 3)]
    after = call(gw, "hang2", "pid", rid=4)
    assert after.status == 200 and after.value["pid"] > 0, (
        f"an honest call after three that timed out: {after.raw[:600]}\n"
        + "\n".join(r.raw[:300] for r in replies)
        + f"\nprocesses running: {gw.metric('portcullis_stdio_processes', upstream='hang2')}")
    for rid, reply in zip((1, 2, 3), replies):
        refused(reply, "upstream_timeout", 504, rid=rid)


@pytest.mark.parametrize("upstream,tool,said", [
    ("spin", "spin", "kept working on it"),
    ("midline", "midline", "stopped in the middle of a line"),
])
def test_a_program_still_busy_with_a_request_given_up_is_replaced(gw, upstream, tool, said):
    """After its call timed out: a program that keeps burning the CPU, or that stopped in the
    middle of a line (which would corrupt the next answer), is stopped, and the next call
    gets a fresh one (max_processes = 1: it would otherwise get this one)."""
    refused(call(gw, upstream, tool, rid=8), "upstream_timeout", 504, rid=8)
    first = receiver(gw, upstream, tool)
    assert wait_until(lambda: not alive(first), 4), f"{upstream}: the program {first} still runs"
    assert log_lines(gw, said, f"upstream={upstream}", f"pid={first}"), gw.log()[-3000:]
    after = call(gw, upstream, "pid", rid=9)
    assert after.status == 200 and after.value["pid"] not in (0, first), after.raw
    # The gateway stopped it: no crash, no restart backoff.
    assert gw.metric_total("portcullis_stdio_exits_total", upstream=upstream) == 1


def test_a_program_that_went_quiet_after_a_request_given_up_is_kept(gw):
    """A program may rightly never answer a cancelled request: one that does nothing is kept."""
    refused(call(gw, "hang", "hang", rid=10), "upstream_timeout", 504, rid=10)
    first = receiver(gw, "hang", "hang")
    time.sleep(2)
    assert alive(first)
    assert call(gw, "hang", "pid", rid=11).value["pid"] == first


# ==================================================================== children

def test_a_child_in_the_process_group_is_stopped_with_the_program(gw):
    marker = f"hostile-child-{uuid.uuid4().hex}"
    pidfile = gw.tmp / "group-child.pid"
    reply = call(gw, "group", "fork", {"marker": marker, "pidfile": str(pidfile)})
    program, child = reply.value["pid"], reply.value["child"]
    assert int(pidfile.read_text()) == child
    assert pids_with(marker) == [child], "the child is not running"
    # idle_timeout = 1s: the idle program is stopped (SIGTERM to its group), the child with it.
    assert wait_until(lambda: not alive(program), 6), f"the idle program {program} was not stopped"
    assert wait_until(lambda: not alive(child), 3), f"the child {child} outlived the program"
    assert pids_with(marker) == []


def test_a_sandboxed_child_that_leaves_the_group_is_gone_with_the_program(gw):
    marker = f"hostile-child-{uuid.uuid4().hex}"
    pidfile = gw.tmp / "boxed-child.pid"
    reply = call(gw, "boxed", "fork", {"marker": marker, "pidfile": str(pidfile), "setsid": True})
    assert reply.status == 200, reply.raw
    assert int(pidfile.read_text()) == reply.value["child"]  # its pid in the sandbox's namespace
    assert wait_until(lambda: len(pids_with(marker)) == 1, 2), "the setsid child is not running"
    [child] = pids_with(marker)
    # The gateway's child is the program's supervisor (the gateway's own binary), bubblewrap its child.
    [supervisor] = [p for p in children_of(gw.proc.pid) if upstream_of(p) == "boxed"]
    assert Path(f"/proc/{supervisor}/exe").resolve() == _binary().resolve()
    [launcher] = children_of(supervisor)
    assert Path(f"/proc/{launcher}/exe").resolve() == Path("/usr/bin/bwrap").resolve()
    assert os.getsid(child) != os.getpgid(launcher), "the child did not leave the program's group"
    assert wait_until(lambda: not alive(launcher) and not alive(supervisor), 6), \
        "the idle sandboxed program was not stopped"
    assert wait_until(lambda: not pids_with(marker), 3), f"the setsid child {child} outlived the sandbox"


def test_drain_stops_the_program_and_its_group(shared_tmp):
    tmp_path = shared_tmp
    """SIGTERM to the gateway: every program gets SIGTERM (its group), the gateway exits 0."""
    marker = f"hostile-child-{uuid.uuid4().hex}"
    with running([Upstream("drain")], tmp_path) as gateway:
        reply = call(gateway, "drain", "fork", {"marker": marker, "pidfile": str(tmp_path / "child.pid")})
        program, child = reply.value["pid"], reply.value["child"]
        assert alive(program) and pids_with(marker) == [child]
        gateway.proc.send_signal(signal.SIGTERM)
        assert gateway.proc.wait(10) == 0, gateway.log()[-2000:]
    assert wait_until(lambda: not alive(program) and not pids_with(marker), 3), \
        f"after the gateway's drain: program alive={alive(program)}, child {pids_with(marker)}"
    assert log_lines(gateway, "stdio program ended", "upstream=drain", f"pid={program}")


def upstream_of(pid: int) -> str | None:
    """The HOSTILE_CASE its environment names (which upstream started it)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"HOSTILE_CASE="):
            return item.split(b"=", 1)[1].decode()
    return None


def children_of(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


# ==================================================================== environment, fds

@pytest.mark.parametrize("upstream", ["env", "envbox"])
def test_the_program_gets_only_its_configured_environment_and_three_fds(gw, upstream):
    seen = call(gw, upstream, "environ").value
    names = set(seen["env"])
    if upstream == "envbox":
        # bubblewrap sets PWD to the folder it starts the program in (the
        # gateway's own PWD is another folder: not inherited).
        assert seen["pwd"] == seen["cwd"] == str(gw.tmp) != os.environ.get("PWD"), seen
        names.discard("PWD")
    assert names == {"PATH", "HOME", "HOSTILE_RECORD", "HOSTILE_CASE", PASSED}, seen["env"]
    assert KEYS_ENV not in seen["os_environ"]
    assert not set(SECRET_ENV) & set(seen["os_environ"])
    # 0, 1, 2 and the descriptor os.listdir('/proc/self/fd') itself had open.
    assert seen["fds"] == [0, 1, 2, 3], seen["fds"]


def test_naming_the_state_keys_in_env_from_is_refused_at_start(tmp_path):
    up = Upstream("leak", {"env_from": f'["{PASSED}", "{KEYS_ENV}"]'})
    config = tmp_path / "gateway.toml"
    config.write_text(config_text([up], tmp_path))
    out = subprocess.run([str(_binary()), "run", "--config", str(config)], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=20, env=gateway_env(keygen()))
    said = out.stdout + out.stderr
    assert out.returncode != 0, said
    assert "env_from" in said and KEYS_ENV in said, said
    assert "listening" not in said
    assert list(tmp_path.glob("leak.jsonl")) == [], "the program was started"


# ==================================================================== a pushed password form

def legacy_session(gw: Gateway, upstream: str) -> tuple[dict, str]:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": LEGACY}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {"elicitation": {"form": {}, "url": {}}},
        "clientInfo": {"name": "stdio-hostile-suite", "version": "1"}}}
    status, head, text = post(gw.url(upstream), headers, init)
    assert status == 200, text
    session = head.get("mcp-session-id")
    assert session, f"no session: {head} {text[:500]}"
    headers["mcp-session-id"] = session
    assert json.loads(text)["result"]["protocolVersion"] == LEGACY
    status, _, text = post(gw.url(upstream), headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert status == 202, text
    return headers, session


def post(url: str, headers: dict, body: dict) -> tuple[int, dict, str]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode()


@pytest.mark.parametrize("form,reason", [({}, "secret_field_requested"),
                                         ({"format": "password"}, "schema_not_allowed")])
def test_a_pushed_password_form_never_reaches_the_client(gw, form, reason):
    headers, _ = legacy_session(gw, "push")
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "password", "arguments": form}}
    before = len(gw.record("push"))
    status, head, text = post(gw.url("push"), headers, body)
    assert status == 200, text
    messages = [json.loads(e) for e in events(text)] if head.get("content-type", "").startswith(
        "text/event-stream") else [json.loads(text)]
    assert "elicitation/create" not in text and "Sign in again" not in text, text
    assert [m.get("id") for m in messages] == [5], f"more than the call's answer reached the client: {text}"
    # The push was refused to the program with the policy's reason; its tool ends with that refusal.
    answers = [r["push_answer"] for r in gw.record("push")[before:] if "push_answer" in r]
    assert len(answers) == 1, gw.record("push")[before:]
    error = answers[0].get("error")
    assert error and "result" not in answers[0], answers
    assert error["code"] == -32010 and error["data"]["reason"] == reason, error
    [message] = messages
    result = message.get("result")
    assert result and result["isError"] is True, message
    assert result["content"][0]["text"] == error["message"], (result, error)
    if reason == "secret_field_requested":
        assert "URL mode" in error["message"] and "password" in error["message"], error
    assert log_lines(gw, "pushed request refused", f'reason="{reason}"', "upstream=push")


# ==================================================================== the sandbox's network

@pytest.fixture
def listener():
    """A TCP listener on 127.0.0.1 that records what connects to it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.1)
    got: list[bytes] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(2)
                try:
                    got.append(conn.recv(1024))
                except OSError:
                    got.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1], got
    stop.set()
    thread.join(2)
    sock.close()


def test_the_sandbox_has_no_network_unless_asked(gw, listener):
    port, got = listener
    off = call(gw, "netoff", "connect", {"port": port}).value
    assert off["connected"] is False and off["errno"] in {"ECONNREFUSED", "ENETUNREACH"}, off
    time.sleep(0.3)
    assert got == [], "the sandboxed program reached the test's listener"
    on = call(gw, "neton", "connect", {"port": port}).value
    assert on == {"connected": True}, on
    assert wait_until(lambda: got == [b"hello from the hostile program\n"], 3), got


# ==================================================================== resource limits

def test_resource_limits_hold(gw):
    files = call(gw, "limits", "open_files", {"count": 100}).value
    assert files["error"] == "EMFILE" and files["opened"] < 64, files
    memory = call(gw, "limits", "alloc", {"mb": 512}).value
    assert memory == {"allocated": 0, "error": "MemoryError"}, memory
    small = call(gw, "limits", "alloc", {"mb": 16}).value
    assert small == {"allocated": 16 << 20}, small
    assert gw.proc.poll() is None and gw.ready() == 200
