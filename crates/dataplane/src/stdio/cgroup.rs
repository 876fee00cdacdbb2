//! A cgroup of its own for each running stdio program, where the gateway
//! can make one: its memory limit then bounds everything the program and
//! its children hold (shared memory and tmpfs pages included, which no
//! per-process limit sees), its task limit every process and thread they
//! start, and whatever is left in it when the program ends is killed.
//!
//! The cgroups are made under the gateway's own cgroup (the subtree a
//! service manager delegates to it: systemd's `Delegate=yes`, a container's
//! writable cgroup namespace), in the unified hierarchy (v2) or in the
//! `memory` and `pids` hierarchies of v1, whichever holds each controller.
//! What is found is found once per process.

use std::fs;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::config::ProcessLimits;

/// The prefix of every cgroup the gateway makes for a program.
const PREFIX: &str = "portcullis-stdio-";
/// The leaf a v2 gateway moves itself into, so its own cgroup may have
/// children with controllers (the "no internal processes" rule).
const GATEWAY_LEAF: &str = "portcullis-gateway";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// Where one controller's cgroups are made.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hierarchy {
    version: Version,
    /// The gateway's own cgroup in it.
    base: PathBuf,
}

/// The controllers the gateway can give its programs.
#[derive(Debug)]
pub(crate) struct Cgroups {
    memory: Option<Hierarchy>,
    pids: Option<Hierarchy>,
    /// Why a controller is missing, for the operator.
    missing: Vec<String>,
    next: AtomicU64,
}

/// Why a program's cgroup could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CgroupError {
    #[error("no cgroup can be made here ({0})")]
    Unavailable(String),
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The gateway's cgroups, found at the first call.
pub(crate) fn cgroups() -> &'static Cgroups {
    static FOUND: OnceLock<Cgroups> = OnceLock::new();
    FOUND.get_or_init(Cgroups::find)
}

impl Cgroups {
    fn find() -> Cgroups {
        let mut missing = Vec::new();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mounts = parse_mounts(&mounts);
        let mut find = |controller: &str| match locate(controller, &own, &mounts) {
            Ok(h) => {
                remove_stale(&h.base);
                Some(h)
            }
            Err(why) => {
                missing.push(format!("{controller}: {why}"));
                None
            }
        };
        let memory = find("memory");
        let pids = find("pids");
        Cgroups {
            memory,
            pids,
            missing,
            next: AtomicU64::new(1),
        }
    }

    /// What is missing, in words.
    pub(crate) fn missing(&self) -> String {
        self.missing.join("; ")
    }

    /// A new cgroup (one per hierarchy) with `limits`, ready to be joined.
    pub(crate) fn make(&self, limits: &ProcessLimits) -> Result<ProgramCgroup, CgroupError> {
        if self.memory.is_none() && self.pids.is_none() {
            return Err(CgroupError::Unavailable(self.missing()));
        }
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let mut made = ProgramCgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            memory: self.memory.is_some(),
            tasks: self.pids.is_some(),
        };
        let mut dirs: Vec<(&Hierarchy, Vec<&str>)> = Vec::new();
        for (h, controller) in [(&self.memory, "memory"), (&self.pids, "pids")] {
            let Some(h) = h else { continue };
            match dirs.iter_mut().find(|(d, _)| d.base == h.base) {
                Some((_, controllers)) => controllers.push(controller),
                None => dirs.push((h, vec![controller])),
            }
        }
        for (h, controllers) in dirs {
            let dir = h.base.join(&name);
            fs::create_dir(&dir).map_err(io_at(&dir))?;
            // Owned from here: a failure below removes what was made.
            made.dirs.push((dir.clone(), h.version));
            for controller in controllers {
                set_limits(&dir, h.version, controller, limits)?;
            }
            let procs = dir.join("cgroup.procs");
            let file = fs::OpenOptions::new()
                .write(true)
                .open(&procs)
                .map_err(io_at(&procs))?;
            made.procs.push(OwnedFd::from(file));
        }
        Ok(made)
    }
}

fn write_to(dir: &Path, file: &str, value: &str) -> Result<(), CgroupError> {
    let path = dir.join(file);
    fs::write(&path, value).map_err(io_at(&path))
}

/// Writes that some kernels lack: best effort.
fn write_if_there(dir: &Path, file: &str, value: &str) {
    let path = dir.join(file);
    if path.exists() {
        let _ = fs::write(&path, value);
    }
}

fn set_limits(
    dir: &Path,
    version: Version,
    controller: &str,
    limits: &ProcessLimits,
) -> Result<(), CgroupError> {
    let memory = limits.memory_bytes.to_string();
    match (version, controller) {
        (Version::V2, "memory") => {
            write_to(dir, "memory.max", &memory)?;
            // No swap to go past the limit into; an out-of-memory end takes
            // the whole program, never one child of it.
            write_if_there(dir, "memory.swap.max", "0");
            write_if_there(dir, "memory.oom.group", "1");
        }
        (Version::V1, "memory") => {
            write_to(dir, "memory.limit_in_bytes", &memory)?;
            write_if_there(dir, "memory.memsw.limit_in_bytes", &memory);
        }
        (_, _) => write_to(dir, "pids.max", &limits.tasks.to_string())?,
    }
    Ok(())
}

/// One program's cgroup(s): joined by the program between fork and exec,
/// emptied and removed when it has ended.
#[derive(Debug)]
pub(crate) struct ProgramCgroup {
    dirs: Vec<(PathBuf, Version)>,
    procs: Vec<OwnedFd>,
    pub memory: bool,
    pub tasks: bool,
}

impl ProgramCgroup {
    /// The open `cgroup.procs` files the child writes its pid to.
    pub(crate) fn join_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// Kill what is left in it and remove it. Blocking (cgroupfs).
    pub(crate) fn remove(mut self) {
        self.procs.clear();
        for (dir, version) in std::mem::take(&mut self.dirs) {
            empty_and_remove(&dir, version);
        }
    }
}

impl Drop for ProgramCgroup {
    fn drop(&mut self) {
        // Not removed through `remove` (the start failed): best effort.
        for (dir, version) in std::mem::take(&mut self.dirs) {
            empty_and_remove(&dir, version);
        }
    }
}

/// In the child between fork and exec: move this process into each
/// cgroup. Only async-signal-safe calls, nothing allocated.
pub(crate) fn join(fds: &[RawFd]) -> io::Result<()> {
    let mut digits = [0u8; 20];
    // SAFETY: getpid cannot fail.
    let mut pid = unsafe { libc::getpid() } as u32;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    for fd in fds {
        let text = &digits[at..];
        // SAFETY: a write of a live buffer to an open descriptor.
        let n = unsafe { libc::write(*fd, text.as_ptr().cast(), text.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// SIGKILL to whatever is in `dir` until it is empty (a bounded while),
/// then remove it.
fn empty_and_remove(dir: &Path, version: Version) {
    let kill = dir.join("cgroup.kill");
    if version == Version::V2 && kill.exists() {
        let _ = fs::write(&kill, "1");
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = members(dir);
        if left.is_empty() || Instant::now() > deadline {
            break;
        }
        for pid in left {
            // SAFETY: a plain system call.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for _ in 0..20 {
        match fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                // Its last members are still exiting.
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => return,
        }
    }
    tracing::warn!(cgroup = %dir.display(), "a stdio program's cgroup could not be removed");
}

fn members(dir: &Path) -> Vec<libc::pid_t> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Cgroups a gateway that is gone left behind (it was killed): what is in
/// them is killed, they are removed.
fn remove_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some(owner) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if owner == std::process::id() || Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let version = if base.join("cgroup.controllers").exists() {
            Version::V2
        } else {
            Version::V1
        };
        tracing::info!(cgroup = %entry.path().display(), "removing a stdio program's cgroup left by a gateway that is gone");
        empty_and_remove(&entry.path(), version);
    }
}

/// A cgroup file system mounted here: its type, the subtree it shows and
/// its options.
struct Mount {
    v2: bool,
    root: String,
    point: PathBuf,
    options: Vec<String>,
}

fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let fstype = *right.first()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(Mount {
                v2: fstype == "cgroup2",
                root: unescape(left.get(3)?),
                point: PathBuf::from(unescape(left.get(4)?)),
                options: right.get(2)?.split(',').map(str::to_owned).collect(),
            })
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as octal escapes.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(b) => {
                out.push(b as char);
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where `controller`'s program cgroups go: the v1 hierarchy that has it,
/// else the unified one when it offers it; checked by making one.
fn locate(controller: &str, own: &str, mounts: &[Mount]) -> Result<Hierarchy, String> {
    let v1 = mounts
        .iter()
        .find(|m| !m.v2 && m.options.iter().any(|o| o == controller));
    if let Some(mount) = v1 {
        let path = own
            .lines()
            .filter_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
                names.split(',').any(|n| n == controller).then_some(path)
            })
            .next()
            .ok_or("the gateway is in no v1 cgroup of it")?;
        let base = below(mount, path)?;
        usable(&base)?;
        return Ok(Hierarchy {
            version: Version::V1,
            base,
        });
    }
    let mount = mounts
        .iter()
        .find(|m| m.v2)
        .ok_or("no cgroup file system is mounted")?;
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("the gateway is in no cgroup v2")?;
    let base = below(mount, path)?;
    let offered = fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    if !offered.split_whitespace().any(|c| c == controller) {
        return Err(format!(
            "{} does not offer it (delegate it to the gateway's cgroup)",
            base.display()
        ));
    }
    enable_v2(&base, controller)?;
    usable(&base)?;
    Ok(Hierarchy {
        version: Version::V2,
        base,
    })
}

/// The folder of cgroup `path` in `mount` (which may show a subtree only).
fn below(mount: &Mount, path: &str) -> Result<PathBuf, String> {
    let root = mount.root.trim_end_matches('/');
    let rel = path
        .strip_prefix(root)
        .ok_or_else(|| format!("its cgroup {path} is outside the mounted {}", mount.root))?;
    let rel = rel.trim_start_matches('/');
    let dir = if rel.is_empty() {
        mount.point.clone()
    } else {
        mount.point.join(rel)
    };
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(format!("{} is not a folder", dir.display()))
    }
}

/// A cgroup can be made (and removed) under `base`.
fn usable(base: &Path) -> Result<(), String> {
    let probe = base.join(format!("{PREFIX}{}-probe", std::process::id()));
    fs::create_dir(&probe).map_err(|e| format!("{} cannot have children: {e}", base.display()))?;
    let _ = fs::remove_dir(&probe);
    Ok(())
}

/// `controller` switched on for the children of `base`; when `base` holds
/// the gateway itself (and cgroup v2 forbids a cgroup with members to hand
/// controllers down), the gateway moves into a leaf of its own first.
fn enable_v2(base: &Path, controller: &str) -> Result<(), String> {
    let control = base.join("cgroup.subtree_control");
    let on = |c: &Path| {
        fs::read_to_string(c)
            .unwrap_or_default()
            .split_whitespace()
            .any(|x| x == controller)
    };
    if on(&control) {
        return Ok(());
    }
    let enable = || {
        fs::OpenOptions::new()
            .write(true)
            .open(&control)
            .and_then(|mut f| f.write_all(format!("+{controller}").as_bytes()))
    };
    match enable() {
        Ok(()) => return Ok(()),
        Err(e) if e.raw_os_error() != Some(libc::EBUSY) => {
            return Err(format!("{}: {e}", control.display()))
        }
        Err(_) => {}
    }
    let leaf = base.join(GATEWAY_LEAF);
    if let Err(e) = fs::create_dir(&leaf) {
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(format!("{}: {e}", leaf.display()));
        }
    }
    fs::write(leaf.join("cgroup.procs"), std::process::id().to_string())
        .map_err(|e| format!("moving the gateway into {}: {e}", leaf.display()))?;
    enable().map_err(|e| {
        // Others share the gateway's cgroup: put it back where it was.
        let _ = fs::write(base.join("cgroup.procs"), std::process::id().to_string());
        format!(
            "{}: {e} (other processes share the gateway's cgroup)",
            control.display()
        )
    })?;
    tracing::info!(cgroup = %leaf.display(), "the gateway moved into a leaf cgroup, so its stdio programs can have cgroups of their own");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_are_read_with_their_escapes() {
        let text = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                    35 31 0:32 /a\\040b /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                    27 1 254:0 / / rw - ext4 /dev/vda rw\n";
        let mounts = parse_mounts(text);
        assert_eq!(mounts.len(), 2);
        assert!(mounts[0].v2 && mounts[0].point == Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(mounts[1].root, "/a b");
        assert!(mounts[1].options.iter().any(|o| o == "memory"));
    }

    #[test]
    fn a_cgroup_outside_the_mounted_subtree_is_refused() {
        let mount = Mount {
            v2: true,
            root: "/kubepods/pod1".into(),
            point: PathBuf::from("/sys/fs/cgroup"),
            options: vec![],
        };
        assert!(below(&mount, "/other").is_err());
    }
}
