//! The `[tracing]` section: OpenTelemetry traces exported over OTLP/HTTP.
//! Absent means off: no exporter, no per-request span.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::locate::Locator;
use crate::model::ConfigError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTracing {
    /// The collector's OTLP/HTTP traces URL, e.g. `http://127.0.0.1:4318/v1/traces`.
    pub(crate) otlp_endpoint: Spanned<String>,
    /// Share of new traces kept (0.0 to 1.0); a client's sampled flag wins.
    pub(crate) sample_ratio: Option<Spanned<f64>>,
    pub(crate) service_name: Option<Spanned<String>>,
    /// How long finished spans wait before they are sent in a batch.
    pub(crate) export_interval: Option<Spanned<String>>,
    /// How long one export may take.
    pub(crate) export_timeout: Option<Spanned<String>>,
}

/// Where and how the gateway's spans are exported.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    pub endpoint: http::Uri,
    pub sample_ratio: f64,
    pub service_name: String,
    pub export_interval: Duration,
    pub export_timeout: Duration,
}

pub(super) fn trace_settings(
    raw: Option<&Spanned<RawTracing>>,
    loc: &Locator<'_>,
) -> Result<Option<TraceSettings>, ConfigError> {
    let Some(raw) = raw.map(Spanned::get_ref) else {
        return Ok(None);
    };
    let endpoint = endpoint(&raw.otlp_endpoint, loc)?;
    let sample_ratio = match &raw.sample_ratio {
        None => 1.0,
        Some(r) if (0.0..=1.0).contains(r.get_ref()) => *r.get_ref(),
        Some(r) => {
            return Err(loc.at(
                r.span(),
                "tracing.sample_ratio",
                "must be a number from 0.0 (keep no new trace) to 1.0 (keep every trace)",
            ))
        }
    };
    let service_name = match &raw.service_name {
        None => "portcullis".to_owned(),
        Some(n) if n.get_ref().trim().is_empty() => {
            return Err(loc.at(n.span(), "tracing.service_name", "must not be empty"))
        }
        Some(n) => n.get_ref().trim().to_owned(),
    };
    let export_interval = loc.duration(
        &raw.export_interval,
        "tracing.export_interval",
        Duration::from_secs(5),
    )?;
    let export_timeout = loc.duration(
        &raw.export_timeout,
        "tracing.export_timeout",
        Duration::from_secs(10),
    )?;
    Ok(Some(TraceSettings {
        endpoint,
        sample_ratio,
        service_name,
        export_interval,
        export_timeout,
    }))
}

fn endpoint(raw: &Spanned<String>, loc: &Locator<'_>) -> Result<http::Uri, ConfigError> {
    let field = "tracing.otlp_endpoint";
    let bad = |why: &str| {
        loc.at(
            raw.span(),
            field,
            format!("{why}; write the collector's OTLP/HTTP traces URL, e.g. \"http://127.0.0.1:4318/v1/traces\""),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(section: &str) -> Result<Option<TraceSettings>, ConfigError> {
        #[derive(Deserialize)]
        struct Doc {
            tracing: Option<Spanned<RawTracing>>,
        }
        let doc: Doc = toml::from_str(section).expect("valid toml");
        let loc = Locator {
            file: "t.toml",
            text: section,
        };
        trace_settings(doc.tracing.as_ref(), &loc)
    }

    #[test]
    fn absent_is_off_and_defaults_fill_in() {
        assert_eq!(read("").unwrap(), None);
        let s = read("[tracing]\notlp_endpoint = \"http://127.0.0.1:4318/v1/traces\"")
            .unwrap()
            .unwrap();
        assert_eq!(s.sample_ratio, 1.0);
        assert_eq!(s.service_name, "portcullis");
        assert_eq!(s.export_interval, Duration::from_secs(5));
        assert_eq!(s.endpoint.path(), "/v1/traces");
    }

    #[test]
    fn bad_values_name_their_field() {
        for (section, field) in [
            (
                "otlp_endpoint = \"127.0.0.1:4318\"",
                "tracing.otlp_endpoint",
            ),
            (
                "otlp_endpoint = \"ftp://x/v1/traces\"",
                "tracing.otlp_endpoint",
            ),
            ("otlp_endpoint = \"not a url\"", "tracing.otlp_endpoint"),
            (
                "otlp_endpoint = \"http://h/v1/traces\"\nsample_ratio = 1.5",
                "tracing.sample_ratio",
            ),
            (
                "otlp_endpoint = \"http://h/v1/traces\"\nsample_ratio = -0.1",
                "tracing.sample_ratio",
            ),
            (
                "otlp_endpoint = \"http://h/v1/traces\"\nsample_ratio = nan",
                "tracing.sample_ratio",
            ),
            (
                "otlp_endpoint = \"http://h/v1/traces\"\nservice_name = \" \"",
                "tracing.service_name",
            ),
            (
                "otlp_endpoint = \"http://h/v1/traces\"\nexport_interval = \"0s\"",
                "tracing.export_interval",
            ),
        ] {
            let e = read(&format!("[tracing]\n{section}")).unwrap_err();
            assert_eq!(e.field, field, "{section}");
            assert!(e.line >= 2, "{section}: located at line {}", e.line);
        }
    }
}
