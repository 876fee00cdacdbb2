//! The gateway config loader, on arbitrary TOML text.
//!
//! Properties: no panic; each problem of a refusal names the file and a line and column
//! inside the text (or line 0 for a whole-file problem); parsing is
//! deterministic (the same text gives the same answer twice).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use portcullis::config::GatewayConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The loader reads the files a config names (keys, certificates,
    // policies); keep it away from devices and kernel files.
    if ["/dev", "/proc", "/sys"].iter().any(|p| text.contains(p)) {
        return;
    }
    let path = Path::new("/nonexistent/portcullis-fuzz/gateway.toml");
    let first = GatewayConfig::parse(text, path);
    // Every problem found in the one run must point inside the text.
    for e in first.as_ref().err().into_iter().flatten() {
        portcullis_fuzz::config_error_points_inside(Some(e), "gateway.toml", text);
    }
    let second = GatewayConfig::parse(text, path);
    assert_eq!(
        first.as_ref().err().map(ToString::to_string),
        second.as_ref().err().map(ToString::to_string),
        "the same text gave different answers"
    );
});
