//! The two small steps between the gateway and a stdio program, each the
//! gateway's own binary run again (`portcullis stdio-supervise`,
//! `portcullis stdio-confine`; hidden commands):
//!
//! - the supervisor, the gateway's child: a subreaper (whatever the program
//!   starts stays below it, even a child that leaves its session), which
//!   watches the gateway through a pidfd and kills every process below it
//!   when the gateway is gone (even killed with SIGKILL), when the gateway
//!   asks (SIGUSR1, or SIGTERM and then the grace), and when the program
//!   has ended; it ends as the program ended.
//! - confine, the program's last step before its exec (inside the sandbox
//!   when there is one): the task limit where no cgroup keeps it
//!   (`RLIMIT_NPROC` counts the tasks of one user in one user namespace:
//!   inside the sandbox's own, only the program's), then the start report
//!   on descriptor 3 for the gateway, then nothing but 0, 1 and 2 open.
//!
//! Both are plain system calls over a fresh process: no runtime, nothing of
//! the gateway's memory.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

/// Where the gateway reads a program's start from.
pub const REPORT_FD: libc::c_int = 3;
/// The gateway's binary, open, for a sandbox to show confine inside.
pub const BINARY_FD: libc::c_int = 4;
/// close_range(2)'s flag: mark the range close-on-exec instead of closing it
/// (the spawn's child and the supervisor both use it).
pub(super) const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// The supervisor: start `target`, then stay until it and everything it
/// started are gone. Returns the exit code when the program exited; ends
/// the process with the program's signal when it was killed.
pub fn supervise(gateway: u32, grace: Duration, target: &[OsString]) -> i32 {
    // SAFETY: plain system calls on integers.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let Some(argv) = c_strings(target) else {
        eprintln!("portcullis stdio-supervise: no program, or a NUL in its arguments");
        return 127;
    };
    let signals = match Signals::block() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("portcullis stdio-supervise: signalfd: {e}");
            return 127;
        }
    };
    let watch = GatewayWatch::open(gateway);
    if !watch.alive() {
        return 1;
    }
    let child = match start(&argv, &signals) {
        Ok(pid) => pid,
        Err(e) => {
            eprintln!("portcullis stdio-supervise: fork: {e}");
            return 127;
        }
    };
    // The program has its own copies; the gateway must see its stdout end
    // when the program's does.
    detach_stdio();
    let status = Supervision {
        child,
        grace,
        signals,
        watch,
        stopping: None,
        ended: None,
    }
    .run();
    end_as(status)
}

/// argv as C strings (no NUL inside any).
fn c_strings(args: &[OsString]) -> Option<Vec<CString>> {
    if args.is_empty() {
        return None;
    }
    args.iter()
        .map(|a| CString::new(a.as_bytes()).ok())
        .collect()
}

/// fork, and exec `argv` in the child with the signals the supervisor
/// blocked unblocked again.
fn start(argv: &[CString], signals: &Signals) -> std::io::Result<libc::pid_t> {
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: the child only makes async-signal-safe calls on memory
    // prepared before the fork, then execs or exits.
    unsafe {
        match libc::fork() {
            -1 => Err(std::io::Error::last_os_error()),
            0 => {
                libc::sigprocmask(libc::SIG_SETMASK, &signals.before, std::ptr::null_mut());
                libc::close(signals.fd);
                libc::execv(ptrs[0], ptrs.as_ptr());
                let msg = b"portcullis stdio-supervise: the program could not be started\n";
                libc::write(2, msg.as_ptr().cast(), msg.len());
                libc::_exit(127)
            }
            pid => {
                // Only the program's step writes the report and reads the binary.
                libc::close(REPORT_FD);
                libc::close(BINARY_FD);
                Ok(pid)
            }
        }
    }
}

fn detach_stdio() {
    // SAFETY: opening /dev/null and duplicating descriptors.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
}

/// `fd` moved above the descriptors the program's step inherits (3 and 4,
/// which the supervisor closes in itself once the program is started).
fn above_fixed(fd: libc::c_int) -> libc::c_int {
    if fd > BINARY_FD {
        return fd;
    }
    // SAFETY: duplicating and closing a descriptor this process owns.
    unsafe {
        let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
        if high < 0 {
            return fd;
        }
        libc::close(fd);
        high
    }
}

/// The signals the supervisor takes through a signalfd.
struct Signals {
    fd: libc::c_int,
    before: libc::sigset_t,
}

impl Signals {
    fn block() -> std::io::Result<Signals> {
        // SAFETY: signal sets filled by sigemptyset before use.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [
                libc::SIGCHLD,
                libc::SIGTERM,
                libc::SIGUSR1,
                libc::SIGINT,
                libc::SIGHUP,
                libc::SIGQUIT,
                libc::SIGPIPE,
            ] {
                libc::sigaddset(&mut set, s);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &set, &mut before);
            let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(Signals {
                fd: above_fixed(fd),
                before,
            })
        }
    }

    /// The signals that arrived since the last look.
    fn take(&self) -> Vec<i32> {
        let mut got = Vec::new();
        loop {
            // SAFETY: reading into a zeroed signalfd_siginfo of its size.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            let n = unsafe {
                libc::read(
                    self.fd,
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n != size as isize {
                return got;
            }
            got.push(info.ssi_signo as i32);
        }
    }
}

/// The gateway, watched: a pidfd that becomes readable when it exits, or
/// (a kernel before 5.3) its pid as our parent's, looked at regularly.
struct GatewayWatch {
    pid: u32,
    fd: Option<libc::c_int>,
}

impl GatewayWatch {
    fn open(pid: u32) -> GatewayWatch {
        // SAFETY: a plain system call.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        GatewayWatch {
            pid,
            fd: (fd >= 0).then(|| above_fixed(fd as libc::c_int)),
        }
    }

    /// Still our parent: a pidfd opened after this holds the right process.
    fn alive(&self) -> bool {
        // SAFETY: getppid cannot fail.
        unsafe { libc::getppid() as u32 == self.pid }
    }
}

struct Supervision {
    child: libc::pid_t,
    grace: Duration,
    signals: Signals,
    watch: GatewayWatch,
    /// Asked to stop (SIGTERM): when the grace ends.
    stopping: Option<Instant>,
    /// How the program ended, once it has.
    ended: Option<Ended>,
}

/// How the program ended.
#[derive(Clone, Copy)]
enum Ended {
    Code(i32),
    Signal(i32),
}

impl Supervision {
    fn run(mut self) -> Ended {
        loop {
            self.reap();
            if let Some(ended) = self.ended {
                self.kill_below();
                return ended;
            }
            let woke = self.wait();
            if woke.gateway_gone || self.stopping.is_some_and(|at| Instant::now() >= at) {
                self.kill_below();
                continue;
            }
            for signal in self.signals.take() {
                match signal {
                    libc::SIGUSR1 => self.kill_below(),
                    libc::SIGTERM if self.stopping.is_none() => {
                        self.stopping = Some(Instant::now() + self.grace);
                        // The program's group had it from the gateway; the
                        // processes that left the group have it from here.
                        signal_below(libc::SIGTERM);
                    }
                    _ => {}
                }
            }
        }
    }

    /// Every child that ended is reaped; the program's end is kept.
    fn reap(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: a plain system call.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return;
            }
            if pid == self.child {
                self.ended = Some(if libc::WIFSIGNALED(status) {
                    Ended::Signal(libc::WTERMSIG(status))
                } else {
                    Ended::Code(libc::WEXITSTATUS(status))
                });
            }
        }
    }

    /// SIGKILL to every process below, until none is left (their children
    /// come to this subreaper as their parents die). Bounded: a process the
    /// kernel cannot end (stuck in the kernel) is left after ten seconds.
    fn kill_below(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = below();
            if left.is_empty() || Instant::now() > deadline {
                break;
            }
            for pid in &left {
                // SAFETY: a plain system call.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
            // Reaped, so /proc no longer lists them.
            self.reap();
            std::thread::sleep(Duration::from_millis(2));
        }
        self.reap();
    }

    /// Sleep until a signal, the gateway's end, or the grace's end.
    fn wait(&self) -> Woke {
        let mut fds = vec![libc::pollfd {
            fd: self.signals.fd,
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Some(fd) = self.watch.fd {
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let mut timeout = match self.watch.fd {
            Some(_) => -1,
            None => 250,
        };
        if let Some(at) = self.stopping {
            let left = at.saturating_duration_since(Instant::now()).as_millis();
            let left = i32::try_from(left).unwrap_or(i32::MAX);
            timeout = if timeout < 0 { left } else { timeout.min(left) };
        }
        // SAFETY: a live array of pollfd of the length given.
        unsafe {
            libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout);
        }
        let pidfd_ready = fds.get(1).is_some_and(|p| p.revents != 0);
        Woke {
            gateway_gone: pidfd_ready || !self.watch.alive(),
        }
    }
}

struct Woke {
    gateway_gone: bool,
}

/// End this process as the program ended: its code, or its signal.
fn end_as(ended: Ended) -> i32 {
    match ended {
        Ended::Code(code) => code,
        Ended::Signal(signal) => {
            // SAFETY: default action for the signal, unblocked, then raised.
            unsafe {
                libc::signal(signal, libc::SIG_DFL);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, signal);
                libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::raise(signal);
            }
            128 + signal
        }
    }
}

/// The processes below this one (its children, theirs, ...), from /proc.
fn below() -> Vec<libc::pid_t> {
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    let mut parent_of: Vec<(libc::pid_t, libc::pid_t)> = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold anything but the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![me];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

fn signal_below(signal: libc::c_int) {
    for pid in below() {
        // SAFETY: a plain system call.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// confine: the task limit (when given), the start report, then the
/// program with only 0, 1 and 2 open.
pub fn confine(max_tasks: Option<u64>, report_pid: bool, program: &[OsString]) -> i32 {
    let Some(argv) = c_strings(program) else {
        eprintln!("portcullis stdio-confine: no program, or a NUL in its arguments");
        return 127;
    };
    if let Some(tasks) = max_tasks {
        let limit = libc::rlimit {
            rlim_cur: tasks,
            rlim_max: tasks,
        };
        // SAFETY: a plain system call on a live struct.
        if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &limit) } != 0 {
            eprintln!(
                "portcullis stdio-confine: the task limit could not be set: {}",
                std::io::Error::last_os_error()
            );
            return 127;
        }
    }
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    let report = if report_pid {
        format!("{{\"started\":true,\"pid\":{pid}}}\n")
    } else {
        "{\"started\":true}\n".to_owned()
    };
    // SAFETY: writes of a live buffer, then descriptors closed at exec.
    unsafe {
        libc::write(REPORT_FD, report.as_ptr().cast(), report.len());
        libc::close(REPORT_FD);
        libc::close(BINARY_FD);
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        );
    }
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: a null-terminated argv of live C strings.
    unsafe {
        libc::execv(ptrs[0], ptrs.as_ptr());
    }
    eprintln!(
        "portcullis stdio-confine: {} could not be started: {}",
        program[0].to_string_lossy(),
        std::io::Error::last_os_error()
    );
    127
}
