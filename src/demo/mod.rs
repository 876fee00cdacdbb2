//! `portcullis demo`: the example MCP server (the `portcullis-demo` crate)
//! and a gateway in front of it, configured by the shipped `config/demo.toml`.

/// The example config the demo runs with (also shipped as a file).
pub const DEMO_CONFIG: &str = include_str!("../../config/demo.toml");

/// The curl lines the demo prints after `URL=<the gateway endpoint>`: a POSIX
/// shell fragment that runs as printed (the retry takes the state with jq).
pub const TRY_IT: &str = include_str!("try_it.sh");

/// Where the demo listens unless told otherwise: the gateway, its admin
/// listener and the example MCP server (the shipped config's addresses).
pub const LISTEN: &str = "127.0.0.1:8080";
pub const ADMIN: &str = "127.0.0.1:9901";
pub const UPSTREAM: &str = "127.0.0.1:9100";

/// The shipped demo config with its three addresses moved (`demo --listen`,
/// `--admin`, `--upstream`), so that a demo can run beside another.
pub fn config_at(
    listen: std::net::SocketAddr,
    admin: std::net::SocketAddr,
    upstream: std::net::SocketAddr,
) -> String {
    DEMO_CONFIG
        .replace(
            &format!("address = \"{LISTEN}\""),
            &format!("address = \"{listen}\""),
        )
        .replace(
            &format!("address = \"{ADMIN}\""),
            &format!("address = \"{admin}\""),
        )
        .replace(
            &format!("url = \"http://{UPSTREAM}/mcp\""),
            &format!("url = \"http://{upstream}/mcp\""),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_config_moves_to_the_addresses_given() {
        let at = |a: &str| a.parse().unwrap();
        let moved = config_at(
            at("127.0.0.1:18080"),
            at("127.0.0.1:19901"),
            at("127.0.0.1:19100"),
        );
        // The values move; the file's comments may still name the defaults.
        for (old, new) in [
            (format!("\"{LISTEN}\""), "\"127.0.0.1:18080\""),
            (format!("\"{ADMIN}\""), "\"127.0.0.1:19901\""),
            (format!("//{UPSTREAM}/"), "//127.0.0.1:19100/"),
        ] {
            assert!(DEMO_CONFIG.contains(&old), "the shipped config has {old}");
            assert!(!moved.contains(&old) && moved.contains(new), "{moved}");
        }
    }

    #[test]
    fn the_printed_first_request_is_the_seed_request() {
        let seed: serde_json::Value = serde_json::from_str(portcullis_demo::SEED_REQUEST).unwrap();
        assert!(TRY_IT.contains(&format!("-d '{seed}'")), "{TRY_IT}");
    }
}
