//! `[runtime]`: how the data plane's threads are laid out. Fixed at start.

use serde::Deserialize;
use toml::Spanned;

use super::locate::Locator;
use crate::model::ConfigError;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRuntime {
    pub(crate) model: Option<Spanned<String>>,
    pub(crate) workers: Option<Spanned<i64>>,
}

/// How connections are spread over threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeModel {
    /// One multi-threaded runtime whose workers steal each other's tasks
    /// (`TOKIO_WORKER_THREADS` of them, default one per CPU).
    Shared,
    /// The default: `workers` threads (one per CPU unless set), each with a single-threaded runtime and its own
    /// `SO_REUSEPORT` socket on every listener (the kernel spreads new
    /// connections over them), and its own idle upstream connections: a
    /// connection and all its requests stay on one thread (nginx's and
    /// pingora's model). Admin, reloads and background work stay on the
    /// shared runtime.
    PerCore { workers: usize },
}

impl Default for RuntimeModel {
    /// `per_core` with one worker per CPU: at two workers it served 1.19×
    /// the shared runtime's requests at 0.93× its CPU per request
    /// (docs/src/dev/performance.md).
    fn default() -> Self {
        RuntimeModel::PerCore { workers: cpus() }
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

impl RuntimeModel {
    const NAMES: &'static str = "\"shared\", \"per_core\"";

    /// How many idle lists an upstream pool keeps: one per worker thread,
    /// plus one for the shared runtime (its own traffic, and all of it in
    /// the shared model). A connection is used only by the runtime that
    /// dialed it: its socket is registered with that runtime's reactor.
    pub fn pool_slots(self) -> usize {
        match self {
            RuntimeModel::Shared => 1,
            RuntimeModel::PerCore { workers } => workers + 1,
        }
    }
}

pub(super) fn runtime(raw: &RawRuntime, loc: &Locator<'_>) -> Result<RuntimeModel, ConfigError> {
    let model = raw.model.as_ref().map(|m| (m.get_ref().as_str(), m.span()));
    match (model, &raw.workers) {
        (Some(("shared", _)), None) => Ok(RuntimeModel::Shared),
        (Some(("shared", _)), Some(w)) => Err(loc.at(
            w.span(),
            "runtime.workers",
            "workers applies to model = \"per_core\"; the shared runtime's size is \
             TOKIO_WORKER_THREADS (default: one per CPU)",
        )),
        (None | Some(("per_core", _)), workers) => {
            let workers = match workers {
                None => cpus(),
                Some(w) => match usize::try_from(*w.get_ref()) {
                    Ok(n @ 1..=1024) => n,
                    _ => {
                        return Err(loc.at(
                            w.span(),
                            "runtime.workers",
                            format!("{} is not between 1 and 1024", w.get_ref()),
                        ))
                    }
                },
            };
            Ok(RuntimeModel::PerCore { workers })
        }
        (Some((other, span)), _) => Err(loc.at(
            span,
            "runtime.model",
            format!("\"{other}\" is not one of {}", RuntimeModel::NAMES),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::GatewayConfig;

    fn parse(runtime: &str) -> Result<GatewayConfig, String> {
        let text = format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n[runtime]\n{runtime}\n\
             [[upstream]]\nid = \"a\"\nname = \"A\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
             [[route]]\npath = \"/mcp\"\nupstream = \"a\"\n"
        );
        GatewayConfig::parse(&text, Path::new("g.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn the_model_and_its_workers_are_checked() {
        assert_eq!(parse("").unwrap().runtime, RuntimeModel::default());
        assert!(matches!(
            parse("").unwrap().runtime,
            RuntimeModel::PerCore { workers: 1.. }
        ));
        assert_eq!(
            parse("workers = 2").unwrap().runtime,
            RuntimeModel::PerCore { workers: 2 }
        );
        assert_eq!(
            parse("model = \"shared\"").unwrap().runtime,
            RuntimeModel::Shared
        );
        assert_eq!(
            parse("model = \"per_core\"\nworkers = 3").unwrap().runtime,
            RuntimeModel::PerCore { workers: 3 }
        );
        assert!(matches!(
            parse("model = \"per_core\"").unwrap().runtime,
            RuntimeModel::PerCore { workers: 1.. }
        ));
        for (bad, says) in [
            (
                "model = \"threads\"",
                "is not one of \"shared\", \"per_core\"",
            ),
            (
                "model = \"per_core\"\nworkers = 0",
                "is not between 1 and 1024",
            ),
            (
                "model = \"shared\"\nworkers = 2",
                "applies to model = \"per_core\"",
            ),
            ("speed = 3", "speed"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
