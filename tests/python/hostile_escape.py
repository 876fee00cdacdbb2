"""What a program that wants out of its sandbox tries (issue 34), for hostile_stdio.py.

Each function takes the tool's arguments and returns what happened, as plain data:
the errno name of a refusal, or what it got. Standard library and ctypes only.

  identity     its ids, capabilities, no_new_privs and user namespace map
  by_handle    open_by_handle_at(mount of `arguments.mount`, the handle given) and read
  remount      remount `arguments.path` read-write (every flag combination a locked
               mount may keep), then write a file in it
  read_file    read `arguments.path`
  fork_count   start `arguments.count` sleeping children; how many started
  shm          a shared anonymous mapping of `arguments.mb` MiB, every page written
  fill         write `arguments.mb` MiB into `arguments.path`; how much was written
  unshare      a new user namespace (with its capabilities), then a mount in it
  http_post    POST `arguments.body` to `arguments.url` with `arguments.headers`: the status
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import time

LIBC = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096


def errname(code: int) -> str:
    return errno.errorcode.get(code, str(code))


def identity(_args: dict) -> dict:
    status = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Uid", "Gid", "CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs"):
                status[key] = value.split()
    with open("/proc/self/uid_map") as f:
        uid_map = f.read().split()
    return {"uid": os.getuid(), "status": status, "uid_map": uid_map}


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_char * 128)]


def by_handle(args: dict) -> dict:
    raw = bytes.fromhex(args["handle"])
    handle = FileHandle(len(raw), int(args["type"]), raw)
    mount = os.open(args["mount"], os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = LIBC.open_by_handle_at(mount, ctypes.byref(handle), os.O_RDONLY)
        if fd < 0:
            return {"opened": False, "errno": errname(ctypes.get_errno())}
        with os.fdopen(fd, "rb") as f:
            return {"opened": True, "read": f.read(256).decode(errors="replace")}
    finally:
        os.close(mount)


def remount(args: dict) -> dict:
    path = args["path"].encode()
    tried = []
    for extra in (0, MS_NOSUID, MS_NOSUID | MS_NODEV, MS_NOSUID | MS_NODEV | MS_NOEXEC):
        rc = LIBC.mount(None, path, None, MS_REMOUNT | MS_BIND | extra, None)
        tried.append(errname(ctypes.get_errno()) if rc != 0 else "ok")
        if rc == 0:
            break
    written = None
    try:
        with open(os.path.join(args["path"], args.get("name", "written-by-the-sandbox")), "w") as f:
            f.write("escaped")
        written = "ok"
    except OSError as e:
        written = errname(e.errno or 0)
    return {"remount": tried, "write": written}


def read_file(args: dict) -> dict:
    try:
        with open(args["path"], "rb") as f:
            return {"read": f.read(64).decode(errors="replace")}
    except OSError as e:
        return {"errno": errname(e.errno or 0)}


def fork_count(args: dict) -> dict:
    children, failure = [], None
    for _ in range(int(args["count"])):
        try:
            pid = os.fork()
        except OSError as e:
            failure = errname(e.errno or 0)
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return {"started": len(children), "error": failure}


def shm(args: dict) -> dict:
    size = int(args["mb"]) << 20
    area = mmap.mmap(-1, size, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    page = b"x" * mmap.PAGESIZE
    try:
        for at in range(0, size, mmap.PAGESIZE):
            area[at:at + mmap.PAGESIZE] = page
    except OSError as e:
        return {"written": at, "errno": errname(e.errno or 0)}
    finally:
        area.close()
    return {"written": size}


def fill(args: dict) -> dict:
    chunk = b"\0" * (1 << 20)
    written = 0
    path = os.path.join(args["path"], "fill")
    try:
        with open(path, "wb") as f:
            for _ in range(int(args["mb"])):
                f.write(chunk)
                f.flush()
                written += len(chunk)
            os.fsync(f.fileno())
        return {"written": written}
    except OSError as e:
        return {"written": written, "errno": errname(e.errno or 0)}
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def unshare(_args: dict) -> dict:
    CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
    if LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return {"unshare": errname(ctypes.get_errno())}
    return {"unshare": "ok"}


def http_post(args: dict) -> dict:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(args["url"], data=args["body"].encode(), headers=args.get("headers", {}))
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return {"status": r.status}
    except urllib.error.HTTPError as e:
        return {"status": e.code}
    except OSError as e:
        return {"errno": errname(e.errno or 0)}


TOOLS = {"identity": identity, "http_post": http_post, "by_handle": by_handle, "remount": remount, "read_file": read_file,
         "fork_count": fork_count, "shm": shm, "fill": fill, "unshare": unshare}


def handle_of(path: str) -> tuple[str, int]:
    """name_to_handle_at(path): the handle's bytes (hex) and type, as the kernel gives them."""
    handle = FileHandle(128, 0, b"")
    mount_id = ctypes.c_int()
    if LIBC.name_to_handle_at(-100, path.encode(), ctypes.byref(handle), ctypes.byref(mount_id), 0) != 0:
        raise OSError(ctypes.get_errno(), f"name_to_handle_at({path})")
    # (A c_char array read as an attribute stops at its first NUL: read the bytes.)
    raw = ctypes.string_at(ctypes.addressof(handle) + FileHandle.f_handle.offset, handle.handle_bytes)
    return raw.hex(), handle.handle_type

