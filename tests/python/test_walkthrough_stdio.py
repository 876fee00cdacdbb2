"""The stdio walkthroughs replayed as written (issue 39, "every walkthrough runs as written"):

- docs/src/guide/stdio.md's first example (`<!-- toml: example stdio-files, folders data -->`):
  the official filesystem server installed with the page's own `npm install --global` command,
  the `data` folder, the TOML as printed, `portcullis check`, `portcullis run`, and the Python SDK
  client listing its tools, writing a file inside `data` and reading it back, and trying to write
  outside the sandbox;
- README.md's stdio snippet (`<!-- toml: example readme-memory -->`) and the book's getting
  started (`quickstart-stdio`): `server-memory` installed the same way, an entity created and read back by another session, and its file where the
  page says it is (inside the global install).

Both configs and both install commands are read from the pages themselves, with the marker
grammar of tests/it/book_examples.rs (a marker on the line before a ```toml fence), so a page
that changes changes what runs here. What differs from a reader's machine, and only that:
- npm installs into a throw-away `--prefix` (the user's global npm is not touched), at the
  versions tests/interop/package.json pins (the real-world corpus pins the same), and
  `--prefer-offline`: `npm ci` in tests/interop has already put those tarballs in npm's cache.
  `<prefix>/bin` goes first on PATH, as a global install puts its programs on PATH;
- that prefix is outside the sandbox's default read-only folders, so the sandbox gets it in
  `read_only`, which is exactly what the page tells a reader whose npm installs elsewhere
  (without it, `portcullis check` names the program outside the sandbox: checked too);
- the listener's `127.0.0.1:8080` becomes port 0 (8080 may be taken on a test machine);
- run as root (as CI does), the gateway starts the sandboxed program as `nobody`: `check` warns
  that `data` is not that user's, the page tells such a reader to `chown nobody data`, and the
  test does that (as written without it, the program's writes failed with EACCES).

Skips (with the reason) only when node or npm is missing; the test command installs both.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import REPO, _binary, _stop, bound_addresses

pytestmark = pytest.mark.anyio

STDIO_PAGE = REPO / "docs" / "src" / "guide" / "stdio.md"
README = REPO / "README.md"
PINS = REPO / "tests" / "interop" / "package.json"
MARKER = re.compile(r"^<!--\s*toml:\s*example\s+(?P<name>[^,]+?)(?:,\s*folders\s+(?P<folders>.+?))?\s*-->$")
NPM_GLOBAL = re.compile(r"npm install --global (@?[\w./-]+)")
NPM_TIMEOUT_S = 300


@dataclass(frozen=True)
class Walkthrough:
    config: str  # the TOML as printed
    folders: list[str]  # what the marker says the reader makes beside it
    package: str  # what the text's `npm install --global` installs
    page: str  # the page's whole text (what it tells the reader around the example)


def walkthrough(page: Path, name: str) -> Walkthrough:
    """The complete example `name` of `page`, and the last `npm install --global` before it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        m = MARKER.match(line.strip())
        if not m or m.group("name").strip() != name:
            continue
        assert i + 1 < len(lines) and lines[i + 1].strip() == "```toml", f"{page}:{i + 1}: marker not before a ```toml fence"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].strip().startswith("```"))
        before = "\n".join(lines[:i])
        installs = NPM_GLOBAL.findall(before)
        assert installs, f"{page}: no `npm install --global` before the example {name}"
        return Walkthrough(
            config="\n".join(lines[i + 2 : end]) + "\n",
            folders=(m.group("folders") or "").split(),
            package=installs[-1],
            page="\n".join(lines),
        )
    raise AssertionError(f"{page}: no <!-- toml: example {name} --> (the walkthrough this test replays)")


def require_npm() -> tuple[str, str]:
    """npm and the node it runs on; missing: a skip, or a failure under
    PORTCULLIS_REQUIRE_PEERS=1 (the test command, which needs npm anyway)."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        message = "node or npm is missing: the stdio walkthroughs install their servers with npm"
        if os.environ.get("PORTCULLIS_REQUIRE_PEERS") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return npm, node


def pinned(package: str) -> str:
    version = json.loads(PINS.read_text())["dependencies"].get(package)
    assert version, f"{package} (named by the walkthrough) is not pinned in {PINS}"
    return f"{package}@{version}"


@pytest.fixture
def prefix(shared_tmp_factory) -> Path:
    """A throw-away npm prefix per walkthrough, as on a fresh machine (every user may read
    it: a sandboxed program may run as nobody)."""
    return shared_tmp_factory.mktemp("npm-prefix")


def npm_install_global(package: str, prefix: Path) -> None:
    """The text's `npm install --global PACKAGE`, into `prefix`, at the pinned version."""
    npm, _ = require_npm()
    cmd = [npm, "install", "--global", "--prefix", str(prefix), "--prefer-offline"]
    cmd += ["--no-audit", "--no-fund", "--loglevel=error", pinned(package)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-3000:]}"


def search_path(prefix: Path) -> str:
    return f"{prefix / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"


@dataclass(frozen=True)
class Running:
    url: str  # the listener, http://127.0.0.1:PORT
    log: Path


def check(folder: Path, config: str, prefix: Path) -> subprocess.CompletedProcess:
    """`portcullis check` on `folder/gateway.toml`, with `<prefix>/bin` on PATH."""
    path = folder / "gateway.toml"
    path.write_text(config)
    env = {**os.environ, "PATH": search_path(prefix)}
    return subprocess.run(
        [str(_binary()), "check", "--config", str(path)], cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )


@contextmanager
def check_then_run(folder: Path, config: str, prefix: Path) -> Iterator[Running]:
    """`portcullis check`, then `portcullis run`, on `folder/gateway.toml`, as a reader runs them."""
    checked = check(folder, config, prefix)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 0, f"`portcullis check` fails:\n{said}"
    assert "warning" not in said.lower(), said
    path = folder / "gateway.toml"
    env = {**os.environ, "PATH": search_path(prefix)}
    log = folder / "gateway.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(_binary()), "run", "--config", str(path)],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            bound = bound_addresses(log, proc, ("listener",))
            yield Running(f"http://{bound['listener']}", log)
        finally:
            _stop(proc)


def on_port_zero(config: str) -> str:
    printed = 'address = "127.0.0.1:8080"'
    assert printed in config, "the walkthrough's listener moved: update this test's port change"
    return config.replace(printed, 'address = "127.0.0.1:0"', 1)


def with_read_only(config: str, folders: list[Path]) -> str:
    """The `read_only` line the page tells a reader to add under `[upstream.sandbox]`."""
    head = "[upstream.sandbox]\n"
    assert config.count(head) == 1, config
    assert "read_only" not in config, "the example names read_only itself: merge instead of adding"
    line = "read_only = [" + ", ".join(json.dumps(str(f)) for f in folders) + "]\n"
    return config.replace(head, head + line)


@asynccontextmanager
async def client(url: str) -> AsyncIterator[Client]:
    async with Client(streamable_http_client(url)) as c:
        yield c


def texts(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def route_path(config: str, upstream: str) -> str:
    import tomllib

    routes = [r for r in tomllib.loads(config)["route"] if r["upstream"] == upstream]
    assert len(routes) == 1, routes
    return routes[0]["path"]


# --- docs/src/guide/stdio.md: the filesystem server in a sandbox -------------------------


async def test_the_stdio_guide_filesystem_walkthrough_runs_as_written(prefix, shared_tmp_factory):
    w = walkthrough(STDIO_PAGE, "stdio-files")
    assert w.package == "@modelcontextprotocol/server-filesystem", w.package
    npm_install_global(w.package, prefix)

    folder = shared_tmp_factory.mktemp("walk-files")
    folder.chmod(0o755)
    for name in w.folders:  # `mkdir data`
        (folder / name).mkdir()
    # Node.js under /usr is already shown; a node elsewhere (nvm) is that folder too.
    extra = [prefix]
    node = Path(require_npm()[1]).resolve()
    if not any(node.is_relative_to(d) for d in ("/usr", "/bin")):
        extra.append(node.parent.parent)
    assert "needs that folder in `read_only`" in w.page, "the page no longer says what an npm elsewhere needs"
    # Without it the program could not start in the sandbox, and `check` says so.
    bare = check(folder, on_port_zero(w.config), prefix)
    said = bare.stdout + bare.stderr
    assert bare.returncode != 0, said
    assert f"{prefix}/bin/mcp-server-filesystem is outside the sandbox" in said, said
    assert "sandbox.read_only" in said, said
    config = with_read_only(on_port_zero(w.config), extra)
    if os.geteuid() == 0:
        # `check` warns that `data` is root's, and the page tells such a reader what to do.
        warned = check(folder, config, prefix)
        said = warned.stdout + warned.stderr
        assert warned.returncode == 0, said
        nobody = pwd.getpwnam("nobody").pw_uid
        assert f"{folder / 'data'} is not writable by uid {nobody}" in said, said
        assert "`chown nobody data`" in w.page, "the page no longer says what root does about `data`"
        for name in w.folders:
            os.chown(folder / name, nobody, -1)

    data = folder / "data"
    outside = folder / "outside.txt"
    host_tmp = Path("/tmp") / f"{folder.parent.name}-{folder.name}-outside.txt"
    with check_then_run(folder, config, prefix) as gw:
        url = gw.url + route_path(config, "files")
        async with client(url) as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            assert {"write_file", "read_text_file", "list_directory"} <= tools, tools

            wrote = await c.call_tool("write_file", {"path": "notes.txt", "content": "hello from the walkthrough\n"})
            assert not wrote.is_error, texts(wrote)
            read = await c.call_tool("read_text_file", {"path": "notes.txt"})
            assert not read.is_error, texts(read)
            assert texts(read) == "hello from the walkthrough\n"

            refused = []
            for target in ("../outside.txt", str(outside), str(host_tmp)):
                result = await c.call_tool("write_file", {"path": target, "content": "escaped\n"})
                refused.append((target, result.is_error, texts(result)))
        log = gw.log.read_text(errors="replace")

    assert (data / "notes.txt").read_text() == "hello from the walkthrough\n", log[-3000:]
    # The server's own roots refuse each of them (before the sandbox would be reached).
    for target, is_error, text in refused:
        assert is_error, f"a write to {target} was not refused: {text}"
        assert "outside allowed directories" in text, (target, text)
    assert not outside.exists()
    assert not host_tmp.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["data", "gateway.log", "gateway.toml"]


# --- README.md and the book's getting started: server-memory without a sandbox ---------


@pytest.mark.parametrize(
    ("page", "name"),
    [(README, "readme-memory"), (REPO / "docs" / "src" / "getting-started.md", "quickstart-stdio")],
    ids=["readme", "getting-started"],
)
async def test_the_memory_walkthrough_runs_as_written(prefix, shared_tmp_factory, page, name):
    w = walkthrough(page, name)
    assert w.package == "@modelcontextprotocol/server-memory", w.package
    npm_install_global(w.package, prefix)
    folder = shared_tmp_factory.mktemp("walk-memory")
    for name in w.folders:
        (folder / name).mkdir()

    with check_then_run(folder, on_port_zero(w.config), prefix) as gw:
        url = gw.url + route_path(w.config, "memory")
        async with client(url) as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            assert {"create_entities", "open_nodes", "read_graph"} <= tools, tools
            entity = {"name": "Portcullis", "entityType": "gateway", "observations": ["guards MCP servers"]}
            made = await c.call_tool("create_entities", {"entities": [entity]})
            assert not made.is_error, texts(made)
        async with client(url) as c:  # another session: the program's file, not the session, holds it
            opened = await c.call_tool("open_nodes", {"names": ["Portcullis"]})
            assert not opened.is_error, texts(opened)
        graph = opened.structured_content or json.loads(texts(opened))
    assert [e["name"] for e in graph["entities"]] == ["Portcullis"], graph
    assert graph["entities"][0]["observations"] == ["guards MCP servers"], graph
    # Where the text says the graph went: beside the program's code, in the global install.
    assert "`memory.jsonl` beside its own code" in w.page and "MEMORY_FILE_PATH" in w.page
    kept = prefix / "lib" / "node_modules" / w.package / "dist" / "memory.jsonl"
    assert "guards MCP servers" in kept.read_text(), kept
    assert sorted(p.name for p in folder.iterdir()) == ["gateway.log", "gateway.toml"]
