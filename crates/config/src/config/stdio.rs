//! `[[upstream]] command = [...]`: a local MCP server spoken to over stdio,
//! the environment it gets, its limits and its confinement; and a route's
//! `roots`, what such a program is told when it asks for the client's roots.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use super::locate::{resolve, Locator};
use super::problems::Problems;
use super::raw::RawUpstream;
use super::sandbox::{cgroup_mode, sandbox, CgroupMode, Sandbox, SYSTEM_READ_ONLY};
use crate::model::ConfigError;

/// Variables a child gets from the gateway's own environment unless `env`
/// sets them: where to find programs, and the home folder the npm and uv
/// launchers keep their caches under.
pub const INHERITED_VARIABLES: [&str; 2] = ["PATH", "HOME"];

/// How one stdio program is started, limited and confined. Two upstreams
/// with equal settings share their processes, and a reload that leaves them
/// alone keeps them running.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct StdioSettings {
    /// The program (resolved on the child's PATH) and its arguments.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The child's whole environment.
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    pub eager: bool,
    pub max_processes: usize,
    pub idle_timeout: Duration,
    /// How long a stopped program has between SIGTERM and SIGKILL.
    pub stop_timeout: Duration,
    pub limits: ProcessLimits,
    /// Whether a cgroup keeps its memory and task limits.
    pub cgroup: CgroupMode,
    pub sandbox: Option<Sandbox>,
}

impl std::fmt::Debug for StdioSettings {
    // The environment's values may be secrets: its names only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioSettings")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("limits", &self.limits)
            .field("cgroup", &self.cgroup)
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

/// The limits of one running program: the kernel's per-process limits
/// (`setrlimit`), and, where a cgroup keeps them, limits on the program
/// with all its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessLimits {
    /// `RLIMIT_DATA` of each process (its heap and private writable
    /// mappings); in a cgroup, everything the program and its children hold
    /// (shared memory, tmpfs pages, page cache they dirty too).
    pub memory_bytes: u64,
    /// Tasks (processes and threads) of the program and its children: a
    /// cgroup's `pids.max`; without one, `RLIMIT_NPROC` inside a sandbox.
    pub tasks: u64,
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
    /// `RLIMIT_CPU`: CPU seconds over the process's whole life.
    pub cpu_seconds: Option<u64>,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        ProcessLimits {
            memory_bytes: 4 << 30,
            tasks: 512,
            open_files: 1024,
            cpu_seconds: None,
        }
    }
}

/// The stdio settings of `r`, when it has a `command`.
pub(super) fn stdio(
    r: &RawUpstream,
    field: &dyn Fn(&str) -> String,
    loc: &Locator<'_>,
    base: &Path,
    p: &mut Problems,
) -> Option<StdioSettings> {
    let command = r.command.as_ref()?;
    let env = p.take(environment(r, field, loc));
    let search = search_path(r, env.as_ref());
    let program = p.take(program(command, search.as_deref(), &field("command"), loc));
    let cwd = r.cwd.as_ref().and_then(|c| {
        let path = resolve(base, c.get_ref());
        if path.is_dir() {
            Some(path)
        } else {
            p.push(loc.at(
                c.span(),
                field("cwd"),
                format!("{} is not a folder", path.display()),
            ));
            None
        }
    });
    let sandbox = r
        .sandbox
        .as_ref()
        .and_then(|s| p.take(sandbox(s, &field("sandbox"), loc, base)));
    if let (Some(dir), Some(s), Some(raw)) = (&cwd, &sandbox, &r.cwd) {
        if !s.shows(dir) {
            p.push(loc.at(
                raw.span(),
                field("cwd"),
                format!(
                    "{} is outside the sandbox: the program could not start there; add it (or a folder above it) to sandbox.writable or sandbox.read_only",
                    dir.display()
                ),
            ));
        }
    }
    if let (Some(program), Some(s)) = (&program, &sandbox) {
        if let Some(hidden) = hidden_from(s, program, search.as_deref()) {
            p.push(loc.at(
                command.span(),
                field("command"),
                format!(
                    "{} is outside the sandbox: the program could not start there; add the folder it is installed in to sandbox.read_only",
                    hidden.display()
                ),
            ));
        }
    }
    let max_processes = p.or(
        loc.positive(&r.max_processes, &field("max_processes"), 4),
        4,
    );
    let mut time = |raw: &Option<Spanned<String>>, key: &str, secs: u64| {
        let d = Duration::from_secs(secs);
        p.or(loc.duration(raw, &field(key), d), d)
    };
    let idle_timeout = time(&r.idle_timeout, "idle_timeout", 300);
    let stop_timeout = time(&r.stop_timeout, "stop_timeout", 5);
    let limits = limits(r, field, loc, p);
    let cgroup = p.or(
        cgroup_mode(&r.cgroup, &field("cgroup"), loc),
        CgroupMode::Auto,
    );
    Some(StdioSettings {
        program: program?,
        args: command.get_ref()[1..]
            .iter()
            .map(|a| a.get_ref().clone())
            .collect(),
        env: env?,
        cwd,
        eager: r.eager.unwrap_or(false),
        max_processes,
        idle_timeout,
        stop_timeout,
        limits,
        cgroup,
        sandbox: if r.sandbox.is_some() {
            Some(sandbox?)
        } else {
            None
        },
    })
}

impl Sandbox {
    /// Whether `dir` is inside a folder the sandbox shows the program (the
    /// system's read-only folders, or a listed one), symbolic links followed.
    fn shows(&self, dir: &Path) -> bool {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
        let dir = real(dir);
        SYSTEM_READ_ONLY
            .iter()
            .map(PathBuf::from)
            .chain(self.read_only.iter().cloned())
            .chain(self.writable.iter().cloned())
            .any(|folder| dir.starts_with(real(&folder)))
    }
}

/// What of `program` the sandbox does not show: the file itself (its links
/// followed: a global npm install links `bin/` into `lib/`), or the
/// interpreter its `#!` line names (`#!/usr/bin/env node` looked up on
/// `search`, as `env` would), which must be there too for it to start.
/// A relative path is the program's own cwd's to resolve: not judged here.
fn hidden_from(s: &Sandbox, program: &Path, search: Option<&str>) -> Option<PathBuf> {
    if !program.is_absolute() {
        return None;
    }
    if !s.shows(program) {
        return Some(program.to_owned());
    }
    let interpreter = interpreter(program, search)?;
    (interpreter.is_absolute() && !s.shows(&interpreter)).then_some(interpreter)
}

/// The interpreter a script's `#!` line names, through `/usr/bin/env`.
fn interpreter(script: &Path, search: Option<&str>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = std::str::from_utf8(line.split(|b| *b == b'\n').next()?).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if Path::new(first).file_name() != Some(OsStr::new("env")) {
        return Some(PathBuf::from(first));
    }
    let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
    find_program(name, search)
}

/// The PATH the program is looked up on: its environment's; or, when that
/// could not be read (its problem is reported on its own), the PATH `env`
/// sets or the gateway's, so an unset `env_from` name is not also reported
/// as a missing program.
fn search_path(r: &RawUpstream, env: Option<&BTreeMap<String, String>>) -> Option<String> {
    if let Some(env) = env {
        return env.get("PATH").cloned();
    }
    r.env
        .iter()
        .flatten()
        .find(|(name, _)| name.get_ref() == "PATH")
        .map(|(_, value)| value.get_ref().clone())
        .or_else(|| std::env::var("PATH").ok())
}

/// `env`, then `env_from` read from the gateway's environment, then PATH
/// and HOME where neither set them.
fn environment(
    r: &RawUpstream,
    field: &dyn Fn(&str) -> String,
    loc: &Locator<'_>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut env = BTreeMap::new();
    let valid = |name: &str| {
        !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit()
    };
    for (name, value) in r.env.iter().flatten() {
        if !valid(name.get_ref()) {
            return Err(loc.at(
                name.span(),
                field("env"),
                "a variable name of A-Z, a-z, 0-9 and '_', not starting with a digit",
            ));
        }
        if value.get_ref().contains('\0') {
            return Err(loc.at(value.span(), field("env"), "a value without NUL"));
        }
        env.insert(name.get_ref().clone(), value.get_ref().clone());
    }
    for name in r.env_from.iter().flatten() {
        if !valid(name.get_ref()) {
            return Err(loc.at(
                name.span(),
                field("env_from"),
                "a variable name of A-Z, a-z, 0-9 and '_', not starting with a digit",
            ));
        }
        // Passed through as it is: the gateway's own variables (PATH, LANG)
        // may be among them, so nothing here is taken out of its environment.
        let Some(value) = std::env::var_os(name.get_ref()) else {
            return Err(loc.at(
                name.span(),
                field("env_from"),
                format!("{} is not set in the gateway's environment", name.get_ref()),
            ));
        };
        let Ok(value) = value.into_string() else {
            return Err(loc.at(
                name.span(),
                field("env_from"),
                format!("{} is not valid UTF-8", name.get_ref()),
            ));
        };
        env.insert(name.get_ref().clone(), value);
    }
    for name in INHERITED_VARIABLES {
        if !env.contains_key(name) {
            if let Some(v) = std::env::var_os(name).and_then(|v| v.into_string().ok()) {
                env.insert(name.to_owned(), v);
            }
        }
    }
    Ok(env)
}

/// The program: a path, or a name found on the child's PATH now, so a
/// typo is a config error and not a failure on first use.
fn program(
    command: &Spanned<Vec<Spanned<String>>>,
    path: Option<&str>,
    field: &str,
    loc: &Locator<'_>,
) -> Result<PathBuf, ConfigError> {
    let Some(first) = command.get_ref().first() else {
        return Err(loc.at(
            command.span(),
            field,
            "the program and its arguments, e.g. [\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]",
        ));
    };
    let name = first.get_ref();
    if name.is_empty() || command.get_ref().iter().any(|a| a.get_ref().contains('\0')) {
        return Err(loc.at(
            first.span(),
            field,
            "a program name and arguments without NUL",
        ));
    }
    find_program(name, path).ok_or_else(|| {
        loc.at(
            first.span(),
            field,
            format!("\"{name}\" is not an executable file on the program's PATH"),
        )
    })
}

/// `name` itself when it has a '/', else the first executable of that name
/// in `path`'s folders.
pub(super) fn find_program(name: &str, path: Option<&str>) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    std::env::split_paths(OsStr::new(path?))
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn limits(
    r: &RawUpstream,
    field: &dyn Fn(&str) -> String,
    loc: &Locator<'_>,
    p: &mut Problems,
) -> ProcessLimits {
    let d = ProcessLimits::default();
    let mut read = |raw: &Option<Spanned<i64>>, key: &str, default: u64| {
        let default = usize::try_from(default).unwrap_or(usize::MAX);
        p.or(loc.positive(raw, &field(key), default), default) as u64
    };
    ProcessLimits {
        memory_bytes: read(&r.max_memory_bytes, "max_memory_bytes", d.memory_bytes),
        tasks: read(&r.max_tasks, "max_tasks", d.tasks),
        open_files: read(&r.max_open_files, "max_open_files", d.open_files),
        cpu_seconds: r
            .max_cpu_seconds
            .is_some()
            .then(|| read(&r.max_cpu_seconds, "max_cpu_seconds", 1)),
    }
}

/// Keys only an HTTP upstream has.
pub(super) fn http_only_keys(r: &RawUpstream) -> Vec<(&'static str, std::ops::Range<usize>)> {
    let mut keys = Vec::new();
    if let Some(c) = &r.ca_file {
        keys.push(("ca_file", c.span()));
    }
    if let Some(c) = &r.tls_pins {
        keys.push(("tls_pins", c.span()));
    }
    if let Some(v) = &r.pool_max_idle_per_host {
        keys.push(("pool_max_idle_per_host", v.span()));
    }
    if let Some(v) = &r.pool_idle_timeout {
        keys.push(("pool_idle_timeout", v.span()));
    }
    if let Some(v) = &r.allow_plaintext {
        keys.push(("allow_plaintext", v.span()));
    }
    keys
}

/// Keys only a stdio upstream has, with where they were written.
pub(super) fn stdio_only_keys(r: &RawUpstream) -> Vec<(&'static str, std::ops::Range<usize>)> {
    let mut keys = Vec::new();
    let spans = [
        ("cwd", r.cwd.as_ref().map(Spanned::span)),
        ("max_processes", r.max_processes.as_ref().map(Spanned::span)),
        ("idle_timeout", r.idle_timeout.as_ref().map(Spanned::span)),
        ("stop_timeout", r.stop_timeout.as_ref().map(Spanned::span)),
        (
            "max_memory_bytes",
            r.max_memory_bytes.as_ref().map(Spanned::span),
        ),
        (
            "max_open_files",
            r.max_open_files.as_ref().map(Spanned::span),
        ),
        (
            "max_cpu_seconds",
            r.max_cpu_seconds.as_ref().map(Spanned::span),
        ),
        ("max_tasks", r.max_tasks.as_ref().map(Spanned::span)),
        ("cgroup", r.cgroup.as_ref().map(Spanned::span)),
        ("sandbox", r.sandbox.as_ref().map(Spanned::span)),
        (
            "env_from",
            r.env_from
                .as_ref()
                .and_then(|e| e.first())
                .map(Spanned::span),
        ),
        (
            "env",
            r.env
                .as_ref()
                .and_then(|e| e.keys().next())
                .map(Spanned::span),
        ),
    ];
    for (key, span) in spans {
        if let Some(span) = span {
            keys.push((key, span));
        }
    }
    if r.eager.is_some() {
        keys.push(("eager", r.id.span()));
    }
    keys
}

/// A route's `roots`: `file://` URIs, or absolute paths written as such.
pub(super) fn roots(
    raw: &Option<Vec<Spanned<String>>>,
    field: &str,
    loc: &Locator<'_>,
) -> Result<Vec<String>, ConfigError> {
    let mut out = Vec::new();
    for r in raw.iter().flatten() {
        let text = r.get_ref().trim();
        let uri = if text.starts_with('/') {
            url::Url::from_file_path(text).ok().map(String::from)
        } else {
            url::Url::parse(text)
                .ok()
                .filter(|u| u.scheme() == "file")
                .map(String::from)
        };
        match uri {
            Some(uri) => out.push(uri),
            None => {
                return Err(loc.at(
                    r.span(),
                    field,
                    "a file:// URI or an absolute path (\"/srv/data\")",
                ))
            }
        }
    }
    Ok(out)
}
