//! What `portcullis check` warns of (and `portcullis run` logs at start):
//! a config that works but leaves something open an operator should know.
//! `portcullis check --strict` refuses it.
//!
//! * A plain `http://` upstream on a host that is not this machine: what
//!   the gateway sends it (the callers' arguments, its own credential) and
//!   what it answers cross the network readable and alterable by anyone on
//!   the way, and nothing proves the server is the one configured.

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
        for up in &self.upstreams {
            if up.stdio.is_some() || up.tls.is_some() || up.url.scheme_str() != Some("http") {
                continue;
            }
            let host = up.url.host().unwrap_or_default();
            let here = matches!(classify_text(host), Some(HostClass::Loopback));
            if !here {
                out.push(ConfigWarning {
                    field: format!("upstream \"{}\" url", up.id),
                    message: format!(
                        "plain http:// to {host}, which is not this machine: what callers send it and what it answers cross the network unencrypted and unauthenticated; use https:// (portcullis check --strict refuses this)"
                    ),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> GatewayConfig {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            format!("[[listener]]\naddress = \"127.0.0.1:0\"\n[[upstream]]\nid = \"u\"\nname = \"U\"\nurl = \"{url}\"\n[[route]]\npath = \"/mcp\"\nupstream = \"u\"\n"),
        )
        .unwrap();
        GatewayConfig::load(&path).unwrap()
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
