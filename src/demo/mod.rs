//! `portcullis demo`: the built-in example MCP server and a gateway in front
//! of it, configured by the shipped `config/demo.toml`.

pub mod upstream;

/// The example config the demo runs with (also shipped as a file).
pub const DEMO_CONFIG: &str = include_str!("../../config/demo.toml");
