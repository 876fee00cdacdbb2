//! Starting a stdio program: the environment it is given and nothing else,
//! its own process group, `no_new_privs`, the kernel's resource limits, no
//! file descriptor of the gateway's beyond its three pipes, and, with
//! `[upstream.sandbox]`, bubblewrap as its launcher.

use std::ffi::OsString;
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::config::{ProcessLimits, Sandbox, StdioSettings, SYSTEM_READ_ONLY};

/// Start the program of `settings`, its stdin, stdout and stderr piped.
pub(super) fn spawn(settings: &StdioSettings) -> std::io::Result<Child> {
    let mut cmd = match &settings.sandbox {
        None => {
            let mut cmd = Command::new(&settings.program);
            cmd.args(&settings.args);
            if let Some(cwd) = &settings.cwd {
                cmd.current_dir(cwd);
            }
            cmd
        }
        Some(sandbox) => {
            let mut cmd = Command::new(&sandbox.launcher);
            cmd.args(launcher_args(settings, sandbox));
            cmd
        }
    };
    cmd.env_clear()
        .envs(&settings.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let limits = settings.limits;
    // SAFETY: `confine` makes only async-signal-safe system calls (prctl,
    // setrlimit, close_range) on values copied before the fork, and
    // allocates nothing.
    unsafe {
        cmd.pre_exec(move || confine(&limits));
    }
    cmd.spawn()
}

/// bubblewrap's arguments: new PID, IPC, UTS and cgroup namespaces, a new
/// network namespace (only its own loopback) unless `network = true`, a
/// file system of the system folders read-only plus the configured ones,
/// fresh /dev, /proc and /tmp; killed with the gateway.
fn launcher_args(settings: &StdioSettings, sandbox: &Sandbox) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
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
    args.extend(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"].map(OsString::from));
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
    args.push("--".into());
    args.push(settings.program.clone().into());
    args.extend(settings.args.iter().map(OsString::from));
    args
}

const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// In the child, between fork and exec.
fn confine(limits: &ProcessLimits) -> std::io::Result<()> {
    let check = |rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    // SAFETY: plain system calls on integers; see `spawn`.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        // The program dies with the gateway, even one killed with SIGKILL.
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
        let set = |resource, value: u64| {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            check(libc::setrlimit(resource, &limit))
        };
        set(libc::RLIMIT_DATA, limits.memory_bytes)?;
        set(libc::RLIMIT_NOFILE, limits.open_files)?;
        // No core file: it would hold whatever the program held.
        set(libc::RLIMIT_CORE, 0)?;
        if let Some(cpu) = limits.cpu_seconds {
            set(libc::RLIMIT_CPU, cpu)?;
        }
        // Every descriptor past the three pipes closes at exec, whoever
        // opened it without O_CLOEXEC. Kernels before 5.11 lack the call:
        // the standard library opens its own descriptors with O_CLOEXEC.
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        );
    }
    Ok(())
}

/// Send `signal` to the program's process group (`pgid` is its pid).
pub(super) fn signal_group(pgid: u32, signal: libc::c_int) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid > 1 {
        // SAFETY: a plain system call; a group that is gone returns ESRCH.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}
