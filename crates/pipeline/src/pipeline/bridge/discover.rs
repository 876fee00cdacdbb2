//! What an upstream's `server/discover` says it speaks (`supportedVersions`,
//! which a 2025-11-25-only server does not answer), learnt into the route's
//! `speaks::Speaks`, and `initialize` answered by the gateway for an
//! upstream that speaks only 2026-07-28.

use serde_json::{json, Map, Value};

use crate::model::{Generation, ProtocolVersion};

/// The longest upstream `serverInfo.version` passed to a client.
const MAX_VERSION_LEN: usize = 64;

/// Where a 2026-07-28 server names itself.
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// What a `server/discover` answer says the upstream speaks: `None` when it
/// is no discovery result (no `supportedVersions` naming a 2026-07-28
/// version: an older server answering whatever it is asked), else whether
/// it lists a 2025-11-25-generation version too.
pub(super) fn lists_sessions(discovered: &Value) -> Option<bool> {
    let versions = discovered.get("supportedVersions")?.as_array()?;
    let generations: Vec<Generation> = versions
        .iter()
        .filter_map(Value::as_str)
        .filter_map(ProtocolVersion::parse)
        .map(ProtocolVersion::generation)
        .collect();
    generations
        .contains(&Generation::Stateless)
        .then(|| generations.contains(&Generation::Sessions))
}

/// The `initialize` result for a bridged session: the version the client
/// asked for (when it is one of 2025-11-25's generation), the upstream's
/// capabilities less what needs a stream of server messages (2026-07-28
/// has none outside a call), its instructions as the gateway checked them,
/// and the upstream's configured name.
pub(super) fn initialize_result(discovered: &Value, requested: Option<&str>, name: &str) -> Value {
    let version = requested
        .and_then(ProtocolVersion::parse)
        .filter(|v| v.generation() == Generation::Sessions)
        .unwrap_or(ProtocolVersion::V2025_11_25);
    let version_of_server = server_version(
        discovered
            .get("_meta")
            .and_then(|m| m.get(SERVER_INFO_KEY))
            .and_then(|i| i.get("version")),
    );
    let mut result = Map::new();
    result.insert("protocolVersion".into(), version.as_str().into());
    result.insert("capabilities".into(), capabilities(discovered));
    result.insert(
        "serverInfo".into(),
        json!({"name": name, "version": version_of_server}),
    );
    if let Some(text) = discovered.get("instructions").and_then(Value::as_str) {
        result.insert("instructions".into(), text.into());
    }
    Value::Object(result)
}

/// A server's own `serverInfo.version`, passed on only when it is a short
/// printable ASCII word (it is the server's text, shown to people).
pub(super) fn server_version(version: Option<&Value>) -> &str {
    version
        .and_then(Value::as_str)
        .filter(|v| v.len() <= MAX_VERSION_LEN && v.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or("unknown")
}

/// A server's `capabilities` as another generation's client gets them:
/// an object (anything else is none), less what needs a stream of server
/// messages outside a call (`listChanged`, `subscribe`), which a bridge
/// does not carry.
pub(super) fn capabilities(described: &Value) -> Value {
    let mut capabilities = described
        .get("capabilities")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (_, cap) in capabilities.iter_mut() {
        if let Value::Object(cap) = cap {
            cap.remove("listChanged");
            cap.remove("subscribe");
        }
    }
    Value::Object(capabilities)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initialize_answer_speaks_the_clients_version_and_names_the_upstream() {
        let discovered = json!({
            "resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 1,
            "cacheScope": "public",
            "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true}},
            "_meta": {SERVER_INFO_KEY: {"name": "I am the bank", "version": "1.2.3"}},
            "instructions": "Use book_room."});
        let r = initialize_result(&discovered, Some("2025-06-18"), "Rooms");
        assert_eq!(r["protocolVersion"], "2025-06-18");
        assert_eq!(
            r["serverInfo"],
            json!({"name": "Rooms", "version": "1.2.3"})
        );
        assert_eq!(r["capabilities"], json!({"tools": {}, "resources": {}}));
        assert_eq!(r["instructions"], "Use book_room.");
        assert!(r.get("resultType").is_none() && r.get("ttlMs").is_none());
        let r = initialize_result(&discovered, Some("2026-07-28"), "Rooms");
        assert_eq!(r["protocolVersion"], "2025-11-25");
        let long = json!({"_meta": {SERVER_INFO_KEY: {"version": "x".repeat(65)}}});
        assert_eq!(
            initialize_result(&long, None, "R")["serverInfo"]["version"],
            "unknown"
        );
        assert_eq!(lists_sessions(&discovered), Some(false));
        let both = json!({"supportedVersions": ["2026-07-28", "2025-11-25"]});
        assert_eq!(lists_sessions(&both), Some(true));
        // An older server that answers any method with its initialize result.
        let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {}});
        assert_eq!(lists_sessions(&initialize), None);
        assert_eq!(
            lists_sessions(&json!({"supportedVersions": ["2025-11-25"]})),
            None
        );
    }
}
