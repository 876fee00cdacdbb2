//! URL-mode elicitation: which URLs an upstream may send a person to.
//!
//! In MCP 2026-07-28 a server can answer with an `elicitation/create` request in
//! `url` mode (`{"mode":"url","url":"https://…","message":"…"}`); the client then
//! shows the URL to a person and opens it. The upstream is untrusted, so before the
//! client ever sees the URL the gateway checks it against the upstream's
//! [`UrlPolicy`]. A refusal carries a stable [`UrlRefusal`] reason.
//!
//! # Order of checks in [`UrlPolicy::check`]
//!
//! 1. Length (`too_long`), on the raw bytes, before any parsing.
//! 2. WHATWG parse with [`url::Url::parse`] (`unparseable`).
//! 3. Scheme must be `https` or `http` (`scheme_not_allowed`).
//! 4. The raw text must be unambiguous (`unparseable`): no ASCII control
//!    characters, no whitespace (ASCII or Unicode), no backslash, no invisible
//!    or bidirectional-formatting characters; it must start with `scheme://`
//!    followed directly by the host (so `https:evil.com` and `https:///evil.com`,
//!    which the WHATWG parser silently repairs, are refused); the raw host must
//!    not be percent-encoded. Everything the WHATWG parser would silently strip
//!    or rewrite is refused, so what a client displays is what it opens.
//! 5. A host must exist (`no_host`).
//! 6. `http` only for a loopback host (`localhost`, `127.0.0.0/8`, `[::1]`) and
//!    only with `allow_http_localhost` (`scheme_not_allowed`).
//! 7. No userinfo: a user name, a password, or even a bare `@` in the authority
//!    (`user_info`).
//! 8. IP literals, including the odd IPv4 spellings the WHATWG parser turns into
//!    addresses (`0x7f.1`, `2130706433`, `0177.0.0.1`) (`ip_literal`). With
//!    `allow_ip_literals` (or the loopback exception of `allow_http_localhost`)
//!    an IPv4 host must still be written in plain dotted-decimal form.
//! 9. Internationalised names: an `xn--` label or non-ASCII in the raw host
//!    (`punycode`) unless `allow_punycode`; when allowed, every Unicode label is
//!    checked for confusables (`mixed_script`), see [`label_is_confusable`].
//! 10. Names of the local machine or network (`local_name`): single-label
//!     names and those in `policies/data/local-network-names.txt`
//!     (`localhost`, `*.local`, `*.internal`, …) unless `allow_local_names`
//!     (or the loopback exception of `allow_http_localhost`).
//! 11. `denied_hosts` (`host_denied`), then `allowed_hosts` (`host_not_allowed`),
//!     compared on the lowercase ASCII host without its trailing dot.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use unicode_security::{skeleton, RestrictionLevel, RestrictionLevelDetection};
use url::{Host, Url};

use super::address::is_local_name;
use crate::model::Invisible;

/// Default for [`UrlPolicy::max_url_bytes`].
pub(crate) const DEFAULT_MAX_URL_BYTES: usize = 2048;

/// What URLs an upstream may send a person to. Parsed once from policy config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UrlPolicy {
    /// `http://` allowed only for `localhost`, `127.0.0.0/8` and `[::1]` when
    /// true (these loopback literals are then allowed even when
    /// `allow_ip_literals` is false); otherwise `https://` only.
    pub(crate) allow_http_localhost: bool,
    /// IPv4/IPv6 literal hosts.
    pub(crate) allow_ip_literals: bool,
    /// Hosts with `xn--` labels or non-ASCII (IDN) labels. Even when allowed,
    /// labels that mix scripts or imitate ASCII names are refused.
    pub(crate) allow_punycode: bool,
    /// Empty means any host (subject to `denied_hosts`).
    pub(crate) allowed_hosts: Vec<HostPattern>,
    /// Checked before `allowed_hosts`.
    pub(crate) denied_hosts: Vec<HostPattern>,
    /// Longest accepted URL, in bytes of its raw form.
    pub(crate) max_url_bytes: usize,
    /// Names of the local machine or network (`localhost`, `printer`,
    /// `nas.local`, `git.corp.internal`).
    pub(crate) allow_local_names: bool,
}

impl Default for UrlPolicy {
    /// The same as [`UrlPolicy::strict`].
    fn default() -> Self {
        UrlPolicy::strict()
    }
}

/// A URL that passed the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckedUrl {
    /// ASCII (punycode) form, lowercased, without a trailing dot. IPv6 hosts are
    /// bracketed (`[::1]`).
    pub(crate) host: String,
    /// Unicode form for people (equal to `host` unless it is an allowed IDN).
    pub(crate) display_host: String,
}

/// Why a URL is refused. [`UrlRefusal::as_str`] values are a stable contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UrlRefusal {
    Unparseable,
    TooLong,
    SchemeNotAllowed,
    UserInfo,
    IpLiteral,
    Punycode,
    MixedScript,
    HostDenied,
    HostNotAllowed,
    NoHost,
    LocalName,
}

impl UrlRefusal {
    /// Every refusal, for documentation and exhaustive tests.
    #[cfg(test)]
    pub(crate) const ALL: [UrlRefusal; 11] = [
        UrlRefusal::Unparseable,
        UrlRefusal::TooLong,
        UrlRefusal::SchemeNotAllowed,
        UrlRefusal::UserInfo,
        UrlRefusal::IpLiteral,
        UrlRefusal::Punycode,
        UrlRefusal::MixedScript,
        UrlRefusal::HostDenied,
        UrlRefusal::HostNotAllowed,
        UrlRefusal::NoHost,
        UrlRefusal::LocalName,
    ];

    /// Stable snake_case reason; add new ones, never rename.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            UrlRefusal::Unparseable => "unparseable",
            UrlRefusal::TooLong => "too_long",
            UrlRefusal::SchemeNotAllowed => "scheme_not_allowed",
            UrlRefusal::UserInfo => "user_info",
            UrlRefusal::IpLiteral => "ip_literal",
            UrlRefusal::Punycode => "punycode",
            UrlRefusal::MixedScript => "mixed_script",
            UrlRefusal::HostDenied => "host_denied",
            UrlRefusal::HostNotAllowed => "host_not_allowed",
            UrlRefusal::NoHost => "no_host",
            UrlRefusal::LocalName => "local_name",
        }
    }

    /// One sentence a person understands.
    pub(crate) const fn explain(self) -> &'static str {
        match self {
            UrlRefusal::Unparseable => {
                "The link is malformed, or written in a way that could look different from where it really leads."
            }
            UrlRefusal::TooLong => "The link is longer than this server's policy allows.",
            UrlRefusal::SchemeNotAllowed => {
                "Only secure https:// links may be opened (plain http:// at most to this computer), and this link is not one."
            }
            UrlRefusal::UserInfo => {
                "The link puts a user name or an '@' before the site name, a trick that makes it look like it leads to a different site."
            }
            UrlRefusal::IpLiteral => {
                "The link points at a numeric network address instead of a named site."
            }
            UrlRefusal::Punycode => {
                "The link's site name uses international characters, which can imitate a familiar site name."
            }
            UrlRefusal::MixedScript => {
                "The link's site name mixes alphabets or uses look-alike or unusual characters that can imitate a familiar site name."
            }
            UrlRefusal::HostDenied => "The link leads to a site that this server's policy blocks.",
            UrlRefusal::HostNotAllowed => {
                "The link leads to a site that is not on this server's list of allowed sites."
            }
            UrlRefusal::NoHost => "The link does not name a site.",
            UrlRefusal::LocalName => {
                "The link leads into this computer or its local network, not to a public site."
            }
        }
    }
}

impl fmt::Display for UrlRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A bad host pattern in policy config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UrlRuleError {
    #[error("host pattern is empty")]
    EmptyPattern,
    #[error("host pattern {0:?}: a wildcard is only allowed as a leading \"*.\" label, as in \"*.example.com\"")]
    MisplacedWildcard(String),
    #[error("host pattern {pattern:?} is not a valid host name: {reason}")]
    InvalidHost {
        pattern: String,
        reason: &'static str,
    },
}

/// `"example.com"` (exact, case-insensitive, trailing dot ignored) or
/// `"*.example.com"` (any subdomain at any depth, not the apex).
///
/// Patterns are normalised when parsed: lowercased, trailing dot removed,
/// Unicode names converted to their ASCII (punycode) form, IP addresses to
/// canonical form (`[::1]` for IPv6). [`HostPattern::as_str`] returns the
/// normalised form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub(crate) struct HostPattern {
    /// Normalised text, including the `*.` prefix for wildcards.
    text: String,
    wildcard: bool,
}

impl HostPattern {
    pub(crate) fn parse(s: &str) -> Result<HostPattern, UrlRuleError> {
        if s.is_empty() {
            return Err(UrlRuleError::EmptyPattern);
        }
        let invalid = |reason| UrlRuleError::InvalidHost {
            pattern: s.to_owned(),
            reason,
        };
        let (wildcard, rest) = match s.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        if rest.contains('*') || (!wildcard && s.starts_with('*')) {
            return Err(UrlRuleError::MisplacedWildcard(s.to_owned()));
        }
        if rest.contains('%') {
            return Err(invalid("percent-encoding is not allowed"));
        }
        let rest = rest.strip_suffix('.').unwrap_or(rest);
        if rest.is_empty() {
            return Err(invalid("no host name"));
        }
        let host = match Host::parse(rest) {
            Ok(h) => h,
            Err(_) => return Err(invalid("not a valid host name or IP address")),
        };
        let normalised = match host {
            Host::Domain(d) => {
                if d.split('.').any(str::is_empty) {
                    return Err(invalid("empty label"));
                }
                d
            }
            Host::Ipv4(_) | Host::Ipv6(_) if wildcard => {
                return Err(invalid("a wildcard cannot apply to an IP address"));
            }
            ip => ip.to_string(),
        };
        let text = if wildcard {
            format!("*.{normalised}")
        } else {
            normalised
        };
        Ok(HostPattern { text, wildcard })
    }

    /// Whether `host` (ASCII/punycode form; case and one trailing dot ignored)
    /// matches. A non-ASCII `host` is converted to its ASCII form first.
    pub(crate) fn matches(&self, host: &str) -> bool {
        if !host.is_ascii() {
            return match Host::parse(host) {
                Ok(Host::Domain(d)) => self.matches(&d),
                _ => false,
            };
        }
        let host = host.strip_suffix('.').unwrap_or(host);
        if !self.wildcard {
            return host.eq_ignore_ascii_case(&self.text);
        }
        // "*.example.com": suffix is ".example.com"; need a non-empty prefix.
        let suffix = &self.text[1..];
        host.len() > suffix.len()
            && host.is_char_boundary(host.len() - suffix.len())
            && host[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
            && !host[..host.len() - suffix.len()].ends_with('.')
            && !host.starts_with('.')
    }

    /// The normalised pattern, e.g. `"*.example.com"`.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// True for a `*.` pattern.
    #[cfg(test)]
    pub(crate) fn is_wildcard(&self) -> bool {
        self.wildcard
    }
}

impl FromStr for HostPattern {
    type Err = UrlRuleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HostPattern::parse(s)
    }
}

impl TryFrom<String> for HostPattern {
    type Error = UrlRuleError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        HostPattern::parse(&s)
    }
}

impl From<HostPattern> for String {
    fn from(p: HostPattern) -> String {
        p.text
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl UrlPolicy {
    /// The `untrusted` preset: https only, no IP literals, no punycode, no host
    /// lists, [`DEFAULT_MAX_URL_BYTES`].
    pub(crate) fn strict() -> UrlPolicy {
        UrlPolicy {
            allow_http_localhost: false,
            allow_ip_literals: false,
            allow_punycode: false,
            allowed_hosts: Vec::new(),
            denied_hosts: Vec::new(),
            max_url_bytes: DEFAULT_MAX_URL_BYTES,
            allow_local_names: false,
        }
    }

    /// Check a URL an upstream wants a person to open. See the module docs for
    /// the order of checks.
    pub(crate) fn check(&self, raw: &str) -> Result<CheckedUrl, UrlRefusal> {
        if raw.len() > self.max_url_bytes {
            return Err(UrlRefusal::TooLong);
        }
        let url = Url::parse(raw).map_err(|_| UrlRefusal::Unparseable)?;
        let scheme = url.scheme();
        let is_http = match scheme {
            "https" => false,
            "http" => true,
            _ => return Err(UrlRefusal::SchemeNotAllowed),
        };

        // What the person sees must be what the client opens.
        if raw.chars().any(is_ambiguous_char) {
            return Err(UrlRefusal::Unparseable);
        }
        let authority = raw_authority(raw, scheme).ok_or(UrlRefusal::Unparseable)?;
        let raw_host = raw_host(authority);
        if raw_host.contains('%') {
            return Err(UrlRefusal::Unparseable);
        }

        let host = url.host().ok_or(UrlRefusal::NoHost)?;
        let ascii_host: String = match &host {
            Host::Domain(d) => {
                let d = d.strip_suffix('.').unwrap_or(d);
                if d.is_empty() || d.bytes().all(|b| b == b'.') {
                    return Err(UrlRefusal::NoHost);
                }
                if d.split('.').any(str::is_empty) {
                    return Err(UrlRefusal::Unparseable);
                }
                d.to_ascii_lowercase()
            }
            ip => ip.to_string(),
        };

        let loopback = self.allow_http_localhost && is_loopback(&host, &ascii_host);
        if is_http && !loopback {
            return Err(UrlRefusal::SchemeNotAllowed);
        }

        if !url.username().is_empty() || url.password().is_some() || authority.contains('@') {
            return Err(UrlRefusal::UserInfo);
        }

        let mut display_host = ascii_host.clone();
        match &host {
            Host::Ipv4(addr) => {
                if !(self.allow_ip_literals || loopback) {
                    return Err(UrlRefusal::IpLiteral);
                }
                // Odd spellings (0x7f.1, 2130706433, 0177.0.0.1, 127.1) hide
                // what they are; std's parser accepts only plain dotted-decimal.
                if raw_host.parse::<Ipv4Addr>().ok() != Some(*addr) {
                    return Err(UrlRefusal::IpLiteral);
                }
            }
            Host::Ipv6(_) => {
                if !(self.allow_ip_literals || loopback) {
                    return Err(UrlRefusal::IpLiteral);
                }
            }
            Host::Domain(_) => {
                let idn = !raw_host.is_ascii() || ascii_host.split('.').any(is_a_label);
                if idn {
                    if !self.allow_punycode {
                        return Err(UrlRefusal::Punycode);
                    }
                    display_host = url::quirks::domain_to_unicode(&ascii_host);
                    // The host came out of the WHATWG parser, so it decodes;
                    // if it somehow does not, people cannot read it.
                    if display_host.is_empty() || display_host.split('.').any(is_a_label) {
                        return Err(UrlRefusal::Punycode);
                    }
                    if display_host.split('.').any(label_is_confusable) {
                        return Err(UrlRefusal::MixedScript);
                    }
                }
            }
        }

        let named = matches!(host, Host::Domain(_));
        if named && !self.allow_local_names && !loopback && is_local_name(&ascii_host) {
            return Err(UrlRefusal::LocalName);
        }
        if self.denied_hosts.iter().any(|p| p.matches(&ascii_host)) {
            return Err(UrlRefusal::HostDenied);
        }
        if !self.allowed_hosts.is_empty()
            && !self.allowed_hosts.iter().any(|p| p.matches(&ascii_host))
        {
            return Err(UrlRefusal::HostNotAllowed);
        }

        Ok(CheckedUrl {
            host: ascii_host,
            display_host,
        })
    }
}

/// Characters that the WHATWG parser strips or rewrites, or that change how a
/// URL is displayed without changing where it leads: controls (C0, DEL, C1),
/// any whitespace, backslash, and default-ignorable / bidi formatting
/// characters (zero-width spaces and joiners, soft hyphen, directional marks,
/// embeddings, overrides and isolates, variation selectors, BOM, tags).
fn is_ambiguous_char(c: char) -> bool {
    c.is_control() || c.is_whitespace() || c == '\\' || Invisible::of(c).is_some()
}

/// The raw authority (`userinfo@host:port`) if `raw` is written as
/// `scheme://authority…` with nothing the parser had to repair between the
/// scheme and the host.
fn raw_authority<'a>(raw: &'a str, scheme: &str) -> Option<&'a str> {
    let prefix = raw.get(..scheme.len())?;
    if !prefix.eq_ignore_ascii_case(scheme) {
        return None;
    }
    let rest = raw[scheme.len()..].strip_prefix("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.is_empty() {
        return None;
    }
    Some(authority)
}

/// The host part of a raw authority (after any userinfo, without the port).
fn raw_host(authority: &str) -> &str {
    let hostport = match authority.rfind('@') {
        Some(i) => &authority[i + 1..],
        None => authority,
    };
    if hostport.starts_with('[') {
        match hostport.find(']') {
            Some(i) => &hostport[..=i],
            None => hostport,
        }
    } else {
        match hostport.find(':') {
            Some(i) => &hostport[..i],
            None => hostport,
        }
    }
}

fn is_loopback(host: &Host<&str>, ascii_host: &str) -> bool {
    match host {
        Host::Domain(_) => ascii_host == "localhost",
        Host::Ipv4(a) => a.is_loopback(),
        Host::Ipv6(a) => a.is_loopback(),
    }
}

/// An IDNA A-label (`xn--…`, any case).
fn is_a_label(label: &str) -> bool {
    label
        .get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("xn--"))
}

/// Whether a Unicode host label could be mistaken for another name. Two UTS #39
/// checks from `unicode-security`, applied to labels containing non-ASCII:
///
/// * restriction level ([`RestrictionLevelDetection`]) must be at most
///   `HighlyRestrictive`: single-script, or Latin combined only with Han +
///   Hiragana/Katakana, Han + Bopomofo, or Han + Hangul. This refuses Latin
///   mixed with Cyrillic, Greek, Armenian etc. (`аpple`, `pаypal`), and any
///   character outside the UTS #39 identifier profile (symbols, emoji,
///   IPA letters such as `ɡ`), which yields `Unrestricted`;
/// * the confusable skeleton ([`skeleton`]) must not be all ASCII: that catches
///   whole-script confusables (`аррӏе`, all Cyrillic, skeleton `apple`) and
///   single-script look-alike letters (`paypaı` with dotless i). This may
///   refuse a genuine word made only of Latin look-alikes (Cyrillic `сосо`);
///   for a gateway in front of untrusted servers that is the right trade.
fn label_is_confusable(label: &str) -> bool {
    if label.is_ascii() {
        return false;
    }
    if !label.check_restriction_level(RestrictionLevel::HighlyRestrictive) {
        return true;
    }
    skeleton(label).all(|c| c.is_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every character of the one invisible table makes a URL ambiguous.
    #[test]
    fn every_invisible_character_is_ambiguous_in_a_url() {
        for (lo, hi, _) in Invisible::ranges() {
            let mid = char::from_u32((lo as u32 + hi as u32) / 2).unwrap_or(lo);
            for c in [lo, mid, hi] {
                assert!(is_ambiguous_char(c), "{:?}", c.escape_unicode());
            }
        }
    }

    fn pat(s: &str) -> HostPattern {
        HostPattern::parse(s).unwrap()
    }

    fn lax() -> UrlPolicy {
        UrlPolicy {
            allow_http_localhost: true,
            allow_ip_literals: true,
            allow_punycode: true,
            ..UrlPolicy::strict()
        }
    }

    fn localhost_ok() -> UrlPolicy {
        UrlPolicy {
            allow_http_localhost: true,
            ..UrlPolicy::strict()
        }
    }

    fn ip_ok() -> UrlPolicy {
        UrlPolicy {
            allow_ip_literals: true,
            ..UrlPolicy::strict()
        }
    }

    fn idn_ok() -> UrlPolicy {
        UrlPolicy {
            allow_punycode: true,
            ..UrlPolicy::strict()
        }
    }

    fn lists() -> UrlPolicy {
        UrlPolicy {
            allowed_hosts: vec![pat("*.example.com"), pat("auth.example.org")],
            denied_hosts: vec![pat("evil.example.com")],
            ..UrlPolicy::strict()
        }
    }

    use UrlRefusal::*;

    #[allow(clippy::type_complexity)]
    #[rustfmt::skip]
    fn table() -> Vec<(
        &'static str,
        UrlPolicy,
        &'static str,
        Result<(&'static str, &'static str), UrlRefusal>,
    )> {
        let ok = |h: &'static str| Ok((h, h));
        let long =
            Box::leak(format!("https://example.com/{}", "a".repeat(5000 - 20)).into_boxed_str());
        assert_eq!(long.len(), 5000);
        vec![
            // plain accepts
            ("set_api_key", UrlPolicy::strict(), "https://mcp.example.com/ui/set_api_key", ok("mcp.example.com")),
            ("upper case", UrlPolicy::strict(), "HTTPS://MCP.Example.COM/x?y=1#z", ok("mcp.example.com")),
            ("trailing dot", UrlPolicy::strict(), "https://example.com./", ok("example.com")),
            ("port", UrlPolicy::strict(), "https://example.com:8443/cb", ok("example.com")),
            ("at in fragment", UrlPolicy::strict(), "https://example.com/#@evil.com", ok("example.com")),
            ("at in query", UrlPolicy::strict(), "https://example.com/?next=a@evil.com", ok("example.com")),
            ("non-ascii path ok", UrlPolicy::strict(), "https://example.com/über", ok("example.com")),
            // too long
            ("5000 bytes", UrlPolicy::strict(), long, Err(TooLong)),
            ("5000 bytes lax", lax(), long, Err(TooLong)),
            // unparseable / ambiguous
            ("garbage", UrlPolicy::strict(), "not a url", Err(Unparseable)),
            ("empty", UrlPolicy::strict(), "", Err(Unparseable)),
            ("space in host", UrlPolicy::strict(), "https://exa mple.com", Err(Unparseable)),
            ("backslash userinfo", UrlPolicy::strict(), "https://example.com\\@evil.com", Err(Unparseable)),
            ("backslash path", UrlPolicy::strict(), "https:\\\\evil.com/", Err(Unparseable)),
            ("tab", UrlPolicy::strict(), "ht\ttps://example.com/", Err(Unparseable)),
            ("newline in host", UrlPolicy::strict(), "https://exa\nmple.com/", Err(Unparseable)),
            ("leading space", UrlPolicy::strict(), " https://example.com/", Err(Unparseable)),
            ("trailing space", UrlPolicy::strict(), "https://example.com/ ", Err(Unparseable)),
            ("nul", UrlPolicy::strict(), "https://example.com/\0", Err(Unparseable)),
            ("nbsp", UrlPolicy::strict(), "https://example.com/\u{a0}x", Err(Unparseable)),
            ("rlo in path", UrlPolicy::strict(), "https://evil.com/\u{202e}moc.elpmaxe", Err(Unparseable)),
            ("zero width", UrlPolicy::strict(), "https://exa\u{200b}mple.com/", Err(Unparseable)),
            ("soft hyphen", idn_ok(), "https://exa\u{ad}mple.com/", Err(Unparseable)),
            ("no slashes", UrlPolicy::strict(), "https:evil.com", Err(Unparseable)),
            ("one slash", UrlPolicy::strict(), "https:/evil.com", Err(Unparseable)),
            ("three slashes", UrlPolicy::strict(), "https:///evil.com", Err(Unparseable)),
            ("percent host", UrlPolicy::strict(), "https://example%2ecom/", Err(Unparseable)),
            ("empty label", UrlPolicy::strict(), "https://a..example.com/", Err(Unparseable)),
            ("bad a-label", lax(), "https://xn--a.com/", Err(Unparseable)),
            ("five part ip", UrlPolicy::strict(), "https://1.2.3.4.5/", Err(Unparseable)),
            // scheme
            ("http", UrlPolicy::strict(), "http://example.com", Err(SchemeNotAllowed)),
            ("http lax non-local", lax(), "http://example.com/", Err(SchemeNotAllowed)),
            ("http localhost strict", UrlPolicy::strict(), "http://localhost:8080/cb", Err(SchemeNotAllowed)),
            ("http localhost", localhost_ok(), "http://localhost:8080/cb", ok("localhost")),
            ("http localhost dot", localhost_ok(), "http://LOCALHOST.:8080/cb", ok("localhost")),
            ("http sub.localhost", localhost_ok(), "http://a.localhost/", Err(SchemeNotAllowed)),
            ("http 127.0.0.1", localhost_ok(), "http://127.0.0.1:3000/cb", ok("127.0.0.1")),
            ("http 127.1.2.3", localhost_ok(), "http://127.1.2.3/", ok("127.1.2.3")),
            ("http [::1]", localhost_ok(), "http://[::1]:3000/cb", ok("[::1]")),
            ("http ::ffff:127.0.0.1", localhost_ok(), "http://[::ffff:127.0.0.1]/", Err(SchemeNotAllowed)),
            ("http 10/8", localhost_ok(), "http://10.0.0.1/", Err(SchemeNotAllowed)),
            ("http odd loopback", localhost_ok(), "http://0x7f.1/", Err(IpLiteral)),
            ("https loopback", localhost_ok(), "https://127.0.0.1/", ok("127.0.0.1")),
            ("javascript", UrlPolicy::strict(), "javascript:alert(1)", Err(SchemeNotAllowed)),
            ("javascript lax", lax(), "JavaScript:alert(document.cookie)", Err(SchemeNotAllowed)),
            ("data", UrlPolicy::strict(), "data:text/html,<script>alert(1)</script>", Err(SchemeNotAllowed)),
            ("file", lax(), "file:///etc/passwd", Err(SchemeNotAllowed)),
            ("ftp", lax(), "ftp://example.com/", Err(SchemeNotAllowed)),
            ("mailto", lax(), "mailto:a@example.com", Err(SchemeNotAllowed)),
            ("custom", lax(), "vscode://ext/cb", Err(SchemeNotAllowed)),
            ("ws", lax(), "wss://example.com/", Err(SchemeNotAllowed)),
            // userinfo
            ("user:pw", UrlPolicy::strict(), "https://user:pw@example.com", Err(UserInfo)),
            ("trusted@evil", UrlPolicy::strict(), "https://example.com@evil.com", Err(UserInfo)),
            ("empty at", UrlPolicy::strict(), "https://@example.com/", Err(UserInfo)),
            ("empty colon at", UrlPolicy::strict(), "https://:@example.com/", Err(UserInfo)),
            ("port then at", UrlPolicy::strict(), "https://example.com:443@evil.com/", Err(UserInfo)),
            ("localhost userinfo", localhost_ok(), "http://u@localhost/", Err(UserInfo)),
            // ip literals
            ("ipv4", UrlPolicy::strict(), "https://127.0.0.1/", Err(IpLiteral)),
            ("ipv6", UrlPolicy::strict(), "https://[::1]/", Err(IpLiteral)),
            ("hex ipv4", UrlPolicy::strict(), "https://0x7f.0.0.1/", Err(IpLiteral)),
            ("decimal ipv4", UrlPolicy::strict(), "https://2130706433/", Err(IpLiteral)),
            ("octal ipv4", UrlPolicy::strict(), "https://0177.0.0.1/", Err(IpLiteral)),
            ("short ipv4", UrlPolicy::strict(), "https://127.1/", Err(IpLiteral)),
            ("fullwidth ipv4", idn_ok(), "https://１２７.０.０.１/", Err(IpLiteral)),
            ("ipv4 allowed", ip_ok(), "https://10.1.2.3/", ok("10.1.2.3")),
            ("ipv6 allowed", ip_ok(), "https://[2001:DB8::1]:8443/", ok("[2001:db8::1]")),
            ("hex ipv4 allowed still odd", ip_ok(), "https://0x7f.0.0.1/", Err(IpLiteral)),
            ("decimal ipv4 allowed still odd", ip_ok(), "https://2130706433/", Err(IpLiteral)),
            ("leading zero allowed still odd", ip_ok(), "https://010.0.0.1/", Err(IpLiteral)),
            // punycode / IDN
            ("punycode", UrlPolicy::strict(), "https://xn--pypal-4ve.com/", Err(Punycode)),
            ("punycode upper", UrlPolicy::strict(), "https://XN--PYPAL-4VE.com/", Err(Punycode)),
            ("cyrillic a strict", UrlPolicy::strict(), "https://аpple.com", Err(Punycode)),
            ("umlaut strict", UrlPolicy::strict(), "https://bücher.de/", Err(Punycode)),
            ("fullwidth strict", UrlPolicy::strict(), "https://ｅｘａｍｐｌｅ.com/", Err(Punycode)),
            ("ideographic dot strict", UrlPolicy::strict(), "https://example。com/", Err(Punycode)),
            ("umlaut allowed", idn_ok(), "https://bücher.de/", Ok(("xn--bcher-kva.de", "bücher.de"))),
            ("umlaut a-label allowed", idn_ok(), "https://xn--bcher-kva.de/", Ok(("xn--bcher-kva.de", "bücher.de"))),
            ("fullwidth allowed", idn_ok(), "https://ｅｘａｍｐｌｅ.com/", ok("example.com")),
            ("cyrillic word", idn_ok(), "https://пример.рф/", Ok(("xn--e1afmkfd.xn--p1ai", "пример.рф"))),
            ("japanese", idn_ok(), "https://日本語.jp/", Ok(("xn--wgv71a119e.jp", "日本語.jp"))),
            ("han + latin", idn_ok(), "https://中文abc.com/", Ok(("xn--abc-u68do18h.com", "中文abc.com"))),
            // mixed script / confusables
            ("cyrillic a", idn_ok(), "https://аpple.com", Err(MixedScript)),
            ("paypal punycode", idn_ok(), "https://xn--pypal-4ve.com/", Err(MixedScript)),
            ("whole-script cyrillic apple", idn_ok(), "https://xn--80ak6aa92e.com/", Err(MixedScript)),
            ("latin script g", idn_ok(), "https://ɡoogle.com/", Err(MixedScript)),
            ("dotless i", idn_ok(), "https://paypaı.com/", Err(MixedScript)),
            ("latin + greek", idn_ok(), "https://αbc.com/", Err(MixedScript)),
            ("emoji", idn_ok(), "https://☃.com/", Err(MixedScript)),
            // host lists
            ("allowed subdomain", lists(), "https://mcp.example.com/", ok("mcp.example.com")),
            ("allowed deep subdomain", lists(), "https://a.b.example.com/", ok("a.b.example.com")),
            ("allowed exact", lists(), "https://AUTH.example.org./", ok("auth.example.org")),
            ("apex not allowed", lists(), "https://example.com/", Err(HostNotAllowed)),
            ("lookalike not allowed", lists(), "https://evilexample.com/", Err(HostNotAllowed)),
            ("sub of exact not allowed", lists(), "https://x.auth.example.org/", Err(HostNotAllowed)),
            ("suffix trick not allowed", lists(), "https://mcp.example.com.evil.net/", Err(HostNotAllowed)),
            ("denied beats allowed", lists(), "https://evil.example.com/", Err(HostDenied)),
            ("denied case + dot", lists(), "https://EVIL.Example.COM./", Err(HostDenied)),
            ("local: localhost", UrlPolicy::strict(), "https://localhost/", Err(LocalName)),
            ("local: trailing dot", UrlPolicy::strict(), "https://localhost./", Err(LocalName)),
            ("local: single label", UrlPolicy::strict(), "https://printer/", Err(LocalName)),
            ("local: mdns", UrlPolicy::strict(), "https://nas.local/", Err(LocalName)),
            ("local: internal", UrlPolicy::strict(), "https://git.corp.internal/", Err(LocalName)),
            ("local: sub of localhost", UrlPolicy::strict(), "https://app.localhost/", Err(LocalName)),
            ("local: home.arpa", UrlPolicy::strict(), "https://router.home.arpa/", Err(LocalName)),
            ("local: allowed", UrlPolicy {allow_local_names: true, ..UrlPolicy::strict()}, "https://nas.local/", ok("nas.local")),
            ("local: loopback exception", localhost_ok(), "http://localhost:8080/cb", ok("localhost")),
            ("public look-alike", UrlPolicy::strict(), "https://local.example.com/", ok("local.example.com")),
            ("deny trailing dot", UrlPolicy {denied_hosts: vec![pat("evil.net")], ..UrlPolicy::strict()}, "https://evil.net./", Err(HostDenied)),
            ("allow trailing dot", UrlPolicy {allowed_hosts: vec![pat("auth.example.org.")], ..UrlPolicy::strict()}, "https://auth.example.org./x", ok("auth.example.org")),
            ("deny only", UrlPolicy {denied_hosts: vec![pat("*.evil.net")], ..UrlPolicy::strict()}, "https://a.evil.net/", Err(HostDenied)),
            ("deny only other", UrlPolicy {denied_hosts: vec![pat("*.evil.net")], ..UrlPolicy::strict()}, "https://good.net/", ok("good.net")),
            ("deny idn by unicode pattern", UrlPolicy {denied_hosts: vec![pat("bücher.de")], ..idn_ok()}, "https://xn--bcher-kva.de/", Err(HostDenied)),
            ("deny ip", UrlPolicy {denied_hosts: vec![pat("10.0.0.1")], ..ip_ok()}, "https://10.0.0.1/", Err(HostDenied)),
            ("allow list does not override ip rule", UrlPolicy {allowed_hosts: vec![pat("10.0.0.1")], ..UrlPolicy::strict()}, "https://10.0.0.1/", Err(IpLiteral)),
            // no host
            ("dot host", UrlPolicy::strict(), "https://./", Err(NoHost)),
            ("dots host", UrlPolicy::strict(), "https://../", Err(NoHost)),
        ]
    }

    #[test]
    fn table_driven() {
        let mut failures = Vec::new();
        for (name, policy, raw, want) in table() {
            let got = policy.check(raw);
            let got_cmp = got
                .as_ref()
                .map(|c| (c.host.as_str(), c.display_host.as_str()))
                .map_err(|e| *e);
            if got_cmp != want {
                failures.push(format!("{name}: {raw:?}: want {want:?}, got {got:?}"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn table_covers_every_refusal() {
        let table = table();
        for r in UrlRefusal::ALL {
            assert!(
                table.iter().any(|(_, _, _, want)| *want == Err(r)),
                "no case for {r:?}"
            );
        }
    }

    #[test]
    fn refusal_strings_are_stable_and_distinct() {
        let strs: Vec<_> = UrlRefusal::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            strs,
            [
                "unparseable",
                "too_long",
                "scheme_not_allowed",
                "user_info",
                "ip_literal",
                "punycode",
                "mixed_script",
                "host_denied",
                "host_not_allowed",
                "no_host",
                "local_name"
            ]
        );
        for r in UrlRefusal::ALL {
            assert!(r.explain().ends_with('.'), "{r:?}");
            assert_eq!(r.to_string(), r.as_str());
        }
    }

    #[test]
    fn length_limit_is_inclusive_and_first() {
        let url = "https://example.com/abc";
        let exact = UrlPolicy {
            max_url_bytes: url.len(),
            ..UrlPolicy::strict()
        };
        assert!(exact.check(url).is_ok());
        let short = UrlPolicy {
            max_url_bytes: url.len() - 1,
            ..UrlPolicy::strict()
        };
        assert_eq!(short.check(url), Err(TooLong));
        assert_eq!(short.check("javascript:alert(1)//////////"), Err(TooLong));
        assert_eq!(UrlPolicy::default(), UrlPolicy::strict());
    }

    #[test]
    fn pattern_matching() {
        let wild = pat("*.example.com");
        let exact = pat("example.com");
        for (host, w, e) in [
            ("example.com", false, true),
            ("EXAMPLE.com", false, true),
            ("example.com.", false, true),
            ("a.example.com", true, false),
            ("A.Example.Com.", true, false),
            ("a.b.example.com", true, false),
            ("evilexample.com", false, false),
            ("a.evilexample.com", false, false),
            ("example.com.evil.net", false, false),
            (".example.com", false, false),
            ("a..example.com", false, false),
            ("com", false, false),
            ("", false, false),
            ("xample.com", false, false),
        ] {
            assert_eq!(wild.matches(host), w, "*.example.com vs {host:?}");
            assert_eq!(exact.matches(host), e, "example.com vs {host:?}");
        }
        // non-ASCII input is compared in its ASCII form
        assert!(pat("*.xn--bcher-kva.de").matches("shop.bücher.de"));
    }

    #[test]
    fn pattern_parse_normalises() {
        assert_eq!(pat("Example.COM.").as_str(), "example.com");
        assert_eq!(pat("*.Example.COM.").as_str(), "*.example.com");
        assert!(pat("*.example.com").is_wildcard());
        assert!(!pat("example.com").is_wildcard());
        assert_eq!(pat("bücher.de").as_str(), "xn--bcher-kva.de");
        assert_eq!(pat("*.Bücher.de").as_str(), "*.xn--bcher-kva.de");
        assert_eq!(pat("10.0.0.1").as_str(), "10.0.0.1");
        assert_eq!(pat("[::1]").as_str(), "[::1]");
        assert_eq!(pat("example.com").to_string(), "example.com");
        assert_eq!(
            "x.example.com".parse::<HostPattern>().unwrap().as_str(),
            "x.example.com"
        );
    }

    #[test]
    fn pattern_parse_errors() {
        assert_eq!(HostPattern::parse(""), Err(UrlRuleError::EmptyPattern));
        for bad in [
            "*",
            "*.",
            "**.example.com",
            "*example.com",
            "a.*.example.com",
            "example.*",
            "*.*.com",
        ] {
            assert!(
                HostPattern::parse(bad).is_err(),
                "{bad:?} should be refused"
            );
        }
        for bad in [
            "exa mple.com",
            "example.com/",
            "exa%6dple.com",
            "a..b.com",
            "example.com..",
            ".",
            "*.10.0.0.1",
            "*.[::1]",
            "user@example.com",
            "1.2.3.4.5",
        ] {
            assert!(
                matches!(
                    HostPattern::parse(bad),
                    Err(UrlRuleError::InvalidHost { .. })
                ),
                "{bad:?}: {:?}",
                HostPattern::parse(bad)
            );
        }
        assert!(matches!(
            HostPattern::parse("*example.com"),
            Err(UrlRuleError::MisplacedWildcard(_))
        ));
        // messages name the pattern
        let msg = HostPattern::parse("a.*.com").unwrap_err().to_string();
        assert!(msg.contains("a.*.com"), "{msg}");
    }

    #[test]
    fn pattern_serde_round_trip() {
        #[derive(serde::Deserialize, serde::Serialize)]
        struct Cfg {
            hosts: Vec<HostPattern>,
        }
        let cfg: Cfg =
            serde_json::from_str(r#"{"hosts":["*.Example.com","auth.example.org."]}"#).unwrap();
        assert_eq!(cfg.hosts[0].as_str(), "*.example.com");
        assert_eq!(cfg.hosts[1].as_str(), "auth.example.org");
        assert_eq!(
            serde_json::to_string(&cfg).unwrap(),
            r#"{"hosts":["*.example.com","auth.example.org"]}"#
        );
        assert!(serde_json::from_str::<Cfg>(r#"{"hosts":["a.*.com"]}"#).is_err());
    }

    fn any_policy() -> impl Strategy<Value = UrlPolicy> {
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            0usize..300,
        )
            .prop_map(|(http, ip, puny, lists, max)| UrlPolicy {
                allow_http_localhost: http,
                allow_ip_literals: ip,
                allow_punycode: puny,
                allowed_hosts: if lists {
                    vec![pat("*.example.com"), pat("localhost")]
                } else {
                    vec![]
                },
                denied_hosts: if lists {
                    vec![pat("evil.example.com")]
                } else {
                    vec![]
                },
                max_url_bytes: max,
                allow_local_names: lists,
            })
    }

    fn check_invariants(policy: &UrlPolicy, raw: &str) {
        if let Ok(c) = policy.check(raw) {
            assert!(raw.len() <= policy.max_url_bytes);
            assert!(c.host.is_ascii(), "{c:?}");
            assert_eq!(c.host, c.host.to_ascii_lowercase());
            assert!(!c.host.is_empty() && !c.host.ends_with('.'), "{c:?}");
            assert!(
                !raw.contains('\\') && !raw.chars().any(char::is_whitespace),
                "{raw:?}"
            );
            let scheme_ok = raw
                .get(..8)
                .is_some_and(|p| p.eq_ignore_ascii_case("https://"))
                || raw
                    .get(..7)
                    .is_some_and(|p| p.eq_ignore_ascii_case("http://"));
            assert!(scheme_ok, "{raw:?}");
            if !policy.allow_punycode {
                assert_eq!(c.host, c.display_host);
            }
        }
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_strings(raw in any::<String>(), policy in any_policy()) {
            check_invariants(&policy, &raw);
        }

        #[test]
        fn never_panics_on_url_like_strings(
            scheme in "(https?|HTTPS|javascript|data|file)",
            sep in "(:|://|:/|:///|:\\\\\\\\)",
            auth in "([a-z]{0,3}(:[a-z]{0,3})?@)?",
            host in "([a-zA-Z0-9.\\-]{0,12}|\\[[0-9a-f:]{0,10}\\]|0x[0-9a-f]{1,4}(\\.[0-9]{1,3}){0,3}|[а-яa-zü\u{200b}%]{1,8}\\.(com|xn--p1ai))",
            port in "(:[0-9]{0,6})?",
            tail in "[/?#@a-z\\\\ ]{0,10}",
            policy in any_policy(),
        ) {
            let raw = format!("{scheme}{sep}{auth}{host}{port}{tail}");
            let policy = UrlPolicy { max_url_bytes: 2048, ..policy };
            check_invariants(&policy, &raw);
        }
    }
}
