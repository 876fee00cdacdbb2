//! What `portcullis check` warns of (and `portcullis run` logs at start):
//! a config that works but leaves something open an operator should know.
//! `portcullis check --strict` refuses it.
//!
//! * A plain `http://` upstream on a host that is not this machine: what
//!   the gateway sends it (the callers' arguments, its own credential) and
//!   what it answers cross the network readable and alterable by anyone on
//!   the way, and nothing proves the server is the one configured.
//! * A sandbox's `writable` folder that the program's user cannot write, when
//!   the gateway runs as root (the program then runs as `sandbox.user`,
//!   `nobody` by default): a folder root just made is root's, and the
//!   program's writes there fail with EACCES.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::sandbox::RunAs;
use super::GatewayConfig;
use crate::policy::address::{classify_text, HostClass};

/// One warning: the config key it is about, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl GatewayConfig {
    /// Every warning of this config.
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let mut out = Vec::new();
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            out.extend(self.closed_writable_folders());
        }
        for up in &self.upstreams {
            if up.allow_plaintext {
                continue; // the operator said so, for this upstream
            }
            if let Some(host) = plaintext_remote(up) {
                out.push(ConfigWarning {
                    field: format!("upstream \"{}\" url", up.id),
                    message: format!(
                        "plain http:// to {host}, which is not this machine: what callers send it and what it answers cross the network unencrypted and unauthenticated; use https://, or say allow_plaintext = true on this upstream (portcullis check --strict refuses this; the untrusted preset refuses it at start)"
                    ),
                });
            }
        }
        out
    }
}

/// The host of a plain `http://` upstream that is not this machine: any
/// name or address but loopback (`127.0.0.0/8`, `::1`, `localhost` and
/// its subdomains), as written; private and link-local addresses count as
/// remote (a private network is shared with whoever else is on it). Names
/// are not resolved: what one resolves to can change after the check. A
/// stdio program is reached over a pipe, never a network.
pub(super) fn plaintext_remote(up: &super::UpstreamRoute) -> Option<&str> {
    if up.stdio.is_some() || up.tls.is_some() || up.url.scheme_str() != Some("http") {
        return None;
    }
    let host = up.url.host().unwrap_or_default();
    let here = matches!(classify_text(host), Some(HostClass::Loopback));
    (!here).then_some(host)
}

impl GatewayConfig {
    /// Every sandbox `writable` folder its program's user may not write
    /// (by the folder's owner, group and mode; ACLs are not read).
    fn closed_writable_folders(&self) -> Vec<ConfigWarning> {
        let mut out = Vec::new();
        for up in &self.upstreams {
            let Some(sandbox) = up.stdio.as_ref().and_then(|s| s.sandbox.as_ref()) else {
                continue;
            };
            for dir in &sandbox.writable {
                if !writable_by(dir, sandbox.user) {
                    out.push(ConfigWarning {
                        field: format!("upstream \"{}\" sandbox.writable", up.id),
                        message: format!(
                            "{} is not writable by uid {}, whom this gateway (run as root) runs the program as: its writes there fail; `chown {} {}`, or name sandbox.user",
                            dir.display(),
                            sandbox.user.uid,
                            sandbox.user.uid,
                            dir.display()
                        ),
                    });
                }
            }
        }
        out
    }
}

fn writable_by(dir: &Path, user: RunAs) -> bool {
    let Ok(m) = std::fs::metadata(dir) else {
        return true; // not there: the config's own check says so
    };
    let mode = m.mode();
    (m.uid() == user.uid && mode & 0o200 != 0)
        || (m.gid() == user.gid && mode & 0o020 != 0)
        || mode & 0o002 != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> GatewayConfig {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            // trusted: plain http:// elsewhere is a warning there (untrusted refuses it).
            format!("[[listener]]\naddress = \"127.0.0.1:0\"\n[[upstream]]\nid = \"u\"\nname = \"U\"\nurl = \"{url}\"\npolicy = \"trusted\"\n[[route]]\npath = \"/mcp\"\nupstream = \"u\"\n"),
        )
        .unwrap();
        GatewayConfig::load(&path).unwrap()
    }

    #[test]
    fn a_writable_folder_closed_to_the_programs_user_is_found() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let nobody = RunAs {
            uid: super::super::sandbox::OVERFLOW_ID,
            gid: super::super::sandbox::OVERFLOW_ID,
            named: false,
        };
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mine = std::fs::metadata(&data).unwrap();
        assert_eq!(mine.uid() == nobody.uid, writable_by(&data, nobody));
        let owner = RunAs {
            uid: mine.uid(),
            gid: mine.gid(),
            named: true,
        };
        assert!(writable_by(&data, owner));
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o775)).unwrap();
        let group = RunAs {
            uid: nobody.uid,
            gid: mine.gid(),
            named: true,
        };
        assert!(writable_by(&data, group));
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(writable_by(&data, nobody));
        assert!(writable_by(&dir.path().join("gone"), nobody));
    }

    #[test]
    fn plain_http_off_this_machine_is_warned_of() {
        assert_eq!(config("http://mcp.example.com/mcp").warnings().len(), 1);
        assert_eq!(config("http://10.0.0.5:8080/mcp").warnings().len(), 1);
        for quiet in [
            "https://mcp.example.com/mcp",
            "http://127.0.0.1:9000/mcp",
            "http://localhost:9000/mcp",
            "http://[::1]:9000/mcp",
        ] {
            assert!(config(quiet).warnings().is_empty(), "{quiet}");
        }
    }
}
