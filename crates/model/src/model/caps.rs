//! What a client declared it can do: `_meta["io.modelcontextprotocol/clientCapabilities"]`
//! on a 2026-07-28 request, or `params.capabilities` of a 2025-11-25 `initialize`.

use serde::de::IgnoredAny;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCaps {
    pub elicitation_form: bool,
    pub elicitation_url: bool,
    pub sampling: bool,
    pub sampling_context: bool,
    pub roots: bool,
    /// The Tasks extension (`extensions["io.modelcontextprotocol/tasks"]`):
    /// a server may answer a tools/call with a task only then.
    pub tasks: bool,
}

/// The Tasks extension's identifier (SEP-2663), in capabilities.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The capabilities object as written; members the gateway does not police
/// are skipped.
#[derive(Deserialize, Default)]
pub(crate) struct RawCaps {
    #[serde(default)]
    elicitation: Option<RawElicitation>,
    #[serde(default)]
    sampling: Option<RawSampling>,
    #[serde(default)]
    roots: Option<IgnoredAny>,
    #[serde(default)]
    extensions: Option<RawExtensions>,
}

#[derive(Deserialize)]
struct RawExtensions {
    // Must equal TASKS_EXTENSION (serde needs the literal; a test compares).
    #[serde(default, rename = "io.modelcontextprotocol/tasks")]
    tasks: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct RawElicitation {
    #[serde(default)]
    form: Option<IgnoredAny>,
    #[serde(default)]
    url: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct RawSampling {
    #[serde(default)]
    context: Option<IgnoredAny>,
}

impl From<RawCaps> for ClientCaps {
    fn from(c: RawCaps) -> ClientCaps {
        let (form, url) = match &c.elicitation {
            None => (false, false),
            // `elicitation: {}` means form only (2025-11-25 compatibility).
            Some(e) if e.form.is_none() && e.url.is_none() => (true, false),
            Some(e) => (e.form.is_some(), e.url.is_some()),
        };
        ClientCaps {
            elicitation_form: form,
            elicitation_url: url,
            sampling: c.sampling.is_some(),
            sampling_context: c.sampling.as_ref().is_some_and(|s| s.context.is_some()),
            roots: c.roots.is_some(),
            tasks: c.extensions.is_some_and(|e| e.tasks.is_some()),
        }
    }
}

impl ClientCaps {
    /// The capabilities object that declares exactly these (what a bridged
    /// 2025-11-25 session declared, sent with each 2026-07-28 request).
    pub fn to_value(self) -> serde_json::Value {
        let mut caps = serde_json::Map::new();
        let empty = || serde_json::Value::Object(serde_json::Map::new());
        let mut elicitation = serde_json::Map::new();
        if self.elicitation_form {
            elicitation.insert("form".into(), empty());
        }
        if self.elicitation_url {
            elicitation.insert("url".into(), empty());
        }
        if !elicitation.is_empty() {
            caps.insert("elicitation".into(), elicitation.into());
        }
        if self.sampling {
            let mut sampling = serde_json::Map::new();
            if self.sampling_context {
                sampling.insert("context".into(), empty());
            }
            caps.insert("sampling".into(), sampling.into());
        }
        if self.roots {
            caps.insert("roots".into(), empty());
        }
        if self.tasks {
            let mut ext = serde_json::Map::new();
            ext.insert(TASKS_EXTENSION.into(), empty());
            caps.insert("extensions".into(), ext.into());
        }
        caps.into()
    }

    /// Read a capabilities object; anything unreadable declares nothing.
    pub fn parse(raw: &str) -> ClientCaps {
        serde_json::from_str::<RawCaps>(raw)
            .map(ClientCaps::from)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_elicitation_means_form_only() {
        let c = ClientCaps::parse(r#"{"elicitation":{}}"#);
        assert!(c.elicitation_form && !c.elicitation_url);
        let c =
            ClientCaps::parse(r#"{"elicitation":{"url":{}},"sampling":{"context":{}},"roots":{}}"#);
        assert!(!c.elicitation_form && c.elicitation_url && c.sampling_context && c.roots);
        assert_eq!(ClientCaps::parse("[]"), ClientCaps::default());
    }

    #[test]
    fn what_is_written_reads_back_the_same() {
        for bits in 0u8..64 {
            let caps = ClientCaps {
                elicitation_form: bits & 1 != 0,
                elicitation_url: bits & 2 != 0,
                sampling: bits & 4 != 0,
                sampling_context: bits & 12 == 12,
                roots: bits & 16 != 0,
                tasks: bits & 32 != 0,
            };
            let read = ClientCaps::parse(&caps.to_value().to_string());
            // `elicitation: {}` (neither mode) is never written.
            assert_eq!(read, caps, "{}", caps.to_value());
        }
    }

    #[test]
    fn the_tasks_extension_is_read_under_its_identifier() {
        let raw = format!(r#"{{"extensions":{{"{TASKS_EXTENSION}":{{}}}}}}"#);
        assert!(ClientCaps::parse(&raw).tasks);
        assert!(!ClientCaps::parse(r#"{"extensions":{"io.modelcontextprotocol/task":{}}}"#).tasks);
        assert!(!ClientCaps::parse(r#"{"tasks":{}}"#).tasks);
    }
}
