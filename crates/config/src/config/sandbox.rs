//! `[upstream.sandbox]`: what a confined stdio program sees (the system's
//! folders, an allow-list of `/etc`, its own folders), whom it runs as, and
//! the size of its scratch space; and `cgroup`, how its limits are kept.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::locate::{resolve, Locator};
use super::raw::RawSandbox;
use super::stdio::find_program;
use crate::model::ConfigError;

/// What Debian's bubblewrap is called on PATH.
const LAUNCHER: &str = "bwrap";

/// Folders a confined program can always read: the system's programs and
/// libraries.
pub const SYSTEM_READ_ONLY: [&str; 5] = ["/usr", "/bin", "/sbin", "/lib", "/lib64"];

/// What of `/etc` a confined program sees: what the C library, the name
/// service, TLS and the interpreters read. Never `shadow`, `gshadow`,
/// `sudoers`, `ssh/` (host keys) or `ssl/private`; an operator who wants
/// more names it in `read_only`.
pub const ETC_ALLOWED: [&str; 32] = [
    // the C library and the name service
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    "networks",
    // time and language
    "localtime",
    "timezone",
    "locale.alias",
    "locale.conf",
    "default/locale",
    // TLS roots (Debian, Fedora, Alpine, SUSE)
    "ssl/certs",
    "ssl/cert.pem",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/ca-trust",
    "crypto-policies",
    // programs found through /etc (Debian's alternatives: java, editors)
    "alternatives",
    "mime.types",
    "os-release",
    "lsb-release",
    "debian_version",
    "xdg",
];

/// The id the program runs as when the gateway runs as root and the
/// sandbox names no `user`: the kernel's overflow id (`nobody`).
pub const OVERFLOW_ID: u32 = 65534;

/// `[upstream.sandbox]`, enforced by bubblewrap: its own user, mount, PID,
/// IPC, UTS and cgroup namespaces, no capability, no network unless asked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sandbox {
    /// bubblewrap's path (found on the gateway's PATH when the config is read).
    pub launcher: PathBuf,
    pub read_only: Vec<PathBuf>,
    pub writable: Vec<PathBuf>,
    pub network: bool,
    /// Whom the program runs as on the host when the gateway runs as root.
    pub user: RunAs,
    /// The size of its /tmp, and of its /dev/shm.
    pub tmp_bytes: u64,
}

/// A host user and group, never root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    /// Written in the config (a gateway that is not root cannot honour it
    /// unless it is its own user); otherwise the default.
    pub named: bool,
}

/// `cgroup`: whether a stdio program's memory and task limits are kept by
/// a cgroup of its own (bounding its children, shared memory and tmpfs
/// pages too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CgroupMode {
    /// One where the gateway can make one; the kernel's per-process limits
    /// otherwise (logged at the program's first start).
    #[default]
    Auto,
    /// The program does not start without one.
    Required,
    /// Never: the kernel's per-process limits only.
    Off,
}

impl CgroupMode {
    const ALL: [CgroupMode; 3] = [CgroupMode::Auto, CgroupMode::Required, CgroupMode::Off];

    pub const fn as_str(self) -> &'static str {
        match self {
            CgroupMode::Auto => "auto",
            CgroupMode::Required => "required",
            CgroupMode::Off => "off",
        }
    }
}

/// `cgroup = "..."`.
pub(super) fn cgroup_mode(
    raw: &Option<Spanned<String>>,
    field: &str,
    loc: &Locator<'_>,
) -> Result<CgroupMode, ConfigError> {
    let Some(raw) = raw else {
        return Ok(CgroupMode::default());
    };
    CgroupMode::ALL
        .into_iter()
        .find(|m| m.as_str() == raw.get_ref())
        .ok_or_else(|| {
            let names: Vec<&str> = CgroupMode::ALL.iter().map(|m| m.as_str()).collect();
            loc.at(raw.span(), field, format!("one of {}", names.join(", ")))
        })
}

/// Default size of a sandbox's /tmp (and /dev/shm).
const TMP_BYTES: u64 = 64 << 20;

pub(super) fn sandbox(
    raw: &Spanned<RawSandbox>,
    field: &str,
    loc: &Locator<'_>,
    base: &Path,
) -> Result<Sandbox, ConfigError> {
    let path = std::env::var("PATH").ok();
    let launcher = find_program(LAUNCHER, path.as_deref()).ok_or_else(|| {
        loc.at(
            raw.span(),
            field,
            "needs bubblewrap (`bwrap` on PATH; Debian: apt-get install bubblewrap)",
        )
    })?;
    if let Err(why) = launcher_supported(&launcher) {
        return Err(loc.at(raw.span(), field, why));
    }
    let folders = |list: &[Spanned<String>], key: &str| {
        list.iter()
            .map(|f| {
                let path = resolve(base, f.get_ref());
                if path.parent().is_none() {
                    Err(loc.at(
                        f.span(),
                        format!("{field}.{key}"),
                        "\"/\" would show the program the whole host: name the folders it needs",
                    ))
                } else if path.exists() {
                    Ok(path)
                } else {
                    Err(loc.at(
                        f.span(),
                        format!("{field}.{key}"),
                        format!("{} does not exist", path.display()),
                    ))
                }
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let body = raw.get_ref();
    let tmp_bytes = loc.positive(
        &body.max_tmp_bytes,
        &format!("{field}.max_tmp_bytes"),
        TMP_BYTES as usize,
    )? as u64;
    Ok(Sandbox {
        launcher,
        read_only: folders(&body.read_only, "read_only")?,
        writable: folders(&body.writable, "writable")?,
        network: body.network.unwrap_or(false),
        user: run_as(body, field, loc)?,
        tmp_bytes,
    })
}

/// The oldest bubblewrap with every option the sandbox needs
/// (`--disable-userns`, `--size`).
const LAUNCHER_MIN: (u32, u32) = (0, 8);

/// `bwrap --version` says it is recent enough.
fn launcher_supported(launcher: &Path) -> Result<(), String> {
    let out = std::process::Command::new(launcher)
        .arg("--version")
        .env_clear()
        .output()
        .map_err(|e| format!("{} cannot be run: {e}", launcher.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().last().unwrap_or_default();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) if (major, minor) >= LAUNCHER_MIN => Ok(()),
        _ => Err(format!(
            "needs bubblewrap {}.{} or later ({} says {:?})",
            LAUNCHER_MIN.0,
            LAUNCHER_MIN.1,
            launcher.display(),
            text.trim()
        )),
    }
}

/// `user` and `group`: names or numbers; the group defaults to the user's
/// own. Root is refused: a program that is root on the host owns every
/// root-owned file its sandbox shows it.
fn run_as(body: &RawSandbox, field: &str, loc: &Locator<'_>) -> Result<RunAs, ConfigError> {
    let Some(user) = &body.user else {
        if let Some(group) = &body.group {
            return Err(loc.at(group.span(), format!("{field}.group"), "needs user"));
        }
        return Ok(RunAs {
            uid: OVERFLOW_ID,
            gid: OVERFLOW_ID,
            named: false,
        });
    };
    let user_field = format!("{field}.user");
    let (uid, primary) = lookup_user(user.get_ref()).ok_or_else(|| {
        loc.at(
            user.span(),
            &user_field,
            format!(
                "\"{}\" is neither a user of this system nor a number",
                user.get_ref()
            ),
        )
    })?;
    let gid = match &body.group {
        Some(group) => lookup_group(group.get_ref()).ok_or_else(|| {
            loc.at(
                group.span(),
                format!("{field}.group"),
                format!(
                    "\"{}\" is neither a group of this system nor a number",
                    group.get_ref()
                ),
            )
        })?,
        None => primary.unwrap_or(uid),
    };
    if uid == 0 || gid == 0 {
        return Err(loc.at(
            user.span(),
            user_field,
            "the program must not run as root (uid or gid 0): name an unprivileged user",
        ));
    }
    Ok(RunAs {
        uid,
        gid,
        named: true,
    })
}

/// A user's id and primary group: a number as written, or a name looked up
/// in the system's user database.
fn lookup_user(name: &str) -> Option<(u32, Option<u32>)> {
    if let Ok(uid) = name.parse::<u32>() {
        return Some((uid, None));
    }
    let name = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value for getpwnam_r to fill.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live buffer of the length given.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    (rc == 0 && !found.is_null()).then_some((entry.pw_uid, Some(entry.pw_gid)))
}

fn lookup_group(name: &str) -> Option<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Some(gid);
    }
    let name = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 64 * 1024];
    // SAFETY: an all-zero group is a valid value for getgrnam_r to fill.
    let mut entry: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is to a live buffer of the length given.
    let rc = unsafe {
        libc::getgrnam_r(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    (rc == 0 && !found.is_null()).then_some(entry.gr_gid)
}
