//! The settings a reload cannot change: they are fixed when the listeners
//! are bound and the logger is set up, so a new value waits for a restart.

use super::GatewayConfig;

impl GatewayConfig {
    /// The restart-only settings (by config path) that differ between this
    /// config and `running`, the one the process was started with.
    pub fn restart_only_changes(&self, running: &GatewayConfig) -> Vec<String> {
        let mut changed = Vec::new();
        let mut differ = |field: String, same: bool| {
            if !same {
                changed.push(field);
            }
        };
        let (new, old) = (&self.listeners, &running.listeners);
        differ("listener".into(), new.len() == old.len());
        for (i, (n, o)) in new.iter().zip(old).enumerate() {
            differ(format!("listener[{i}].address"), n.address == o.address);
            differ(format!("listener[{i}].tls"), n.tls_digest == o.tls_digest);
        }
        differ("admin.address".into(), self.admin == running.admin);
        let (n, o) = (&self.limits, &running.limits);
        for (name, same) in [
            ("max_connections", n.max_connections == o.max_connections),
            ("max_header_bytes", n.max_header_bytes == o.max_header_bytes),
            (
                "header_read_timeout",
                n.header_read_timeout == o.header_read_timeout,
            ),
            (
                "http2_max_concurrent_streams",
                n.http2_max_concurrent_streams == o.http2_max_concurrent_streams,
            ),
            (
                "max_in_flight_requests",
                n.max_in_flight_requests == o.max_in_flight_requests,
            ),
            ("request_timeout", n.request_timeout == o.request_timeout),
        ] {
            differ(format!("limits.{name}"), same);
        }
        differ(
            "shutdown.drain_timeout".into(),
            self.drain_timeout == running.drain_timeout,
        );
        differ("runtime".into(), self.runtime == running.runtime);
        differ("log.format".into(), self.log.format == running.log.format);
        differ("log.level".into(), self.log.level == running.log.level);
        // The exporter is built once, at start.
        differ("tracing".into(), self.tracing == running.tracing);
        changed
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parse(extra: &str, port: u16) -> GatewayConfig {
        let text = format!(
            "[[listener]]\naddress = \"127.0.0.1:{port}\"\n{extra}\n[[upstream]]\nid = \"a\"\nname = \"A\"\nurl = \"http://127.0.0.1:9/mcp\"\n[[route]]\npath = \"/mcp\"\nupstream = \"a\"\n"
        );
        GatewayConfig::parse(&text, Path::new("t.toml")).unwrap()
    }

    #[test]
    fn listener_and_connection_settings_need_a_restart_others_do_not() {
        let running = parse("", 8080);
        assert!(parse("", 8080).restart_only_changes(&running).is_empty());
        assert_eq!(
            parse("", 8081).restart_only_changes(&running),
            ["listener[0].address"]
        );
        let limits = parse(
            "[limits]\nmax_connections = 5\nmax_request_body_bytes = 10\n[log]\nlevel = \"debug\"",
            8080,
        );
        assert_eq!(
            limits.restart_only_changes(&running),
            ["limits.max_connections", "log.level"],
            "the body limit is read per request"
        );
        let traced = parse(
            "[tracing]\notlp_endpoint = \"http://127.0.0.1:4318/v1/traces\"",
            8080,
        );
        assert_eq!(
            traced.restart_only_changes(&running),
            ["tracing"],
            "the exporter is built at start"
        );
    }
}
