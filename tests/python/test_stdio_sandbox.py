"""The stdio sandbox holds whoever runs the gateway (issue 34).

One gateway per way of running it, each with the same `[upstream.sandbox]` programs
(`hostile_stdio.py` with the attacks of `hostile_escape.py`):

  root         the gateway runs as root (a container's or systemd's default); its own
               cgroup can have children, so each program gets a cgroup
  user_cgroup  the gateway runs as an ordinary user whose cgroup was delegated to it
               (what systemd's `Delegate=yes` does)
  user         the gateway runs as an ordinary user and can make no cgroup

and in each, a program tries what issue 34 found: capabilities, `open_by_handle_at` on
the gateway's `[state]` keys file (not mounted in its sandbox), remounting its
`read_only` folder read-write, `/etc/shadow`, a root-only file in a folder it may read,
a new user namespace, a fork count, shared memory, filling its `/tmp` and `/dev/shm`,
and children left running after SIGKILL of the gateway. Where the configured sandbox
cannot be set up the program must not start (never unconfined), with a clear error.

The test runs as root (it makes the user `portcullis-sbx` and delegates a cgroup);
bubblewrap from /usr/bin/bwrap.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

import hostile_escape
from conftest import _binary, _stop, bound_addresses, wait_ready
from test_stdio_hostile import PYTHON, PROGRAM, HERE, alive, call, pids_with, refused, wait_until

USER = "portcullis-sbx"
MIB = 1 << 20
MAX_TASKS = 32
MAX_MEMORY = 256 * MIB
MAX_TMP = 16 * MIB


# ------------------------------------------------------------------ who runs the gateway

def ensure_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.fail("these tests run as root (they start the gateway as root and as an ordinary user)",
                    pytrace=False)
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                       check=True, capture_output=True)
        return pwd.getpwnam(USER)


def cgroup_mounts() -> list[tuple[bool, str, Path, list[str]]]:
    """(v2, root, mount point, options) of each cgroup file system mounted."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if rest and rest[0] in ("cgroup", "cgroup2"):
            out.append((rest[0] == "cgroup2", fields[3], Path(fields[4]), rest[2].split(",")))
    return out


def own_cgroup_dir(controller: str) -> tuple[Path, bool] | None:
    """The folder of this process's cgroup that holds `controller`, and whether it is v2."""
    own = Path("/proc/self/cgroup").read_text().splitlines()
    mounts = cgroup_mounts()
    for v2, root, point, options in mounts:
        if not v2 and controller in options:
            path = next(l.split(":", 2)[2] for l in own if controller in l.split(":", 2)[1].split(","))
            return point / path[len(root.rstrip("/")):].lstrip("/"), False
    for v2, root, point, _ in mounts:
        if v2:
            path = next((l[3:] for l in own if l.startswith("0::")), None)
            if path is None:
                return None
            base = point / path[len(root.rstrip("/")):].lstrip("/")
            if controller in (base / "cgroup.controllers").read_text().split():
                return base, True
    return None


@dataclass
class Delegated:
    """Cgroups made for an ordinary user's gateway: it is started in them."""
    dirs: list[Path]

    def join(self) -> None:
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        for d in self.dirs:
            for child in sorted(d.glob("*/"), reverse=True):
                if child.is_dir():
                    try:
                        child.rmdir()
                    except OSError:
                        pass
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def delegate(user: pwd.struct_passwd) -> Delegated | None:
    """A cgroup of each of memory and pids for `user`, as systemd's Delegate=yes makes
    one (the folder and its cgroup.procs, subtree_control and threads files are the
    user's); None when this machine cannot make one."""
    dirs: list[Path] = []
    for controller in ("memory", "pids"):
        found = own_cgroup_dir(controller)
        if found is None:
            return None
        base, v2 = found
        if v2 and controller not in (base / "cgroup.subtree_control").read_text().split():
            try:
                (base / "cgroup.subtree_control").write_text(f"+{controller}")
            except OSError:
                return None
        name = f"portcullis-test-{uuid.uuid4().hex[:8]}"
        d = next((x for x in dirs if x.parent == base), None) or base / name
        if d not in dirs:
            try:
                d.mkdir()
            except OSError:
                return None
            dirs.append(d)
            for f in [d, *(d / n for n in ("cgroup.procs", "tasks", "cgroup.subtree_control", "cgroup.threads"))]:
                if f.exists():
                    os.chown(f, user.pw_uid, user.pw_gid)
        if v2:
            try:
                (d / "cgroup.subtree_control").write_text(f"+{controller}")
            except OSError:
                pass
    return Delegated(dirs)


def root_has_cgroups() -> bool:
    """Whether a gateway running as root here can give its programs a cgroup."""
    for controller in ("memory", "pids"):
        found = own_cgroup_dir(controller)
        if found is None:
            return False
        probe = found[0] / f"portcullis-probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError:
            return False
    return True


@dataclass
class Mode:
    name: str
    user: pwd.struct_passwd | None  # None: root
    cgroups: Delegated | None
    cgroup_kept: bool  # the programs' memory and tasks are kept by a cgroup

    @property
    def uid(self) -> int:
        return self.user.pw_uid if self.user else 0

    def preexec(self):
        """In the gateway's child before exec: its cgroup, then its user."""
        def run():
            if self.cgroups:
                self.cgroups.join()
            if self.user:
                os.setgroups([])
                os.setgid(self.user.pw_gid)
                os.setuid(self.user.pw_uid)
        return run


# ------------------------------------------------------------------ the gateway

@dataclass
class Box:
    base: str
    admin: str
    log_path: Path
    proc: subprocess.Popen
    tmp: Path
    mode: Mode

    def url(self, upstream: str) -> str:
        return f"{self.base}/{upstream}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def record(self, upstream: str) -> list[dict]:
        path = self.tmp / "rw" / f"{upstream}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def folders() -> Path:
    """A folder every user may enter: ro/ (the sandboxes' read_only, with a root-only
    file), rw/ (their writable), secret/ (the state keys: in no sandbox)."""
    tmp = Path(tempfile.mkdtemp(prefix="portcullis-sandbox-"))
    tmp.chmod(0o755)
    (tmp / "ro").mkdir(mode=0o755)
    (tmp / "ro" / "visible").write_text("anyone may read this\n")
    root_only = tmp / "ro" / "root-only"
    root_only.write_text("only root reads this\n")
    root_only.chmod(0o600)
    (tmp / "rw").mkdir()
    (tmp / "rw").chmod(0o777)
    (tmp / "secret").mkdir(mode=0o700)
    return tmp


def upstream(uid: str, sandbox: dict, **keys) -> str:
    record = f"{{ HOSTILE_RECORD = \"{{rw}}/{uid}.jsonl\", HOSTILE_CASE = \"{uid}\" }}"
    text = (f'[[upstream]]\nid = "{uid}"\nname = "Boxed {uid}"\n'
            f'command = ["{PYTHON}", "{PROGRAM}"]\nenv = {record}\n'
            'response_timeout = "20s"\nconnect_timeout = "10s"\nstop_timeout = "1s"\n'
            # The sandbox is what is tried here: under `untrusted` the gateway's own
            # argument checks would refuse the probes (/etc/shadow, a loopback URL)
            # before they reach the program; `trusted` records them and lets them by.
            'policy = "trusted"\n'
            + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items()))
    if sandbox is not None:
        text += "[upstream.sandbox]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in sandbox.items())
    return text + f'[[route]]\npath = "/{uid}"\nupstream = "{uid}"\n'


KEYS_ENV = "PORTCULLIS_SANDBOX_TEST_KEYS"


def config(tmp: Path, ups: list[str], keys_env: bool = False) -> str:
    keys = f'keys_env = "{KEYS_ENV}"' if keys_env else f'keys_file = "{tmp / "secret" / "keys"}"'
    text = ('[[listener]]\naddress = "127.0.0.1:0"\n[admin]\naddress = "127.0.0.1:0"\n'
            f'[audit]\nsink = "off"\n[state]\n{keys}\n'
            + "".join(ups))
    return text.replace("{rw}", str(tmp / "rw"))


def start(mode: Mode, tmp: Path, ups: list[str], keys_env: bool = False) -> Box:
    owner = mode.user
    keys = subprocess.run([str(_binary()), "keygen"], check=True, capture_output=True, text=True).stdout
    (tmp / "secret" / "keys").write_text(keys)
    (tmp / "secret" / "keys").chmod(0o600)
    if owner:
        for p in (tmp / "secret", tmp / "secret" / "keys"):
            os.chown(p, owner.pw_uid, owner.pw_gid)
    cfg = tmp / "gateway.toml"
    cfg.write_text(config(tmp, ups, keys_env))
    log_path = tmp / "gateway.log"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp), "RUST_LOG": "info"}
    if keys_env:
        env[KEYS_ENV] = keys.strip()
    with log_path.open("wb") as log:
        proc = subprocess.Popen([str(_binary()), "run", "--config", str(cfg)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, cwd=tmp, env=env,
                                preexec_fn=mode.preexec())
    bound = bound_addresses(log_path, proc, ("listener", "admin"))
    admin = f"http://{bound['admin']}"
    wait_ready(f"{admin}/readyz", proc, log_path)
    return Box(f"http://{bound['listener']}", admin, log_path, proc, tmp, mode)


MODES = ["root", "user_cgroup", "user"]


@pytest.fixture(scope="module", params=MODES)
def mode(request):
    if not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.fail("bubblewrap is not installed (/usr/bin/bwrap)", pytrace=False)
    account = ensure_user()
    delegated = None
    if request.param == "root":
        m = Mode("root", None, None, root_has_cgroups())
    elif request.param == "user_cgroup":
        delegated = delegate(account)
        if delegated is None:
            pytest.skip("no cgroup can be delegated on this machine")
        m = Mode("user_cgroup", account, delegated, True)
    else:
        m = Mode("user", account, None, False)
    yield m
    if delegated:
        delegated.remove()


def sandbox(tmp: Path, **more) -> dict:
    return {"read_only": [str(HERE), str(tmp / "ro")], "writable": [str(tmp / "rw")], **more}


@pytest.fixture(scope="module")
def box(mode: Mode):
    tmp = folders()
    ups = [
        upstream("escape", sandbox(tmp)),
        upstream("tasks", sandbox(tmp), max_tasks=MAX_TASKS),
        upstream("memory", sandbox(tmp), max_memory_bytes=MAX_MEMORY),
        upstream("scratch", sandbox(tmp, max_tmp_bytes=MAX_TMP)),
        upstream("required", sandbox(tmp), cgroup="required"),
        upstream("vanish", sandbox(tmp, read_only=[str(HERE), str(tmp / "ro" / "gone")])),
    ]
    (tmp / "ro" / "gone").mkdir()
    gateway = start(mode, tmp, ups)
    try:
        yield gateway
    finally:
        _stop(gateway.proc)
        shutil.rmtree(tmp, ignore_errors=True)


def tool(box: Box, upstream: str, tool_name: str, **arguments) -> dict:
    reply = call(box, upstream, tool_name, arguments, timeout=60)
    assert reply.status == 200, f"{box.mode.name}/{upstream}/{tool_name}: {reply.raw[:1500]}\n{box.log()[-3000:]}"
    return reply.value


# ------------------------------------------------------------------ processes

def sandboxed_program(upstream: str) -> int:
    """The host pid of the sandboxed hostile program of `upstream`."""
    found = []
    for pid in pids_with(str(PROGRAM)):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if f"HOSTILE_CASE={upstream}".encode() in env and "python" in exe:
            found.append(pid)
    assert len(found) == 1, f"{upstream}: {found}"
    return found[0]


def host_status(pid: int) -> dict[str, list[str]]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.split()
    return out


# ==================================================================== capabilities, ids

def test_the_program_holds_no_capability_and_no_host_root(box):
    inside = tool(box, "escape", "identity")
    assert inside["status"]["CapEff"] == ["0000000000000000"], inside
    assert inside["status"]["CapPrm"] == ["0000000000000000"], inside
    assert inside["status"]["CapBnd"] == ["0000000000000000"], inside
    assert inside["status"]["NoNewPrivs"] == ["1"], inside
    host = host_status(sandboxed_program("escape"))
    expected = 65534 if box.mode.user is None else box.mode.uid
    assert host["Uid"] == [str(expected)] * 4, f"{box.mode.name}: the program runs as host uid {host['Uid']}"
    assert host["CapEff"] == ["0000000000000000"], host["CapEff"]
    assert host["Gid"][0] != "0" and host.get("Groups", []) == [], host


def test_no_new_user_namespace_inside(box):
    assert tool(box, "escape", "unshare")["unshare"] in ("ENOSPC", "EPERM"), box.mode.name


# ==================================================================== files outside its mounts

def test_the_keys_file_cannot_be_opened_by_handle(box):
    keys = box.tmp / "secret" / "keys"
    handle, kind = hostile_escape.handle_of(str(keys))
    got = tool(box, "escape", "by_handle", mount=str(box.tmp / "ro"), handle=handle, type=kind)
    assert got == {"opened": False, "errno": "EPERM"}, f"{box.mode.name}: {got}"


def test_the_read_only_folder_cannot_be_remounted_writable(box):
    target = box.tmp / "ro"
    got = tool(box, "escape", "remount", path=str(target), name="escaped")
    assert "ok" not in got["remount"] and got["write"] == "EROFS", f"{box.mode.name}: {got}"
    assert not (target / "escaped").exists(), "the sandbox wrote onto the host"


@pytest.mark.parametrize("path", ["/etc/shadow", "/etc/gshadow", "/etc/sudoers"])
def test_secret_system_files_are_not_there(box, path):
    assert tool(box, "escape", "read_file", path=path) == {"errno": "ENOENT"}, box.mode.name


def test_what_programs_need_of_etc_is_there(box):
    assert "root:" in tool(box, "escape", "read_file", path="/etc/passwd")["read"]
    assert "read" in tool(box, "escape", "read_file", path="/etc/nsswitch.conf")
    assert tool(box, "escape", "read_file", path="/etc/ssl/certs/ca-certificates.crt").get("read", "").startswith("-----")


def test_host_file_permissions_hold_in_its_folders(box):
    assert tool(box, "escape", "read_file", path=str(box.tmp / "ro" / "root-only")) == {"errno": "EACCES"}
    assert "anyone" in tool(box, "escape", "read_file", path=str(box.tmp / "ro" / "visible"))["read"]


# ==================================================================== limits

def test_the_fork_count_is_bounded(box):
    got = tool(box, "tasks", "fork_count", count=200)
    assert got["error"] == "EAGAIN" and got["started"] < MAX_TASKS, f"{box.mode.name}: {got}"


@pytest.mark.parametrize("where", ["/tmp", "/dev/shm"])
def test_its_scratch_space_is_bounded(box, where):
    got = tool(box, "scratch", "fill", path=where, mb=64)
    assert got.get("errno") == "ENOSPC" and got["written"] <= MAX_TMP, f"{box.mode.name}: {got}"


def test_shared_memory_is_bounded_by_its_cgroup(box):
    if not box.mode.cgroup_kept:
        pytest.skip("without a cgroup no limit bounds shared mappings: the next test")
    reply = call(box, "memory", "shm", {"mb": 512}, timeout=60)
    if reply.status == 200:
        got = reply.value
        assert got["written"] < 512 * MIB, f"{box.mode.name}: 512 MiB of shared memory: {got}"
    else:
        # The cgroup's out-of-memory kill ended the program mid-call.
        refused(reply, "upstream_connection_closed", 502)


def test_a_required_cgroup_starts_the_program_only_with_one(box):
    reply = call(box, "required", "pid", {}, rid=9, timeout=60)
    if box.mode.cgroup_kept:
        assert reply.status == 200 and reply.value["pid"] == 2, reply.raw
        return
    refused(reply, "upstream_unreachable", 502, rid=9)
    assert "cgroup" in reply.message["error"]["message"], reply.raw
    assert box.record("required") == [], "the program was started without its cgroup"
    assert [line for line in box.log().splitlines()
            if "stdio program did not start" in line and "cgroup" in line and "required" in line], box.log()[-3000:]


# ==================================================================== a sandbox that cannot be made

def test_a_sandbox_that_cannot_be_set_up_starts_nothing(box):
    (box.tmp / "ro" / "gone").rmdir()
    reply = call(box, "vanish", "pid", {}, rid=3, timeout=60)
    refused(reply, "upstream_unreachable", 502, rid=3)
    assert box.record("vanish") == [], "the program ran"
    said = lambda *words: [l for l in box.log().splitlines() if all(w in l for w in words)]
    assert wait_until(lambda: said("stdio program did not start", "upstream=vanish"), 5), box.log()[-3000:]
    assert wait_until(lambda: said("upstream=vanish", "gone"), 5), "the log does not say what bubblewrap could not do"


def test_a_named_user_needs_a_root_gateway(mode):
    if mode.user is None:
        pytest.skip("root may switch users")
    tmp = folders()
    other = pwd.getpwnam("nobody").pw_uid
    gateway = start(mode, tmp, [upstream("named", sandbox(tmp, user=str(other)))])
    try:
        reply = call(gateway, "named", "pid", {}, rid=4, timeout=60)
        refused(reply, "upstream_unreachable", 502, rid=4)
        assert "only a gateway running as root" in reply.message["error"]["message"], reply.raw
        assert gateway.record("named") == []
    finally:
        _stop(gateway.proc)
        shutil.rmtree(tmp, ignore_errors=True)


# ==================================================================== SIGKILL of the gateway

@pytest.mark.parametrize("boxed", [True, False], ids=["sandboxed", "unsandboxed"])
def test_no_child_outlives_a_sigkill_of_the_gateway(mode, boxed):
    tmp = folders()
    gateway = start(mode, tmp, [upstream("kids", sandbox(tmp) if boxed else None)])
    marker = f"hostile-child-{uuid.uuid4().hex}"
    try:
        for setsid in (False, True):
            reply = call(gateway, "kids", "fork", {"marker": f"{marker}-{setsid}", "setsid": setsid,
                                                    "pidfile": str(tmp / "rw" / f"child-{setsid}.pid")})
            assert reply.status == 200, reply.raw
        assert wait_until(lambda: len(pids_with(marker)) == 2, 5), pids_with(marker)
        children = pids_with(marker)
        gateway.proc.send_signal(signal.SIGKILL)
        gateway.proc.wait(5)
        assert wait_until(lambda: not any(alive(p) for p in children), 5), \
            f"{mode.name}: children {[p for p in children if alive(p)]} outlived the gateway's SIGKILL"
    finally:
        _stop(gateway.proc)
        shutil.rmtree(tmp, ignore_errors=True)


# ==================================================================== unsandboxed programs

@pytest.fixture(scope="module")
def plain(mode: Mode):
    """A gateway (its state keys in its environment) and one unsandboxed program."""
    tmp = folders()
    gateway = start(mode, tmp, [upstream("plain", None)], keys_env=True)
    try:
        yield gateway
    finally:
        _stop(gateway.proc)
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_gateways_memory_and_environment_are_closed_to_its_programs(plain):
    if plain.mode.user is None:
        pytest.skip("a program the root gateway starts unsandboxed is root: the sandbox is what separates them")
    pid = plain.proc.pid
    for path in (f"/proc/{pid}/environ", f"/proc/{pid}/mem", f"/proc/{pid}/maps"):
        got = tool(plain, "plain", "read_file", path=path)
        assert got == {"errno": "EACCES"}, f"{plain.mode.name}: the program read {path}: {got}"


def test_the_state_keys_are_gone_from_the_gateways_environment(plain):
    environ = Path(f"/proc/{plain.proc.pid}/environ").read_bytes()
    keys = (plain.tmp / "secret" / "keys").read_text().strip()
    assert keys.encode() not in environ, "the state keys are still in the gateway's environment"
    # The gateway itself still has them: a sealed state opens.
    assert tool(plain, "plain", "pid")["pid"] > 0


def test_a_program_cannot_accept_a_listing_on_the_admin_listener(plain):
    body = json.dumps({"upstream": "plain", "digests": {}})
    for path in ("/listings/accept", "/listings?upstream=plain"):
        headers = {"content-type": "application/json", "x-portcullis-admin": "listings"}
        got = tool(plain, "plain", "http_post", url=f"{plain.admin}{path}", body=body, headers=headers)
        assert got["status"] in (401, 405), f"{plain.mode.name}: {path}: {got}"
    got = tool(plain, "plain", "http_post", url=f"{plain.admin}/listings/accept", body=body,
               headers={"content-type": "application/json", "x-portcullis-admin": "listings"})
    assert got == {"status": 401}, got
