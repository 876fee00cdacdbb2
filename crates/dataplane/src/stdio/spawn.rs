//! Starting a stdio program: the environment it is given and nothing else,
//! its own process group, `no_new_privs`, the kernel's resource limits, its
//! cgroup, no file descriptor of the gateway's beyond its three pipes, an
//! unprivileged user when the gateway is root and it is sandboxed, and the
//! chain it runs in: the supervisor (`supervise.rs`), bubblewrap with
//! `[upstream.sandbox]` (`sandbox.rs`), confine, then the program.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use tokio::net::unix::pipe;
use tokio::process::{Child, Command};

use super::cgroup::{self, ProgramCgroup};
use super::sandbox::{confine_args, launcher_args};
use super::supervise::{BINARY_FD, CLOSE_RANGE_CLOEXEC, REPORT_FD};
use crate::config::{ProcessLimits, StdioSettings};

/// The binary run as the supervisor and as confine: the gateway's own,
/// unless an embedder whose binary is not `portcullis` (a test harness)
/// names one.
static SUPERVISOR: OnceLock<PathBuf> = OnceLock::new();

/// Name the `portcullis` binary whose `stdio-supervise` and
/// `stdio-confine` start stdio programs, for a process that is not it.
pub fn use_supervisor(binary: PathBuf) {
    let _ = SUPERVISOR.set(binary);
}

fn supervisor() -> &'static Path {
    SUPERVISOR
        .get()
        .map_or(Path::new("/proc/self/exe"), PathBuf::as_path)
}

/// The gateway's memory, its `/proc/<pid>/environ` and the rest of its
/// `/proc` files closed to the programs it starts (which may run as its
/// own user): the process is not dumpable, so neither ptrace nor
/// `/proc/<pid>/mem` reach it, and it leaves no core file.
pub fn keep_gateway_private() {
    // SAFETY: a plain system call on integers.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        tracing::warn!(
            "the gateway could not make itself undumpable: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// A program started: the supervisor's process, where its start report
/// arrives, and its cgroup.
pub(crate) struct Spawned {
    pub child: Child,
    pub report: pipe::Receiver,
    pub cgroup: Option<ProgramCgroup>,
}

/// Start the program of `settings` (in `cgroup` when there is one), its
/// stdin, stdout and stderr piped.
pub(crate) fn spawn(
    settings: &StdioSettings,
    cgroup: Option<ProgramCgroup>,
) -> std::io::Result<Spawned> {
    let run_as = run_as(settings)?;
    let tasks_kept = cgroup.as_ref().is_some_and(|c| c.tasks);
    let (report, report_w) = report_pipe()?;
    let binary = match &settings.sandbox {
        Some(_) => Some(open_binary()?),
        None => None,
    };
    let mut cmd = Command::new(supervisor());
    cmd.args(["stdio-supervise", "--watch"])
        .arg(std::process::id().to_string())
        .arg("--grace-ms")
        .arg(settings.stop_timeout.as_millis().to_string())
        .arg("--");
    match &settings.sandbox {
        None => {
            cmd.arg("/proc/self/exe");
            cmd.args(confine_args(None, true, settings));
            if let Some(cwd) = &settings.cwd {
                cmd.current_dir(cwd);
            }
        }
        Some(sandbox) => {
            // Without a cgroup's pids.max, the task limit is set inside.
            let max_tasks = (!tasks_kept).then_some(settings.limits.tasks);
            cmd.arg(&sandbox.launcher);
            cmd.args(launcher_args(settings, sandbox, max_tasks));
        }
    }
    cmd.env_clear()
        .envs(&settings.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let child_setup = ChildSetup {
        limits: settings.limits,
        report: report_w.as_raw_fd(),
        binary: binary.as_ref().map(AsRawFd::as_raw_fd),
        cgroups: cgroup
            .as_ref()
            .map(ProgramCgroup::join_fds)
            .unwrap_or_default(),
        run_as,
    };
    // SAFETY: `ChildSetup::apply` makes only async-signal-safe system calls
    // on values copied before the fork, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || child_setup.apply());
    }
    let child = cmd.spawn()?;
    // The child has its copies: the report ends when the program's side does.
    drop(report_w);
    drop(binary);
    Ok(Spawned {
        child,
        report,
        cgroup,
    })
}

/// The host user a sandboxed program runs as: the sandbox's, when the
/// gateway is root; none to switch to otherwise (it runs as the gateway's
/// own user, in its own user namespace), and a named user other than that
/// cannot be honoured.
fn run_as(settings: &StdioSettings) -> std::io::Result<Option<(u32, u32)>> {
    let Some(sandbox) = &settings.sandbox else {
        return Ok(None);
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if me == 0 {
        return Ok(Some((sandbox.user.uid, sandbox.user.gid)));
    }
    if sandbox.user.named && sandbox.user.uid != me {
        return Err(std::io::Error::other(format!(
            "sandbox.user is uid {}, and only a gateway running as root can start a program as another user (it runs as uid {me})",
            sandbox.user.uid
        )));
    }
    Ok(None)
}

/// The start report's pipe: the gateway's end (non-blocking, for the
/// runtime) and the child's (moved to descriptor 3 in the child).
fn report_pipe() -> std::io::Result<(pipe::Receiver, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both were just opened and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let receiver = pipe::Receiver::from_owned_fd(read)?;
    Ok((receiver, above_fixed(write)?))
}

/// The supervisor's binary, open, for a sandbox to show inside.
fn open_binary() -> std::io::Result<OwnedFd> {
    let file = std::fs::File::open(supervisor())?;
    above_fixed(OwnedFd::from(file))
}

/// A copy of `fd` numbered above the child's fixed descriptors (3, 4), so
/// moving one there never overwrites another.
fn above_fixed(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > BINARY_FD {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we then own.
    let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if dup < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// What the child does between fork and exec, from values copied before.
struct ChildSetup {
    limits: ProcessLimits,
    report: RawFd,
    binary: Option<RawFd>,
    cgroups: Vec<RawFd>,
    run_as: Option<(u32, u32)>,
}

impl ChildSetup {
    fn apply(&self) -> std::io::Result<()> {
        let check = |rc: libc::c_int| {
            if rc >= 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        // SAFETY: plain system calls on integers and live structs; see `spawn`.
        unsafe {
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            // Every descriptor past the three pipes closes at exec, whoever
            // opened it without O_CLOEXEC (kernels before 5.11 lack the
            // call: the standard library opens its own with O_CLOEXEC);
            // then the report and the binary at their fixed numbers.
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                CLOSE_RANGE_CLOEXEC,
            );
            // Joined while the gateway's user, before any switch; and before
            // the fixed numbers are taken: a cgroup's `cgroup.procs` opened
            // as descriptor 3 or 4 would otherwise be replaced by the report
            // pipe, the join written into the report (the start then reads
            // as failed) and the program left outside its cgroup.
            cgroup::join(&self.cgroups)?;
            check(libc::dup2(self.report, REPORT_FD))?;
            if let Some(binary) = self.binary {
                check(libc::dup2(binary, BINARY_FD))?;
            }
            let set = |resource, value: u64| {
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                check(libc::setrlimit(resource, &limit))
            };
            set(libc::RLIMIT_DATA, self.limits.memory_bytes)?;
            set(libc::RLIMIT_NOFILE, self.limits.open_files)?;
            // No core file: it would hold whatever the program held.
            set(libc::RLIMIT_CORE, 0)?;
            if let Some(cpu) = self.limits.cpu_seconds {
                set(libc::RLIMIT_CPU, cpu)?;
            }
            if let Some((uid, gid)) = self.run_as {
                check(libc::setgroups(0, std::ptr::null()))?;
                check(libc::setresgid(gid, gid, gid))?;
                check(libc::setresuid(uid, uid, uid))?;
            }
        }
        Ok(())
    }
}

/// A started program's supervisor, held by a pidfd: a signal reaches it,
/// or nobody — never a process that got its number after it was reaped
/// (pid numbers come round again; on a busy machine within minutes, and a
/// stray SIGUSR1 makes another program's supervisor stop its program).
pub(crate) struct Supervisor {
    pid: u32,
    fd: Option<OwnedFd>,
}

impl Supervisor {
    /// `pid` is a child not yet waited for: its number is its own.
    pub(crate) fn hold(pid: u32) -> Supervisor {
        // SAFETY: a plain system call; the descriptor is then owned here.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        let fd = libc::c_int::try_from(fd)
            .ok()
            .filter(|fd| *fd >= 0)
            // SAFETY: just opened, owned by nobody else.
            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        Supervisor { pid, fd }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Send `signal` to the supervisor alone; `false` when it is gone
    /// (reaped). Without pidfds (kernels before 5.3) by its number.
    pub(crate) fn signal(&self, signal: libc::c_int) -> bool {
        match &self.fd {
            // SAFETY: a plain system call on a descriptor we own.
            Some(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    signal,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                ) == 0
            },
            None => {
                signal_one(self.pid, signal);
                true
            }
        }
    }

    /// Send `signal` to the program's process group while the supervisor
    /// is not reaped (until then the group's number is its, and nobody
    /// else's).
    pub(crate) fn signal_group(&self, signal: libc::c_int) {
        if self.signal(0) {
            signal_group(self.pid, signal);
        }
    }
}

/// Send `signal` to the program's process group (`pgid` is the
/// supervisor's pid). Only while a member holds the number: the
/// supervisor unreaped ([`Supervisor::signal_group`]), or, right after it
/// was reaped, what it left behind in the group.
pub(crate) fn signal_group(pgid: u32, signal: libc::c_int) {
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

/// Send `signal` to the supervisor alone, by its number.
fn signal_one(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid > 1 {
        // SAFETY: a plain system call.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}
