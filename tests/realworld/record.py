#!/usr/bin/env python3
"""Records what each real server of the corpus lists, over stdio.

For each server of servers.toml (or the `subset = true` ones): install it
into the cache (install.py), start it with a clean environment in a scratch
folder, `initialize` (offering 2025-11-25, accepting whatever version it
answers, falling back to older ones), `notifications/initialized`, then every
list it serves (tools, prompts, resources, resource templates; `nextCursor`
pages followed and merged), answering the `roots/list` and `ping` requests
it sends and skipping stdout lines that are not JSON; then `server/discover`
(2026-07-28). Writes OUT/<server>/initialize.json, tools.json, prompts.json,
resources.json, templates.json, discover.json (each the `result` object),
status.json (what happened) and stderr.log.

Standard library only. Usage: record.py [--subset] [--out DIR] [--only ID,...] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import DEFAULT_OUT, LISTS, Server, add_selection_args, selected  # noqa: E402
from install import InstallError, install, node_bin, server_dir  # noqa: E402

VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
NEXT = "2026-07-28"
START_TIMEOUT = 90.0
LIST_TIMEOUT = 60.0
MAX_PAGES = 500
CAPABILITY = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
}


class Gone(Exception):
    """The server exited or closed its stdout."""


class Silent(Exception):
    """The server did not answer in time."""


class Session:
    """One server process spoken to over stdio, newline-delimited JSON-RPC."""

    def __init__(self, argv: list[str], env: dict, cwd: Path, stderr) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0
        self.non_json = 0
        self.notifications = 0
        self.server_requests: list[str] = []
        self.roots = [{"uri": cwd.as_uri(), "name": "work"}]
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                self.non_json += 1
                continue
            if isinstance(msg, dict):
                self.inbox.put(msg)
            else:
                self.non_json += 1
        self.inbox.put(None)

    def send(self, msg: dict) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise Gone(f"stdin closed: {e}") from e

    def notify(self, method: str, params: dict | None = None) -> None:
        msg: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def _answer(self, msg: dict) -> None:
        method = msg.get("method")
        self.server_requests.append(str(method))
        if method == "roots/list":
            reply = {"result": {"roots": self.roots}}
        elif method == "ping":
            reply = {"result": {}}
        else:
            reply = {"error": {"code": -32601, "message": f"the recorder does not serve {method}"}}
        self.send({"jsonrpc": "2.0", "id": msg["id"], **reply})

    def request(self, method: str, params: dict, timeout: float) -> dict:
        """The response (with `result` or `error`) to one request."""
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Silent(f"no answer to {method} in {timeout:.0f}s")
            try:
                msg = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if msg is None:
                self.inbox.put(None)
                raise Gone(f"the server exited (status {self.proc.poll()}) before answering {method}")
            if "method" in msg:
                if "id" in msg:
                    self._answer(msg)
                else:
                    self.notifications += 1
                continue
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                return
            try:
                self.proc.wait(timeout=3)
                return
            except subprocess.TimeoutExpired:
                continue


def _error_text(resp: dict) -> str:
    err = resp.get("error") or {}
    return f"{err.get('code')}: {str(err.get('message'))[:200]}"


def scratch(base: Path) -> Path:
    """A work folder (a git repository with one commit) and a clean HOME in it."""
    work = Path(tempfile.mkdtemp(prefix="rw-", dir=base))
    (work / "home").mkdir()
    (work / "README.md").write_text("# scratch\n\nA folder the recorder gives a server.\n")
    if shutil.which("git"):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(work / "home"),
            "GIT_AUTHOR_NAME": "recorder",
            "GIT_AUTHOR_EMAIL": "recorder@localhost",
            "GIT_COMMITTER_NAME": "recorder",
            "GIT_COMMITTER_EMAIL": "recorder@localhost",
        }
        for cmd in (["init", "-q"], ["add", "README.md"], ["commit", "-q", "-m", "scratch"]):
            subprocess.run(["git", *cmd], cwd=work, env=env, capture_output=True, check=False)
    return work


def clean_env(server: Server, exe: Path, nodes: Path | None, work: Path) -> dict:
    home = work / "home"
    path = [str(exe.parent)]
    if nodes is not None:
        path.append(str(nodes))
    path += ["/usr/local/bin", "/usr/bin", "/bin"]
    env = {
        "PATH": os.pathsep.join(path),
        "HOME": str(home),
        "TMPDIR": str(work),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8",
        "NODE_NO_WARNINGS": "1",
        "DO_NOT_TRACK": "1",
    }
    for k, v in server.env.items():
        env[k] = v.replace("{work}", str(work)).replace("{home}", str(home))
    return env


def fetch_list(s: Session, method: str, meta: dict | None) -> tuple[dict | None, dict]:
    """All pages of one list merged into one result, and what happened."""
    _, key = LISTS[method]
    merged: dict | None = None
    cursor = None
    seen: set = set()
    pages = 0
    while True:
        params: dict = {} if cursor is None else {"cursor": cursor}
        if meta:
            params["_meta"] = meta
        resp = s.request(method, params, LIST_TIMEOUT)
        if "error" in resp:
            return merged, {"error": _error_text(resp), "pages": pages}
        result = resp["result"]
        if not isinstance(result, dict):
            return merged, {"error": "result is not an object", "pages": pages}
        pages += 1
        if merged is None:
            merged = dict(result)
            merged[key] = list(result.get(key) or [])
        else:
            merged[key].extend(result.get(key) or [])
        cursor = result.get("nextCursor")
        merged.pop("nextCursor", None)
        if cursor is None or cursor in seen or pages >= MAX_PAGES:
            break
        seen.add(cursor)
    return merged, {"items": len(merged[key]), "pages": pages}


def record(server: Server, out: Path, nodes: Path | None, scratch_base: Path) -> dict:
    folder = out / server.id
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    status: dict = {
        "id": server.id,
        "registry": server.registry,
        "package": server.package,
        "version": server.version,
        "ok": False,
    }
    started = time.monotonic()
    try:
        exe = install(server, nodes)
    except InstallError as e:
        status["error"] = f"install: {e}"
        status["seconds"] = round(time.monotonic() - started, 1)
        (folder / "status.json").write_text(json.dumps(status, indent=2) + "\n")
        return status
    status["install_seconds"] = round(time.monotonic() - started, 1)
    work = scratch(scratch_base)
    for name, text in server.files.items():
        target = Path(name.replace("{work}", str(work)).replace("{home}", str(work / "home")))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    argv = [str(exe)] + [a.replace("{work}", str(work)).replace("{home}", str(work / "home")) for a in server.args]
    files: dict[str, dict] = {}
    lists: dict[str, dict] = {}
    with (folder / "stderr.log").open("wb") as stderr:
        try:
            s = Session(argv, clean_env(server, exe, nodes, work), work, stderr)
        except OSError as e:
            shutil.rmtree(work, ignore_errors=True)
            status["error"] = f"cannot start {exe.name}: {e}"
            (folder / "status.json").write_text(json.dumps(status, indent=2) + "\n")
            return status
        try:
            meta = None
            init = None
            for version in VERSIONS:
                resp = s.request(
                    "initialize",
                    {
                        "protocolVersion": version,
                        "capabilities": {"roots": {"listChanged": True}},
                        "clientInfo": {"name": "portcullis-realworld", "version": "1.0.0"},
                    },
                    START_TIMEOUT,
                )
                if "result" in resp and isinstance(resp["result"], dict):
                    init = resp["result"]
                    status["offered"] = version
                    break
                status.setdefault("initialize_errors", []).append(_error_text(resp))
            if init is not None:
                files["initialize.json"] = init
                status["protocolVersion"] = init.get("protocolVersion")
                status["serverInfo"] = init.get("serverInfo")
                s.notify("notifications/initialized")
                caps = init.get("capabilities") or {}
            else:
                meta = {
                    "io.modelcontextprotocol/protocolVersion": NEXT,
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
                caps = {}
            advertised = [m for m in LISTS if CAPABILITY[m] in caps]
            others = [m for m in LISTS if m not in advertised]
            for method in advertised + others:
                try:
                    result, what = fetch_list(s, method, meta)
                except Silent as e:
                    lists[method] = {"error": str(e)}
                    continue
                what["advertised"] = method in advertised
                lists[method] = what
                if result is not None and (method in advertised or what.get("items")):
                    files[LISTS[method][0]] = result
            resp = s.request(
                "server/discover",
                {
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": NEXT,
                        "io.modelcontextprotocol/clientCapabilities": {},
                    }
                },
                15.0,
            )
            if "result" in resp:
                files["discover.json"] = resp["result"]
                status["discover"] = "answered"
            else:
                status["discover"] = _error_text(resp)
        except (Gone, Silent) as e:
            status["error"] = str(e)
        finally:
            s.close()
            status["exit_status"] = s.proc.poll()
            status["non_json_lines"] = s.non_json
            status["notifications"] = s.notifications
            status["server_requests"] = sorted(set(s.server_requests))
            shutil.rmtree(work, ignore_errors=True)
    for name, result in files.items():
        (folder / name).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    status["lists"] = lists
    status["ok"] = "initialize.json" in files or any(n in files for n, _ in LISTS.values())
    status["seconds"] = round(time.monotonic() - started, 1)
    (folder / "status.json").write_text(json.dumps(status, indent=2) + "\n")
    return status


def summary_line(st: dict) -> str:
    if not st.get("ok"):
        return f"FAIL {st['id']}: {st.get('error', 'nothing recorded')}"[:300]
    parts = []
    for method, what in st.get("lists", {}).items():
        if "items" in what and (what.get("advertised") or what["items"]):
            parts.append(f"{method.split('/')[0] if method != 'resources/templates/list' else 'templates'}={what['items']}")
    extra = f" ({st['error']})" if st.get("error") else ""
    return f"ok   {st['id']} [{st.get('protocolVersion')}] {' '.join(parts)} {st['seconds']}s{extra}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_selection_args(ap)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where recordings go (default {DEFAULT_OUT})")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("REALWORLD_JOBS", "4")))
    ap.add_argument(
        "--prune",
        action="store_true",
        help="remove a server's install folder once it is recorded, unless it is in the subset (disk)",
    )
    args = ap.parse_args(argv)
    servers = selected(args)
    args.out.mkdir(parents=True, exist_ok=True)
    nodes = node_bin() if any(s.registry == "npm" for s in servers) else None
    scratch_base = Path(tempfile.mkdtemp(prefix="portcullis-realworld-"))
    started = time.monotonic()
    lock = threading.Lock()
    results = []

    def one(server: Server) -> dict:
        st = record(server, args.out, nodes, scratch_base)
        if args.prune and not server.subset:
            shutil.rmtree(server_dir(server), ignore_errors=True)
        with lock:
            print(summary_line(st), flush=True)
        return st

    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(one, servers))
    finally:
        shutil.rmtree(scratch_base, ignore_errors=True)
    ok = sum(1 for r in results if r.get("ok"))
    index = {
        "servers": len(results),
        "recorded": ok,
        "seconds": round(time.monotonic() - started, 1),
        "subset": args.subset,
        "status": {r["id"]: {k: r.get(k) for k in ("ok", "error", "protocolVersion", "seconds")} for r in results},
    }
    (args.out / "recorded.json").write_text(json.dumps(index, indent=2) + "\n")
    print(f"recorded {ok} of {len(results)} servers in {index['seconds']}s into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
