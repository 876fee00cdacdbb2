"""Fetches the documents of tests/documents/documents.toml into a cache.

Each package is fetched with its registry's own client: npm packages with
`npm pack`, PyPI projects with `pip download` (a pure-Python wheel: its
METADATA carries the project's description), crates with `cargo fetch` of
this repository's Cargo.lock. From each, its README and up to two docs pages
are kept as text in ~/.cache/portcullis/documents/<registry>/<package>@<version>/
(a `.fetched` or `.failed` marker says what happened; failures are not retried
unless asked). Standard library only.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LIST = HERE / "documents.toml"
FETCH_TIMEOUT = 300
MAX_TEXT_BYTES = 512 * 1024  # a text past this is left out (counted), not cut
DOCS_PAGES = 2
_README = re.compile(r"^readme(\.(md|markdown|mdown|rst|txt|adoc))?$", re.I)
_DOC_PAGE = re.compile(r"^(docs?|documentation)/(.+/)?[^/]+\.(md|markdown|rst|txt)$", re.I)
_NPM = re.compile(r"^(@?[^@\s]+)@(\d[0-9A-Za-z.+-]*)$")
_PYPI = re.compile(r"^([A-Za-z0-9._-]+)==(\d[0-9A-Za-z.+!-]*)$")


class ListError(Exception):
    """documents.toml says something the fetcher cannot use."""


class FetchError(Exception):
    pass


@dataclass(frozen=True)
class Package:
    registry: str  # npm | pypi | crates
    name: str
    version: str

    @property
    def key(self) -> str:
        return f"{self.registry}:{self.name}@{self.version}"

    @property
    def folder_name(self) -> str:
        return f"{self.name.lstrip('@').replace('/', '+')}@{self.version}"


@dataclass(frozen=True)
class Document:
    id: str  # registry:package@version:path
    package: Package
    path: str
    file: Path

    def text(self) -> str:
        return self.file.read_text("utf-8")


def cache_dir() -> Path:
    env = os.environ.get("PORTCULLIS_DOCUMENTS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "portcullis" / "documents"


def parse_spec(registry: str, spec: str) -> Package:
    if registry == "pypi":
        m = _PYPI.match(spec)
    else:
        m = _NPM.match(spec)
    if not m:
        raise ListError(f"{registry} {spec!r} is not pinned to an exact version")
    return Package(registry, m.group(1), m.group(2))


def load(path: Path = LIST, subset: bool = False) -> list[Package]:
    with path.open("rb") as f:
        data = tomllib.load(f)
    unknown = set(data) - {"npm", "pypi", "crates", "subset"}
    if unknown:
        raise ListError(f"{path.name}: unknown keys {sorted(unknown)}")
    packages = [parse_spec(reg, spec) for reg in ("npm", "pypi", "crates") for spec in data.get(reg, [])]
    keys = [p.key for p in packages]
    if len(set(keys)) != len(keys):
        raise ListError(f"{path.name}: a package is listed twice")
    if not subset:
        return packages
    by_spec = {f"{p.name}{'==' if p.registry == 'pypi' else '@'}{p.version}": p for p in packages}
    missing = [s for s in data.get("subset", []) if s not in by_spec]
    if missing:
        raise ListError(f"{path.name}: subset names packages not listed: {missing[:5]}")
    return [by_spec[s] for s in data.get("subset", [])]


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(npm_config_update_notifier="false", npm_config_fund="false", npm_config_audit="false")
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=FETCH_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as e:
        raise FetchError(f"{cmd[0]} timed out after {FETCH_TIMEOUT}s") from e
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise FetchError(f"{Path(cmd[0]).name} exited {p.returncode}: " + " | ".join(tail))
    return p


def _wanted(paths: list[str]) -> list[str]:
    """The README (top level, first by name) and up to DOCS_PAGES docs pages."""
    readmes = sorted(p for p in paths if "/" not in p and _README.match(p))
    pages = sorted(p for p in paths if _DOC_PAGE.match(p))
    return readmes[:1] + pages[:DOCS_PAGES]


def _from_npm(pkg: Package, tmp: Path) -> dict[str, bytes]:
    p = _run(["npm", "pack", "--silent", "--pack-destination", str(tmp), f"{pkg.name}@{pkg.version}"], cwd=tmp)
    tarballs = sorted(tmp.glob("*.tgz"))
    if not tarballs:
        raise FetchError(f"npm pack wrote no tarball ({p.stdout.strip()[:100]})")
    out: dict[str, bytes] = {}
    with tarfile.open(tarballs[0]) as tar:
        members = {}
        for m in tar.getmembers():
            if m.isfile():
                parts = PurePosixPath(m.name).parts
                members["/".join(parts[1:])] = m  # the tarball's top folder is package/
        for name in _wanted(list(members)):
            f = tar.extractfile(members[name])
            if f is not None:
                out[name] = f.read()
    return out


def _from_pypi(pkg: Package, tmp: Path) -> dict[str, bytes]:
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
          "--only-binary=:all:", "--platform", "any", "--python-version", "3.11", "-d", str(tmp),
          f"{pkg.name}=={pkg.version}"])
    wheels = sorted(tmp.glob("*.whl"))
    if not wheels:
        raise FetchError("pip download brought no wheel")
    with zipfile.ZipFile(wheels[0]) as z:
        meta = next((n for n in z.namelist() if n.endswith(".dist-info/METADATA")), None)
        if meta is None:
            raise FetchError("the wheel has no METADATA")
        msg = email.parser.BytesParser().parsebytes(z.read(meta))
    body = msg.get_payload(decode=True) or (msg.get("Description") or "").encode()
    kind = (msg.get("Description-Content-Type") or "").split(";")[0].strip()
    ext = {"text/markdown": "md", "text/x-rst": "rst"}.get(kind, "txt")
    return {f"README.{ext}": body} if body.strip() else {}


def _cargo_src_roots() -> list[Path]:
    home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    return sorted((home / "registry" / "src").glob("*"))


def _crate_dir(pkg: Package) -> Path | None:
    for root in _cargo_src_roots():
        d = root / f"{pkg.name}-{pkg.version}"
        if d.is_dir():
            return d
    return None


def _from_crates(pkg: Package, _tmp: Path) -> dict[str, bytes]:
    d = _crate_dir(pkg)
    if d is None:
        raise FetchError("not in the cargo registry after cargo fetch (no longer in Cargo.lock?)")
    readme_name = None
    try:
        manifest = tomllib.loads((d / "Cargo.toml").read_text("utf-8"))
        readme_name = (manifest.get("package") or {}).get("readme")
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        pass
    paths = [str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()]
    wanted = _wanted(paths)
    if isinstance(readme_name, str) and (d / readme_name).is_file() and readme_name not in wanted:
        wanted = [readme_name] + [w for w in wanted if not _README.match(w)]
    return {name: (d / name).read_bytes() for name in wanted}


FETCHERS = {"npm": _from_npm, "pypi": _from_pypi, "crates": _from_crates}


def package_dir(pkg: Package) -> Path:
    return cache_dir() / pkg.registry / pkg.folder_name


def fetch_one(pkg: Package, retry_failed: bool, cached_only: bool = False) -> dict:
    folder = package_dir(pkg)
    done, failed = folder / ".fetched", folder / ".failed"
    if done.is_file() or (failed.is_file() and not retry_failed):
        return json.loads((done if done.is_file() else failed).read_text())
    if cached_only:
        return {"package": pkg.key, "error": "not in the cache (--cached-only)"}
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "texts").mkdir(parents=True)
    status: dict = {"package": pkg.key}
    with tempfile.TemporaryDirectory(prefix="portcullis-documents-") as tmp:
        try:
            files = FETCHERS[pkg.registry](pkg, Path(tmp))
        except (FetchError, OSError, tarfile.TarError, zipfile.BadZipFile) as e:
            status["error"] = str(e)[:300]
            failed.write_text(json.dumps(status) + "\n")
            return status
    kept, skipped = [], []
    for i, (name, data) in enumerate(sorted(files.items())):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append(f"{name}: not UTF-8")
            continue
        if len(data) > MAX_TEXT_BYTES:
            skipped.append(f"{name}: {len(data)} bytes")
            continue
        if not text.strip():
            skipped.append(f"{name}: empty")
            continue
        (folder / "texts" / f"{i}.txt").write_text(text, "utf-8")
        kept.append({"path": name, "file": f"{i}.txt"})
    status.update(texts=kept, skipped=skipped)
    done.write_text(json.dumps(status) + "\n")
    return status


def fetch(packages: list[Package], jobs: int, retry_failed: bool = False, log=None,
          cached_only: bool = False) -> list[Document]:
    """Fetch (or reuse) every package; the documents they hold, in list order."""
    if not cached_only and any(p.registry == "crates" and _crate_dir(p) is None for p in packages):
        try:
            _run(["cargo", "fetch", "--locked", "--manifest-path", str(ROOT / "Cargo.toml")])
        except FetchError as e:
            print(f"documents: cargo fetch: {e}", file=sys.stderr)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        statuses = list(pool.map(lambda p: fetch_one(p, retry_failed, cached_only), packages))
    docs: list[Document] = []
    for pkg, st in zip(packages, statuses):
        if "error" in st and log is not None:
            log(f"not fetched: {pkg.key}: {st['error']}")
        for t in st.get("texts", []):
            docs.append(Document(f"{pkg.key}:{t['path']}", pkg, t["path"], package_dir(pkg) / "texts" / t["file"]))
    return docs
