//! bubblewrap's arguments for `[upstream.sandbox]`.
//!
//! The program gets a user namespace of its own (it holds no capability
//! anywhere else, so nothing outside its mounts can be opened by handle and
//! no mount of it can be made writable again), keeps no capability in it,
//! and may not make another; its own PID, IPC, UTS and cgroup namespaces,
//! no network but its own loopback unless `network = true`; the system's
//! folders read-only, of `/etc` only the allow-list, its configured
//! folders, fresh `/dev` and `/proc`, and a `/tmp` and `/dev/shm` of a
//! bounded size. When the gateway runs as root, the program runs as an
//! unprivileged user on the host (the spawn sets it), so the host's file
//! permissions hold against it too.

use std::ffi::OsString;
use std::path::Path;

use crate::config::{Sandbox, StdioSettings, ETC_ALLOWED, SYSTEM_READ_ONLY};

use super::supervise::BINARY_FD;

/// Where the gateway's binary is shown inside the sandbox, to confine the
/// program's start.
pub(crate) const CONFINE_AT: &str = "/run/portcullis/stdio-confine";

/// bubblewrap's arguments, then `confine`'s, then the program's.
pub(crate) fn launcher_args(
    settings: &StdioSettings,
    sandbox: &Sandbox,
    max_tasks: Option<u64>,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--unshare-user",
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    .map(OsString::from)
    .to_vec();
    if !sandbox.network {
        args.push("--unshare-net".into());
    }
    for dir in SYSTEM_READ_ONLY {
        args.extend(["--ro-bind-try".into(), dir.into(), dir.into()]);
    }
    args.extend(["--dir", "/etc"].map(OsString::from));
    for name in ETC_ALLOWED {
        let path = Path::new("/etc").join(name);
        args.extend(["--ro-bind-try".into(), path.clone().into(), path.into()]);
    }
    let size = sandbox.tmp_bytes.to_string();
    args.extend(["--dev", "/dev", "--proc", "/proc"].map(OsString::from));
    for dir in ["/tmp", "/dev/shm"] {
        args.extend(["--size", &size, "--tmpfs", dir].map(OsString::from));
    }
    for (flag, dirs) in [
        ("--ro-bind", &sandbox.read_only),
        ("--bind", &sandbox.writable),
    ] {
        for dir in dirs {
            args.extend([flag.into(), dir.into(), dir.into()]);
        }
    }
    if let Some(cwd) = &settings.cwd {
        args.extend(["--chdir".into(), cwd.into()]);
    }
    let binary = format!("/proc/self/fd/{BINARY_FD}");
    args.extend(["--ro-bind", &binary, CONFINE_AT, "--", CONFINE_AT].map(OsString::from));
    args.extend(confine_args(max_tasks, false, settings));
    args
}

/// `stdio-confine`'s arguments and the program's.
pub(crate) fn confine_args(
    max_tasks: Option<u64>,
    report_pid: bool,
    settings: &StdioSettings,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["stdio-confine".into()];
    if let Some(tasks) = max_tasks {
        args.extend(["--max-tasks".into(), tasks.to_string().into()]);
    }
    if report_pid {
        args.push("--report-pid".into());
    }
    args.push("--".into());
    args.push(settings.program.clone().into());
    args.extend(settings.args.iter().map(OsString::from));
    args
}
