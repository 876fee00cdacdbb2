"""The real-world corpus: the pinned server list and where things live.

Shared by the recorder (record.py) and the policy runner (check.py).
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SERVERS = HERE / "servers.toml"
DEFAULT_OUT = ROOT / "target" / "realworld"

# The files a recording holds, each a JSON-RPC `result` object, by the method
# that produced it.
LISTS = {
    "tools/list": ("tools.json", "tools"),
    "prompts/list": ("prompts.json", "prompts"),
    "resources/list": ("resources.json", "resources"),
    "resources/templates/list": ("templates.json", "resourceTemplates"),
}

_EXACT_NPM = re.compile(r"^(@?[^@\s]+)@(\d[0-9A-Za-z.+-]*)$")
_EXACT_PYPI = re.compile(r"^([A-Za-z0-9._-]+)==(\d[0-9A-Za-z.+!-]*)$")


class CorpusError(Exception):
    """servers.toml says something the corpus cannot use."""


@dataclass(frozen=True)
class Server:
    id: str
    registry: str  # npm | pypi
    package: str
    version: str
    bin: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    python: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    pins: tuple[str, ...] = ()
    subset: bool = False
    note: str = ""

    @property
    def spec(self) -> str:
        sep = "@" if self.registry == "npm" else "=="
        return f"{self.package}{sep}{self.version}"

    @property
    def marker(self) -> str:
        """What an install folder is marked with: the spec and any pins."""
        return " ".join((self.spec,) + self.pins)


def server_id(package: str) -> str:
    """A folder name for a package: `@scope/name` is `scope+name`."""
    return package.lstrip("@").replace("/", "+")


def load(path: Path = SERVERS) -> list[Server]:
    with path.open("rb") as f:
        data = tomllib.load(f)
    servers: list[Server] = []
    seen: set[str] = set()
    for i, entry in enumerate(data.get("server", [])):
        if ("npm" in entry) == ("pypi" in entry):
            raise CorpusError(f"server #{i + 1}: give exactly one of npm, pypi")
        registry = "npm" if "npm" in entry else "pypi"
        spec = entry[registry]
        m = (_EXACT_NPM if registry == "npm" else _EXACT_PYPI).match(spec)
        if not m:
            raise CorpusError(f"server #{i + 1}: {spec!r} is not pinned to an exact version")
        package, version = m.group(1), m.group(2)
        for pin in entry.get("pins", ()):
            if not (_EXACT_NPM if registry == "npm" else _EXACT_PYPI).match(pin):
                raise CorpusError(f"server #{i + 1}: pin {pin!r} is not an exact version")
        sid = entry.get("id") or server_id(package)
        if sid in seen:
            raise CorpusError(f"server {sid} is listed twice")
        seen.add(sid)
        unknown = set(entry) - {"npm", "pypi", "id", "bin", "args", "env", "python", "files", "pins", "subset", "note"}
        if unknown:
            raise CorpusError(f"server {sid}: unknown keys {sorted(unknown)}")
        servers.append(
            Server(
                id=sid,
                registry=registry,
                package=package,
                version=version,
                bin=entry.get("bin"),
                args=tuple(entry.get("args", ())),
                env=dict(entry.get("env", {})),
                python=entry.get("python"),
                files=dict(entry.get("files", {})),
                pins=tuple(entry.get("pins", ())),
                subset=bool(entry.get("subset", False)),
                note=entry.get("note", ""),
            )
        )
    return servers


def cache_dir() -> Path:
    """Installs live here between runs (PORTCULLIS_REALWORLD_CACHE overrides)."""
    env = os.environ.get("PORTCULLIS_REALWORLD_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "portcullis" / "realworld"


def add_selection_args(ap: argparse.ArgumentParser) -> None:
    """The options that choose servers, shared by the recorder and the checker."""
    ap.add_argument("--subset", action="store_true", help="only the servers marked subset = true")
    ap.add_argument("--only", default="", help="comma-separated server ids")
    ap.add_argument(
        "--servers",
        type=Path,
        action="append",
        help=f"a server list to read instead of {SERVERS.name} (repeatable: a hold-out list beside it)",
    )


def selected(args: argparse.Namespace) -> list[Server]:
    """The servers the options choose, in list order; ids unique across lists."""
    servers: list[Server] = []
    seen: set[str] = set()
    for path in args.servers or [SERVERS]:
        for s in load(path):
            if s.id in seen:
                raise CorpusError(f"server {s.id} is listed twice (again in {path})")
            seen.add(s.id)
            servers.append(s)
    if args.subset:
        servers = [s for s in servers if s.subset]
    if args.only:
        wanted = set(args.only.split(","))
        servers = [s for s in servers if s.id in wanted or s.package in wanted]
    return servers
