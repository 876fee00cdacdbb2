//! `[state]`, `[limits]` and `[log]`: the MRTR boundary's keys and limits,
//! the connection and message limits, and logging.

use std::path::Path;
use std::time::Duration;

use super::locate::{resolve, Locator};
use super::problems::Problems;
use super::raw::{RawLimits, RawLog, RawState};
use crate::model::ConfigError;
use crate::mrtr::seal::StateKeys;
use crate::mrtr::settings::{ReplayBackend, StateSettings};

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_request_body_bytes: usize,
    /// The most the gateway holds of one response message (a JSON body or one
    /// SSE event) to inspect it. Larger is refused, never truncated.
    pub max_response_body_bytes: usize,
    pub max_header_bytes: usize,
    pub header_read_timeout: Duration,
    pub request_body_timeout: Duration,
    pub max_connections: usize,
    pub http2_max_concurrent_streams: u32,
    /// Requests handled at once; more are answered 503 `overloaded`.
    pub max_in_flight_requests: usize,
    /// From request head to response head, whatever the phase.
    pub request_timeout: Duration,
    /// Where upstream messages are inspected (`pipeline::heavy`).
    pub inspection: InspectionLimits,
}

/// An upstream message (a JSON body or one SSE event) up to `inline_bytes`
/// is inspected on the runtime worker that read it; a larger one on the
/// blocking threads, at most `per_upstream` of one upstream's at once and
/// `queue` more of its waiting, so no upstream's answers can take the
/// workers, or all the inspection capacity, from the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InspectionLimits {
    pub inline_bytes: usize,
    pub per_upstream: usize,
    pub queue: usize,
}

impl Default for InspectionLimits {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        InspectionLimits {
            inline_bytes: 16 << 10,
            per_upstream: (cpus / 2).max(1),
            queue: 128,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_body_bytes: 1 << 20,
            max_response_body_bytes: 8 << 20,
            max_header_bytes: 16 << 10,
            header_read_timeout: Duration::from_secs(10),
            request_body_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            http2_max_concurrent_streams: 256,
            max_in_flight_requests: 10_000,
            request_timeout: Duration::from_secs(120),
            inspection: InspectionLimits::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// The `[log] format` a config text declares, read even when the rest
    /// of the file has problems (so start-up errors come in that format).
    pub fn declared_in(text: &str) -> Option<LogFormat> {
        let table: toml::Table = toml::from_str(text).ok()?;
        match table.get("log")?.get("format")?.as_str()? {
            "json" => Some(LogFormat::Json),
            "text" => Some(LogFormat::Text),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    pub format: LogFormat,
    pub level: String,
    /// One JSON (or text) line per request, target `portcullis::access`.
    pub access: bool,
}

pub(super) fn limits(raw: &RawLimits, loc: &Locator<'_>, p: &mut Problems) -> Limits {
    let d = Limits::default();
    let max_header_bytes = p.or(
        loc.positive(
            &raw.max_header_bytes,
            "limits.max_header_bytes",
            d.max_header_bytes,
        ),
        d.max_header_bytes,
    );
    if max_header_bytes < 8192 {
        let span = raw
            .max_header_bytes
            .as_ref()
            .map(|s| s.span())
            .unwrap_or(0..0);
        p.push(loc.at(
            span,
            "limits.max_header_bytes",
            "must be at least 8192 (HTTP/1.1 needs room for the request line and headers)",
        ));
    }
    let mut count = |raw: &Option<toml::Spanned<i64>>, field: &str, default: usize| {
        p.or(loc.positive(raw, field, default), default)
    };
    let streams = count(
        &raw.http2_max_concurrent_streams,
        "limits.http2_max_concurrent_streams",
        d.http2_max_concurrent_streams as usize,
    );
    let max_request_body_bytes = count(
        &raw.max_request_body_bytes,
        "limits.max_request_body_bytes",
        d.max_request_body_bytes,
    );
    let max_response_body_bytes = count(
        &raw.max_response_body_bytes,
        "limits.max_response_body_bytes",
        d.max_response_body_bytes,
    );
    let max_connections = count(
        &raw.max_connections,
        "limits.max_connections",
        d.max_connections,
    );
    let max_in_flight_requests = count(
        &raw.max_in_flight_requests,
        "limits.max_in_flight_requests",
        d.max_in_flight_requests,
    );
    let di = d.inspection;
    let inspection = InspectionLimits {
        inline_bytes: count(
            &raw.inline_inspection_bytes,
            "limits.inline_inspection_bytes",
            di.inline_bytes,
        ),
        per_upstream: count(
            &raw.heavy_inspections_per_upstream,
            "limits.heavy_inspections_per_upstream",
            di.per_upstream,
        ),
        queue: p.or(
            loc.whole(
                &raw.heavy_inspection_queue,
                "limits.heavy_inspection_queue",
                di.queue,
            ),
            di.queue,
        ),
    };
    let mut time = |raw: &Option<toml::Spanned<String>>, field: &str, default: Duration| {
        p.or(loc.duration(raw, field, default), default)
    };
    Limits {
        max_request_body_bytes,
        max_response_body_bytes,
        max_header_bytes,
        header_read_timeout: time(
            &raw.header_read_timeout,
            "limits.header_read_timeout",
            d.header_read_timeout,
        ),
        request_body_timeout: time(
            &raw.request_body_timeout,
            "limits.request_body_timeout",
            d.request_body_timeout,
        ),
        max_connections,
        http2_max_concurrent_streams: u32::try_from(streams).unwrap_or(u32::MAX),
        max_in_flight_requests,
        request_timeout: time(
            &raw.request_timeout,
            "limits.request_timeout",
            d.request_timeout,
        ),
        inspection,
    }
}

fn state_keys(raw: &RawState, loc: &Locator<'_>, base: &Path) -> Result<StateKeys, ConfigError> {
    match (&raw.keys_file, &raw.keys_env) {
        (Some(_), Some(env)) => Err(loc.at(
            env.span(),
            "state.keys_env",
            "give keys_file or keys_env, not both",
        )),
        (Some(file), None) => StateKeys::from_file(&resolve(base, file.get_ref()))
            .map_err(|e| loc.at(file.span(), "state.keys_file", e.to_string())),
        (None, Some(env)) => StateKeys::from_env(env.get_ref())
            .map_err(|e| loc.at(env.span(), "state.keys_env", e.to_string())),
        (None, None) => Ok(StateKeys::generate()),
    }
}

fn replay_backend(raw: &RawState, loc: &Locator<'_>) -> Result<ReplayBackend, ConfigError> {
    let backend = raw
        .single_use_backend
        .as_ref()
        .map(|b| (b.get_ref().as_str(), b.span()));
    match backend {
        None | Some(("local", _)) => Ok(ReplayBackend::Local),
        Some(("redis", span)) => match &raw.redis_url {
            Some(url)
                if url.get_ref().starts_with("redis://")
                    || url.get_ref().starts_with("rediss://") =>
            {
                Ok(ReplayBackend::Redis(url.get_ref().clone()))
            }
            Some(url) => Err(loc.at(url.span(), "state.redis_url", "a redis:// or rediss:// URL")),
            None => Err(loc.at(
                span,
                "state.redis_url",
                "single_use_backend = \"redis\" needs redis_url",
            )),
        },
        Some((other, span)) => Err(loc.at(
            span,
            "state.single_use_backend",
            format!("\"{other}\" is not one of local, redis"),
        )),
    }
}

pub(super) fn state_config(
    raw: &RawState,
    loc: &Locator<'_>,
    base: &Path,
    p: &mut Problems,
) -> Option<StateSettings> {
    let keys = p.take(state_keys(raw, loc, base));
    let replay = p.take(replay_backend(raw, loc));
    let rounds = p.or(loc.positive(&raw.max_rounds, "state.max_rounds", 10), 10);
    let max_client_state_bytes = p.or(
        loc.positive(
            &raw.max_client_state_bytes,
            "state.max_client_state_bytes",
            32 << 10,
        ),
        32 << 10,
    );
    let max_answer_bytes = p.or(
        loc.positive(&raw.max_answer_bytes, "state.max_answer_bytes", 64 << 10),
        64 << 10,
    );
    let ten_minutes = Duration::from_secs(600);
    let round_timeout = p.or(
        loc.duration(&raw.round_timeout, "state.round_timeout", ten_minutes),
        ten_minutes,
    );
    let max_operation_time = p.or(
        loc.duration(
            &raw.max_operation_time,
            "state.max_operation_time",
            ten_minutes,
        ),
        ten_minutes,
    );
    let day = Duration::from_secs(24 * 3600);
    let session_lifetime = p.or(
        loc.duration(&raw.session_lifetime, "state.session_lifetime", day),
        day,
    );
    let push_timeout = p.or(
        loc.duration(&raw.push_timeout, "state.push_timeout", round_timeout),
        round_timeout,
    );
    Some(StateSettings {
        keys: keys?,
        max_client_state_bytes,
        round_timeout,
        max_rounds: u32::try_from(rounds).unwrap_or(u32::MAX),
        max_operation_time,
        max_answer_bytes: max_answer_bytes as u64,
        allow_secret_values: raw.allow_secret_values.unwrap_or(false),
        replay: replay?,
        session_lifetime,
        push_timeout,
    })
}

pub(super) fn log_config(raw: &RawLog, loc: &Locator<'_>) -> Result<LogConfig, ConfigError> {
    let format = match &raw.format {
        None => LogFormat::Text,
        Some(f) => match f.get_ref().as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(loc.at(
                    f.span(),
                    "log.format",
                    format!("\"{other}\" is not one of \"text\", \"json\""),
                ))
            }
        },
    };
    let level = match &raw.level {
        None => "info".to_owned(),
        Some(l) => {
            let v = l.get_ref().clone();
            if v.parse::<tracing_subscriber::EnvFilter>().is_err() {
                return Err(loc.at(
                    l.span(),
                    "log.level",
                    format!(
                        "\"{v}\" is not a level or filter such as \"info\" or \"portcullis=debug\""
                    ),
                ));
            }
            v
        }
    };
    let access = raw.access.as_ref().is_some_and(|a| *a.get_ref());
    Ok(LogConfig {
        format,
        level,
        access,
    })
}
