//! `portcullis demo`: the example MCP server (the `portcullis-demo` crate)
//! and a gateway in front of it, configured by the shipped `config/demo.toml`.

/// The example config the demo runs with (also shipped as a file).
pub const DEMO_CONFIG: &str = include_str!("../../config/demo.toml");

/// The curl lines the demo prints after `URL=<the gateway endpoint>`: a POSIX
/// shell fragment that runs as printed (the retry takes the state with jq).
pub const TRY_IT: &str = include_str!("try_it.sh");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_first_request_is_the_seed_request() {
        let seed: serde_json::Value = serde_json::from_str(portcullis_demo::SEED_REQUEST).unwrap();
        assert!(TRY_IT.contains(&format!("-d '{seed}'")), "{TRY_IT}");
    }
}
