//! `[rate_limits]`: the raw serde types (as written, with spans) and their
//! validation into typed settings. Everything is checked here, before any
//! I/O, so that a bad file is refused with a line number at load time.

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::Scope;

/// The `[rate_limits]` table exactly as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRateLimits {
    pub(crate) per_principal: Option<Spanned<RawRate>>,
    pub(crate) per_principal_upstream: Option<Spanned<RawRate>>,
    pub(crate) per_principal_tool: Option<Spanned<RawRate>>,
    pub(crate) input_required_rounds: Option<Spanned<RawRate>>,
    pub(crate) max_keys: Option<Spanned<i64>>,
    pub(crate) backend: Option<Spanned<String>>,
    pub(crate) redis_url: Option<Spanned<String>>,
    pub(crate) redis_failure: Option<Spanned<String>>,
    pub(crate) redis_timeout: Option<Spanned<String>>,
    pub(crate) key_prefix: Option<Spanned<String>>,
}

/// One limit: `{ rate = "100/s", burst = 200 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRate {
    pub(crate) rate: Spanned<String>,
    pub(crate) burst: Option<Spanned<i64>>,
}

/// A problem in `[rate_limits]`, pinned to the byte span of the offending
/// value so that the config loader can print `file:line:column` (the one
/// settings error).
pub(crate) type RateConfigError = crate::model::SettingsError;

fn err(span: Range<usize>, field: &str, message: impl Into<String>) -> RateConfigError {
    RateConfigError {
        span,
        field: field.to_owned(),
        message: message.into(),
    }
}

/// A validated limit: `count` units per `per`, bursts of up to `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rate {
    pub(crate) count: u32,
    pub(crate) per: Duration,
    pub(crate) burst: u32,
}

impl Rate {
    /// The time one unit takes to replenish (the GCRA emission interval).
    pub(crate) fn interval(&self) -> Duration {
        self.per / self.count
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit} (burst {})", self.count, self.burst)
    }
}

/// The shortest emission interval accepted: 1 µs, i.e. at most 1,000,000/s.
/// (The Redis script counts in microseconds.)
const MIN_INTERVAL: Duration = Duration::from_micros(1);

/// Parses `"N/s"`, `"N/m"` or `"N/h"` (also `sec`/`second`, `min`/`minute`,
/// `hour`; spaces around `/` allowed). Returns the count and period.
pub(crate) fn parse_rate(text: &str) -> Result<(u32, Duration), String> {
    const HINT: &str = "write e.g. \"100/s\", \"30/m\" or \"1000/h\"";
    let Some((n, unit)) = text.split_once('/') else {
        return Err(format!("\"{text}\" is not a rate; {HINT}"));
    };
    let n = n.trim();
    let per = match unit.trim() {
        "s" | "sec" | "second" => Duration::from_secs(1),
        "m" | "min" | "minute" => Duration::from_secs(60),
        "h" | "hr" | "hour" => Duration::from_secs(3600),
        other => {
            return Err(format!(
                "unknown unit \"{other}\" in \"{text}\"; use s, m or h ({HINT})"
            ))
        }
    };
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "\"{n}\" is not a whole number of requests in \"{text}\"; {HINT}"
        ));
    }
    let count: u32 = n
        .parse()
        .map_err(|_| format!("{n} is too large (at most {})", u32::MAX))?;
    if count == 0 {
        return Err(
            "a rate of zero would refuse everything; remove the limit to make it unlimited, \
             or give a positive rate"
                .to_owned(),
        );
    }
    if per / count < MIN_INTERVAL {
        return Err(format!(
            "\"{text}\" is too fast to enforce (at most 1000000/s)"
        ));
    }
    Ok((count, per))
}

/// What to do when Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedisFailure {
    /// Answer from this instance's own (local) limiters.
    Local,
    /// Refuse the request: `ThrottleError::Unavailable`.
    Refuse,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RedisSettings {
    pub url: String,
    pub(crate) failure: RedisFailure,
    pub timeout: Duration,
    pub key_prefix: String,
}

/// `[rate_limits]` after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ThrottleSettings {
    /// Indexed by `Scope::index()`; `None` = unlimited.
    pub(crate) rates: [Option<Rate>; Scope::COUNT],
    pub(crate) max_keys: usize,
    /// `None`: local backend.
    pub redis: Option<RedisSettings>,
}

pub(crate) const DEFAULT_MAX_KEYS: usize = 100_000;
pub(crate) const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_millis(50);
pub(crate) const DEFAULT_KEY_PREFIX: &str = "portcullis:";

impl Default for ThrottleSettings {
    fn default() -> Self {
        ThrottleSettings {
            rates: [None; Scope::COUNT],
            max_keys: DEFAULT_MAX_KEYS,
            redis: None,
        }
    }
}

const SECTION: &str = "rate_limits";

fn rate(raw: &Option<Spanned<RawRate>>, name: &str) -> Result<Option<Rate>, RateConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let raw = raw.get_ref();
    let field = format!("{SECTION}.{name}.rate");
    let (count, per) =
        parse_rate(raw.rate.get_ref().trim()).map_err(|m| err(raw.rate.span(), &field, m))?;
    let burst = match &raw.burst {
        None => count,
        Some(b) => {
            let field = format!("{SECTION}.{name}.burst");
            let v = *b.get_ref();
            if v < 1 {
                return Err(err(
                    b.span(),
                    &field,
                    "must be at least 1 (the number of requests allowed at once)",
                ));
            }
            u32::try_from(v)
                .map_err(|_| err(b.span(), &field, format!("must be at most {}", u32::MAX)))?
        }
    };
    Ok(Some(Rate { count, per, burst }))
}

fn one_of<'a>(
    raw: &'a Option<Spanned<String>>,
    name: &str,
    allowed: &[&str],
    default: &'a str,
) -> Result<&'a str, RateConfigError> {
    let Some(raw) = raw else { return Ok(default) };
    let v = raw.get_ref().as_str();
    if allowed.contains(&v) {
        Ok(v)
    } else {
        Err(err(
            raw.span(),
            &format!("{SECTION}.{name}"),
            format!(
                "\"{v}\" is not one of {}",
                allowed
                    .iter()
                    .map(|a| format!("\"{a}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }
}

/// Validates `[rate_limits]`. `None` (no section) means no limits.
pub fn validate(raw: Option<&Spanned<RawRateLimits>>) -> Result<ThrottleSettings, RateConfigError> {
    let Some(spanned) = raw else {
        return Ok(ThrottleSettings::default());
    };
    let section_span = spanned.span();
    let raw = spanned.get_ref();
    let mut rates = [None; Scope::COUNT];
    for scope in Scope::ALL {
        let r = match scope {
            Scope::Principal => &raw.per_principal,
            Scope::PrincipalUpstream => &raw.per_principal_upstream,
            Scope::PrincipalTool => &raw.per_principal_tool,
            Scope::InputRequiredRounds => &raw.input_required_rounds,
        };
        rates[scope.index()] = rate(r, scope.config_key())?;
    }

    let max_keys = match &raw.max_keys {
        None => DEFAULT_MAX_KEYS,
        Some(m) => usize::try_from(*m.get_ref())
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| {
                err(
                    m.span(),
                    &format!("{SECTION}.max_keys"),
                    "must be a positive whole number",
                )
            })?,
    };

    let backend = one_of(&raw.backend, "backend", &["local", "redis"], "local")?;
    let failure = match one_of(
        &raw.redis_failure,
        "redis_failure",
        &["local", "refuse"],
        "local",
    )? {
        "refuse" => RedisFailure::Refuse,
        _ => RedisFailure::Local,
    };

    let timeout = match &raw.redis_timeout {
        None => DEFAULT_REDIS_TIMEOUT,
        Some(t) => {
            let field = format!("{SECTION}.redis_timeout");
            let d = humantime::parse_duration(t.get_ref().trim()).map_err(|e| {
                err(
                    t.span(),
                    &field,
                    format!("not a duration ({e}); write e.g. \"50ms\" or \"1s\""),
                )
            })?;
            if d.is_zero() {
                return Err(err(t.span(), &field, "must be greater than zero"));
            }
            if d > Duration::from_secs(60) {
                return Err(err(
                    t.span(),
                    &field,
                    "must be at most 60s (every rate-limited request may wait this long)",
                ));
            }
            d
        }
    };

    // The URL is checked whenever it is given, even with the local backend,
    // so that switching the backend later does not reveal an old mistake.
    let url = match &raw.redis_url {
        None => None,
        Some(u) => {
            let field = format!("{SECTION}.redis_url");
            let text = u.get_ref().trim();
            if !(text.starts_with("redis://")
                || text.starts_with("rediss://")
                || text.starts_with("redis+unix://")
                || text.starts_with("unix://"))
            {
                return Err(err(
                    u.span(),
                    &field,
                    format!(
                        "\"{text}\" is not a Redis URL; write e.g. \"redis://127.0.0.1:6379/0\""
                    ),
                ));
            }
            redis::Client::open(text)
                .map_err(|e| err(u.span(), &field, format!("not a usable Redis URL: {e}")))?;
            Some(text.to_owned())
        }
    };

    let key_prefix = match &raw.key_prefix {
        None => DEFAULT_KEY_PREFIX.to_owned(),
        Some(p) => {
            let v = p.get_ref();
            if v.len() > 128 || v.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(err(
                    p.span(),
                    &format!("{SECTION}.key_prefix"),
                    "must be at most 128 characters, without spaces or control characters",
                ));
            }
            v.clone()
        }
    };

    let redis = if backend == "redis" {
        let Some(url) = url else {
            let span = raw
                .backend
                .as_ref()
                .map(|b| b.span())
                .unwrap_or(section_span);
            return Err(err(
                span,
                &format!("{SECTION}.redis_url"),
                "backend = \"redis\" needs redis_url, e.g. \"redis://127.0.0.1:6379/0\"",
            ));
        };
        Some(RedisSettings {
            url,
            failure,
            timeout,
            key_prefix,
        })
    } else {
        None
    };

    Ok(ThrottleSettings {
        rates,
        max_keys,
        redis,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Top {
        rate_limits: Option<Spanned<RawRateLimits>>,
    }

    fn parse(text: &str) -> Result<ThrottleSettings, RateConfigError> {
        let top: Top = toml::from_str(text).expect("toml");
        validate(top.rate_limits.as_ref())
    }

    fn parse_err(text: &str) -> (String, String) {
        let e = parse(text).expect_err("should be refused");
        let spanned = &text[e.span.clone()];
        (e.field, format!("{} @ {spanned}", e.message))
    }

    #[test]
    fn rate_syntax() {
        assert_eq!(parse_rate("100/s"), Ok((100, Duration::from_secs(1))));
        assert_eq!(parse_rate("30/m"), Ok((30, Duration::from_secs(60))));
        assert_eq!(parse_rate("5 / hour"), Ok((5, Duration::from_secs(3600))));
        assert_eq!(
            parse_rate("1000000/s"),
            Ok((1_000_000, Duration::from_secs(1)))
        );
        for bad in [
            "100",
            "100/d",
            "/s",
            "x/s",
            "-1/s",
            "1.5/s",
            "0/s",
            "1000001/s",
            "99999999999/s",
            "",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad} accepted");
        }
        assert!(parse_rate("0/m").unwrap_err().contains("zero"));
    }

    #[test]
    fn absent_section_is_unlimited() {
        let s = validate(None).unwrap();
        assert!(s.rates.iter().all(Option::is_none));
        assert!(s.redis.is_none());
        assert_eq!(s.max_keys, DEFAULT_MAX_KEYS);
    }

    #[test]
    fn full_example_parses() {
        let s = parse(
            r#"
[rate_limits]
per_principal = { rate = "100/s", burst = 200 }
per_principal_upstream = { rate = "50/s" }
per_principal_tool = { rate = "10/s" }
input_required_rounds = { rate = "30/m" }
max_keys = 100000
backend = "redis"
redis_url = "redis://127.0.0.1:6379/0"
redis_failure = "refuse"
redis_timeout = "50ms"
key_prefix = "pc:"
"#,
        )
        .unwrap();
        assert_eq!(
            s.rates[Scope::Principal.index()],
            Some(Rate {
                count: 100,
                per: Duration::from_secs(1),
                burst: 200
            })
        );
        let up = s.rates[Scope::PrincipalUpstream.index()].unwrap();
        assert_eq!((up.count, up.burst), (50, 50));
        let rounds = s.rates[Scope::InputRequiredRounds.index()].unwrap();
        assert_eq!(rounds.interval(), Duration::from_secs(2));
        let r = s.redis.unwrap();
        assert_eq!(r.failure, RedisFailure::Refuse);
        assert_eq!(r.timeout, Duration::from_millis(50));
        assert_eq!(r.key_prefix, "pc:");
    }

    #[test]
    fn errors_name_field_and_span() {
        let (f, m) = parse_err("[rate_limits]\nper_principal = { rate = \"100/x\" }\n");
        assert_eq!(f, "rate_limits.per_principal.rate");
        assert!(
            m.contains("unknown unit") && m.ends_with("@ \"100/x\""),
            "{m}"
        );

        let (f, m) = parse_err("[rate_limits]\nper_principal_tool = { rate = \"0/s\" }\n");
        assert_eq!(f, "rate_limits.per_principal_tool.rate");
        assert!(m.contains("zero"), "{m}");

        let (f, m) = parse_err("[rate_limits]\nper_principal = { rate = \"1/s\", burst = 0 }\n");
        assert_eq!(f, "rate_limits.per_principal.burst");
        assert!(m.ends_with("@ 0"), "{m}");

        let (f, _) = parse_err("[rate_limits]\nmax_keys = 0\n");
        assert_eq!(f, "rate_limits.max_keys");

        let (f, m) = parse_err("[rate_limits]\nbackend = \"memcached\"\n");
        assert_eq!(f, "rate_limits.backend");
        assert!(m.contains("\"local\", \"redis\""), "{m}");

        let (f, m) = parse_err("[rate_limits]\nbackend = \"redis\"\n");
        assert_eq!(f, "rate_limits.redis_url");
        assert!(m.ends_with("@ \"redis\""), "{m}");

        let (f, _) = parse_err("[rate_limits]\nbackend = \"redis\"\nredis_url = \"http://x\"\n");
        assert_eq!(f, "rate_limits.redis_url");
        let (f, _) = parse_err(
            "[rate_limits]\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:notaport\"\n",
        );
        assert_eq!(f, "rate_limits.redis_url");

        let (f, _) = parse_err("[rate_limits]\nredis_failure = \"open\"\n");
        assert_eq!(f, "rate_limits.redis_failure");
        let (f, _) = parse_err("[rate_limits]\nredis_timeout = \"soon\"\n");
        assert_eq!(f, "rate_limits.redis_timeout");
        let (f, _) = parse_err("[rate_limits]\nredis_timeout = \"0ms\"\n");
        assert_eq!(f, "rate_limits.redis_timeout");
        let (f, _) = parse_err("[rate_limits]\nkey_prefix = \"a b\"\n");
        assert_eq!(f, "rate_limits.key_prefix");
    }

    #[test]
    fn unknown_fields_refused() {
        let r: Result<Top, _> =
            toml::from_str("[rate_limits]\nper_principle = { rate = \"1/s\" }\n");
        assert!(r.is_err());
        let r: Result<Top, _> =
            toml::from_str("[rate_limits]\nper_principal = { rate = \"1/s\", brust = 2 }\n");
        assert!(r.is_err());
    }
}
