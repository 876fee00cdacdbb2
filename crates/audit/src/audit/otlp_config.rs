//! `[audit.otlp]`: audit events as OpenTelemetry log records, sent over
//! OTLP/HTTP to a collector (by default the one `[tracing]` sends spans to)
//! beside the stdout or file trail. Absent means off.

use std::ops::Range;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// The one settings error ([`super::AuditConfigError`]).
type AuditConfigError = crate::model::SettingsError;

const SECTION: &str = "audit.otlp";

/// Records queued for export before new ones are dropped (and counted).
pub(super) const DEFAULT_MAX_QUEUE: usize = 2048;
/// A queue this small would drop whole bursts of one operation's events.
const MIN_MAX_QUEUE: i64 = 16;
const MAX_MAX_QUEUE: i64 = 1_000_000;
/// Audit events should reach the collector soon after they happen.
const DEFAULT_EXPORT_INTERVAL: Duration = Duration::from_secs(1);
const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The `[audit.otlp]` table exactly as written.
///
/// ```toml
/// [audit.otlp]
/// endpoint = "http://127.0.0.1:4318/v1/logs"  # default: [tracing]'s collector, path /v1/logs
/// export_interval = "1s"                      # how long records wait to go out in a batch
/// export_timeout = "10s"                      # how long one export may take
/// max_queue = 2048                            # records waiting; more are dropped and counted
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuditOtlp {
    pub(crate) endpoint: Option<Spanned<String>>,
    pub(crate) export_interval: Option<Spanned<String>>,
    pub(crate) export_timeout: Option<Spanned<String>>,
    pub(crate) max_queue: Option<Spanned<i64>>,
}

/// The collector `[tracing]` exports spans to, as validated there: the
/// default destination of the audit log records and their service name.
#[derive(Debug, Clone, Copy)]
pub struct TracesCollector<'a> {
    pub endpoint: &'a http::Uri,
    pub service_name: &'a str,
}

/// Where and how audit log records are exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpLogSettings {
    /// The collector's OTLP/HTTP logs URL.
    pub endpoint: http::Uri,
    /// `service.name` of the records' resource: `[tracing]`'s when it is
    /// configured (spans and records of one gateway read as one service).
    pub service_name: String,
    pub export_interval: Duration,
    pub export_timeout: Duration,
    pub max_queue: usize,
}

fn err(span: Range<usize>, name: &str, message: impl Into<String>) -> AuditConfigError {
    AuditConfigError {
        span,
        field: format!("{SECTION}.{name}"),
        message: message.into(),
    }
}

impl OtlpLogSettings {
    pub(super) fn from_raw(
        spanned: &Spanned<RawAuditOtlp>,
        traces: Option<TracesCollector<'_>>,
    ) -> Result<OtlpLogSettings, AuditConfigError> {
        let raw = spanned.get_ref();
        let endpoint = match &raw.endpoint {
            Some(e) => endpoint(e)?,
            None => from_traces(traces, spanned.span())?,
        };
        let max_queue = match &raw.max_queue {
            None => DEFAULT_MAX_QUEUE,
            Some(v) => usize::try_from(*v.get_ref())
                .ok()
                .filter(|_| (MIN_MAX_QUEUE..=MAX_MAX_QUEUE).contains(v.get_ref()))
                .ok_or_else(|| {
                    err(
                        v.span(),
                        "max_queue",
                        format!("must be between {MIN_MAX_QUEUE} and {MAX_MAX_QUEUE} records"),
                    )
                })?,
        };
        Ok(OtlpLogSettings {
            endpoint,
            service_name: traces.map_or("portcullis", |t| t.service_name).to_owned(),
            export_interval: duration(
                &raw.export_interval,
                "export_interval",
                DEFAULT_EXPORT_INTERVAL,
            )?,
            export_timeout: duration(
                &raw.export_timeout,
                "export_timeout",
                DEFAULT_EXPORT_TIMEOUT,
            )?,
            max_queue,
        })
    }
}

/// `[tracing]`'s collector, at the OTLP logs path: its traces URL with the
/// final `/v1/traces` replaced by `/v1/logs` (the OTLP/HTTP signal paths).
/// Any other traces path is a custom route nothing can be derived from.
fn from_traces(
    traces: Option<TracesCollector<'_>>,
    table: Range<usize>,
) -> Result<http::Uri, AuditConfigError> {
    let Some(traces) = traces else {
        return Err(err(
            table,
            "endpoint",
            "no [tracing] collector to send audit records to; write endpoint = \"http://127.0.0.1:4318/v1/logs\" or configure [tracing]",
        ));
    };
    let uri = traces.endpoint;
    let Some(base) = uri.path().strip_suffix("/v1/traces") else {
        return Err(err(
            table,
            "endpoint",
            format!(
                "tracing.otlp_endpoint's path {} does not end in /v1/traces, so the logs URL cannot be derived from it; write endpoint = the collector's OTLP/HTTP logs URL",
                uri.path()
            ),
        ));
    };
    let path = format!("{base}/v1/logs");
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(
        match uri.query() {
            Some(q) => format!("{path}?{q}"),
            None => path,
        }
        .parse()
        .map_err(|_| err(table.clone(), "endpoint", "cannot derive the logs URL"))?,
    );
    http::Uri::from_parts(parts).map_err(|_| err(table, "endpoint", "cannot derive the logs URL"))
}

fn endpoint(raw: &Spanned<String>) -> Result<http::Uri, AuditConfigError> {
    let bad = |why: &str| {
        err(
            raw.span(),
            "endpoint",
            format!("{why}; write the collector's OTLP/HTTP logs URL, e.g. \"http://127.0.0.1:4318/v1/logs\""),
        )
    };
    let uri: http::Uri = raw.get_ref().trim().parse().map_err(|_| bad("not a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad("must start with http:// or https://")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    Ok(uri)
}

fn duration(
    raw: &Option<Spanned<String>>,
    name: &str,
    default: Duration,
) -> Result<Duration, AuditConfigError> {
    let Some(raw) = raw else { return Ok(default) };
    let d = humantime::parse_duration(raw.get_ref().trim()).map_err(|e| {
        err(
            raw.span(),
            name,
            format!("not a duration ({e}); write e.g. \"500ms\", \"10s\""),
        )
    })?;
    if d.is_zero() {
        return Err(err(raw.span(), name, "must be greater than zero"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(table: &str, traces: Option<&str>) -> Result<OtlpLogSettings, AuditConfigError> {
        #[derive(Deserialize)]
        struct Doc {
            otlp: Spanned<RawAuditOtlp>,
        }
        let doc: Doc = toml::from_str(&format!("[otlp]\n{table}")).expect("valid toml");
        let uri = traces.map(|t| t.parse::<http::Uri>().unwrap());
        let traces = uri.as_ref().map(|endpoint| TracesCollector {
            endpoint,
            service_name: "edge-gw",
        });
        OtlpLogSettings::from_raw(&doc.otlp, traces)
    }

    #[test]
    fn the_default_is_the_traces_collector_at_the_logs_path() {
        let s = read("", Some("https://collector.example:4318/v1/traces")).unwrap();
        assert_eq!(s.endpoint, "https://collector.example:4318/v1/logs");
        assert_eq!(s.service_name, "edge-gw");
        assert_eq!(s.max_queue, DEFAULT_MAX_QUEUE);
        assert_eq!(s.export_interval, DEFAULT_EXPORT_INTERVAL);
        let s = read("", Some("http://c/otel/v1/traces?tenant=a")).unwrap();
        assert_eq!(s.endpoint, "http://c/otel/v1/logs?tenant=a");
    }

    #[test]
    fn an_endpoint_of_its_own_needs_no_tracing() {
        let s = read("endpoint = \"http://127.0.0.1:4318/v1/logs\"", None).unwrap();
        assert_eq!(s.endpoint, "http://127.0.0.1:4318/v1/logs");
        assert_eq!(s.service_name, "portcullis");
        let s = read(
            "endpoint = \"http://logs.example/ingest\"\nmax_queue = 64\nexport_interval = \"250ms\"",
            Some("http://c/v1/traces"),
        )
        .unwrap();
        assert_eq!(s.endpoint, "http://logs.example/ingest");
        assert_eq!(s.max_queue, 64);
        assert_eq!(s.export_interval, Duration::from_millis(250));
    }

    #[test]
    fn what_cannot_work_is_named() {
        for (table, traces, field) in [
            ("", None, "audit.otlp.endpoint"),
            ("", Some("http://c/custom"), "audit.otlp.endpoint"),
            ("endpoint = \"127.0.0.1:4318\"", None, "audit.otlp.endpoint"),
            (
                "endpoint = \"ftp://c/v1/logs\"",
                None,
                "audit.otlp.endpoint",
            ),
            (
                "max_queue = 0",
                Some("http://c/v1/traces"),
                "audit.otlp.max_queue",
            ),
            (
                "max_queue = -5",
                Some("http://c/v1/traces"),
                "audit.otlp.max_queue",
            ),
            (
                "export_interval = \"0s\"",
                Some("http://c/v1/traces"),
                "audit.otlp.export_interval",
            ),
            (
                "export_timeout = \"soon\"",
                Some("http://c/v1/traces"),
                "audit.otlp.export_timeout",
            ),
        ] {
            let e = read(table, traces).unwrap_err();
            assert_eq!(e.field, field, "{table} with {traces:?}: {e:?}");
        }
    }
}
