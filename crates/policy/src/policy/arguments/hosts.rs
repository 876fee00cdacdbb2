//! URLs and hosts in an argument that lead where a server must not be
//! sent: the machine, its networks, a cloud metadata service, a local
//! name, a denied host (a public address, named or written as a number,
//! leads outside and passes). The host is read as `address.rs` reads it (every spelling of an
//! address, what IPv6 embeds, names that spell one), and twice where
//! parsers differ: as a browser reads a URL (a `\` ends the host, the last
//! `@` starts it) and as a plain split of the authority does (only `/`,
//! `?` and `#` end it): `http://good.example\@169.254.169.254/` is refused
//! by the reading that finds the metadata service.
//!
//! Every `scheme://` in a value is read (`gopher://`, `dict://` and
//! `ftp://` reach internal services as well as `http://`); a value of a
//! property named for an address (`url`, `host`, `endpoint`, `webhook`,
//! `ip`, …) is read as a URL without its scheme too.

use std::borrow::Cow;

use url::Url;

use crate::policy::address::{classify, classify_text, HostClass};
use crate::policy::config::ArgumentPolicy;
use crate::policy::detect::{fold_value, name_words};
use crate::policy::url_rules::{HostPattern, UrlPolicy};

/// What the address rule found: a class, or `denied`; and whether a
/// password travels in the URL's user part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) class: &'static str,
}

/// Words that, as the last word of a property's name, say its value is
/// an address (`server_ip`, `callbackUrl`, `db-host`). Whole words only:
/// `relationship` ends in "ip" and `observer` in "server", but name
/// neither.
const ADDRESS_WORDS: [&str; 14] = [
    "url",
    "uri",
    "host",
    "hostname",
    "endpoint",
    "server",
    "domain",
    "ip",
    "ipaddress",
    "addr",
    "webhook",
    "callback",
    "proxy",
    "baseurl",
];

/// Of those, the ones also read at the end of a name written run
/// together in lower case (`imageurl`, `redirecturi`, `dbhostname`), when
/// at least three letters come before them (`curl` is no URL).
const RUN_TOGETHER: [&str; 6] = ["url", "uri", "hostname", "endpoint", "webhook", "ipaddress"];

/// Words of a name that say its value is the name of one machine, where
/// a single label (`intranet`) is one of the local network. In an `url`
/// or a `callback` a bare word is no address (`handleButtonClick`).
const HOST_WORDS: [&str; 7] = [
    "host",
    "hostname",
    "server",
    "domain",
    "ip",
    "ipaddress",
    "addr",
];

/// The last word of a name, with `ip address` and `host name` read as
/// one.
fn last_word(words: &[String]) -> Option<String> {
    let last = words.last()?;
    match (
        words.len().checked_sub(2).map(|i| words[i].as_str()),
        last.as_str(),
    ) {
        (Some("ip"), "address") => Some("ipaddress".to_owned()),
        (Some("host"), "name") => Some("hostname".to_owned()),
        (Some("base"), "url") => Some("baseurl".to_owned()),
        _ => Some(last.clone()),
    }
}

/// Whether a property's name says its value is an address.
pub(crate) fn is_address_name(key: &str) -> bool {
    let words = name_words(key);
    let Some(last) = last_word(&words) else {
        return false;
    };
    if ADDRESS_WORDS.contains(&last.as_str()) {
        return true;
    }
    let folded = words.concat();
    RUN_TOGETHER.iter().any(|w| {
        folded
            .strip_suffix(w)
            .is_some_and(|before| before.is_empty() || before.len() >= 3)
    })
}

/// Whether a property's name says its value names one machine.
fn is_host_name(key: &str) -> bool {
    last_word(&name_words(key)).is_some_and(|w| HOST_WORDS.contains(&w.as_str()))
}

/// The first address in `value` the rule refuses; `key` is the name of the
/// property that holds it, `addressed` whether that name says it holds an
/// address ([`is_address_name`], which a listed tool's properties answer
/// once: `contract.rs`).
pub(crate) fn find(
    value: &str,
    key: Option<&str>,
    addressed: bool,
    rules: &ArgumentPolicy,
    url: &UrlPolicy,
) -> Option<Found> {
    if !addressed && !value.contains("://") && value.is_ascii() {
        return None;
    }
    let text = fold_value(value);
    let judge = Judge { rules, url };
    let mut found = None;
    for authority in authorities(&text) {
        found = judge
            .authority(authority.whatwg, authority.raw)
            .filter(|f| {
                f.class != HostClass::LocalName.as_str() || is_network_scheme(authority.scheme)
            });
        if found.is_some() {
            return found;
        }
    }
    if addressed && !text.contains("://") {
        let bare = text.trim();
        // A single word is a machine of the local network only where the
        // name says the value is a machine's name (or it is `localhost`).
        let one_label = !bare.contains(['.', ':', '[', '/', '\\', '@']);
        let machine = key.is_some_and(is_host_name) || bare.eq_ignore_ascii_case("localhost");
        if one_label && !machine {
            return None;
        }
        if !bare.is_empty() && !bare.contains(char::is_whitespace) {
            let end = bare.find(['/', '?', '#']).unwrap_or(bare.len());
            let whatwg_end = bare.find(['/', '?', '#', '\\']).unwrap_or(bare.len());
            found = judge.authority(&bare[..whatwg_end], &bare[..end]);
        }
    }
    found
}

/// One URL's authority, as the two readings cut it.
struct Authority<'a> {
    scheme: &'a str,
    whatwg: &'a str,
    raw: &'a str,
}

/// Schemes whose authority is a host something connects to. Under any
/// other (`test://`, `ui://`, a server's own resource scheme) the
/// "authority" is a name in the server's own namespace: a single label
/// there is no local network name, though an address still is an address.
const NETWORK_SCHEMES: [&str; 24] = [
    "http",
    "https",
    "ws",
    "wss",
    "ftp",
    "ftps",
    "sftp",
    "ssh",
    "telnet",
    "gopher",
    "dict",
    "ldap",
    "ldaps",
    "smb",
    "tftp",
    "nfs",
    "redis",
    "rediss",
    "mongodb",
    "mysql",
    "postgres",
    "postgresql",
    "amqp",
    "mqtt",
];

fn is_network_scheme(scheme: &str) -> bool {
    NETWORK_SCHEMES
        .iter()
        .any(|s| s.eq_ignore_ascii_case(scheme))
}

/// The authority after every `scheme://` in `text`.
fn authorities(text: &str) -> impl Iterator<Item = Authority<'_>> {
    memchr::memmem::find_iter(text.as_bytes(), b"://").filter_map(move |at| {
        let before = &text[..at];
        let scheme_len = before
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            .count();
        if scheme_len == 0 {
            return None;
        }
        let rest = &text[at + 3..];
        let stop = |c: char| {
            c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | ')' | ']' | '}' | '|')
        };
        let end = rest
            .find(|c: char| stop(c) || matches!(c, '/' | '?' | '#'))
            .unwrap_or(rest.len());
        let whatwg_end = rest[..end].find('\\').unwrap_or(end);
        // A bracketed IPv6 host keeps its brackets whole.
        let end = if rest.starts_with('[') {
            rest.find(']').map_or(end, |i| end.max(i + 1))
        } else {
            end
        };
        Some(Authority {
            scheme: &before[before.len() - scheme_len..],
            whatwg: &rest[..whatwg_end.min(end)],
            raw: &rest[..end],
        })
    })
}

struct Judge<'a> {
    rules: &'a ArgumentPolicy,
    url: &'a UrlPolicy,
}

impl Judge<'_> {
    fn authority(&self, whatwg: &str, raw: &str) -> Option<Found> {
        let parsed = Url::parse(&format!("http://{whatwg}/")).ok();
        let first = parsed.as_ref().and_then(|u| {
            let host = u.host()?;
            let ascii = host.to_string();
            self.judge(classify(&host), &ascii)
        });
        if first.is_some() {
            return first;
        }
        let host = raw_host(raw);
        let decoded = percent_encoding::percent_decode_str(host).decode_utf8_lossy();
        let decoded = without_zone(&decoded);
        let class = classify_text(&decoded)?;
        let ascii = url::Host::parse(&decoded).ok()?.to_string();
        self.judge(class, &ascii)
    }

    fn judge(&self, class: HostClass, ascii: &str) -> Option<Found> {
        let ascii = ascii.trim_end_matches('.');
        let matches = |list: &[HostPattern]| list.iter().any(|p| p.matches(ascii));
        if matches(&self.rules.denied_hosts) || matches(&self.url.denied_hosts) {
            return Some(Found { class: "denied" });
        }
        if matches(&self.rules.allowed_hosts) {
            return None;
        }
        // What leads inside is refused; a public address written as a number
        // (`ping 1.1.1.1`, an IP lookup) leads outside like a public name:
        // `allow_ip_literals` is about sending a person to such a link.
        let refused = match class {
            HostClass::Public | HostClass::IpLiteral => false,
            HostClass::LocalName => !self.url.allow_local_names,
            _ => true,
        };
        refused.then_some(Found {
            class: class.as_str(),
        })
    }
}

/// The host of an authority split plainly: after the last `@`, without
/// the port.
fn raw_host(authority: &str) -> &str {
    let hostport = authority.rsplit('@').next().unwrap_or(authority);
    if hostport.starts_with('[') {
        return hostport.find(']').map_or(hostport, |i| &hostport[..=i]);
    }
    hostport.split(':').next().unwrap_or(hostport)
}

/// An IPv6 literal without its zone (`[fe80::1%eth0]` is `[fe80::1]`).
fn without_zone(host: &str) -> Cow<'_, str> {
    match (host.starts_with('['), host.find('%')) {
        (true, Some(i)) => Cow::Owned(format!("{}]", &host[..i])),
        _ => Cow::Borrowed(host),
    }
}

/// Whether a URL in `value` carries a password in its user part
/// (`https://user:secret@host/`): a credential that leaves with it.
pub(crate) fn has_url_password(value: &str) -> bool {
    if !value.contains("://") || !value.contains('@') {
        return false;
    }
    let text: Cow<'_, str> = fold_value(value);
    let found = authorities(&text).any(|a| {
        a.raw
            .rsplit_once('@')
            .is_some_and(|(user, _)| user.split_once(':').is_some_and(|(_, pw)| !pw.is_empty()))
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::config::Setting;

    fn rules() -> ArgumentPolicy {
        ArgumentPolicy {
            schema: Setting::Enforce,
            undeclared: Setting::Enforce,
            secrets: Setting::Enforce,
            private_paths: Setting::Enforce,
            addresses: Setting::Enforce,
            shell: Setting::Enforce,
            cross_upstream: Setting::Enforce,
            listed_credentials: Setting::Enforce,
            local_names: Setting::Enforce,
            allowed_hosts: vec![HostPattern::parse("*.corp.example.com").unwrap()],
            denied_hosts: vec![HostPattern::parse("evil.example").unwrap()],
        }
    }

    fn class(value: &str, key: Option<&str>) -> Option<&'static str> {
        let addressed = key.is_some_and(is_address_name);
        find(value, key, addressed, &rules(), &UrlPolicy::strict()).map(|f| f.class)
    }

    #[test]
    fn urls_that_lead_inside_are_found_in_every_spelling() {
        for (v, want) in [
            ("http://169.254.169.254/latest/meta-data/iam/", "metadata"),
            ("http://2852039166/latest/", "metadata"),
            ("http://0xa9.0xfe.0xa9.0xfe/", "metadata"),
            ("http://0251.0376.0251.0376/", "metadata"),
            ("http://[::ffff:169.254.169.254]/", "metadata"),
            ("http://[fd00:ec2::254]/latest", "metadata"),
            (
                "http://metadata.google.internal/computeMetadata/v1/",
                "metadata",
            ),
            ("http://169.254.169.254.nip.io/", "metadata"),
            ("http://user@169.254.169.254/", "metadata"),
            ("http://good.example.com\\@169.254.169.254/", "metadata"),
            ("http://%31%36%39.254.169.254/", "metadata"),
            ("ｈｔｔｐ：／／１６９．２５４．１６９．２５４／", "metadata"),
            ("fetch http://127.0.0.1:8080/admin then", "loopback"),
            ("http://localhost/", "loopback"),
            ("http://[::1]:6379/", "loopback"),
            ("gopher://127.0.0.1:6379/_FLUSHALL", "loopback"),
            ("dict://2130706433:11211/stats", "loopback"),
            ("https://10.0.0.5/internal", "private"),
            ("https://192.168.1.1/", "private"),
            ("http://[fe80::1%25eth0]/", "link_local"),
            ("https://intranet/wiki", "local_name"),
            ("https://jenkins.internal/job", "local_name"),
            // A public address written as a number leads outside.
            ("https://8.8.8.8/", "public"),
            ("ping 1.1.1.1", "public"),
            ("https://evil.example/x", "denied"),
            // A subdomain of a denied host is not denied; `.example` is
            // reserved (RFC 6761): it leads nowhere, inside least of all.
            ("https://a.evil.example.", "public"),
            ("https://hooks.partner.example/x", "public"),
            ("http://x.invalid/", "public"),
            // A server's own resource scheme names no host of the network
            // (the MCP conformance server's `test://static-text`), but an
            // address under any scheme is still one.
            ("test://static-text", "public"),
            ("ui://widget/panel.html", "public"),
            ("custom://127.0.0.1/x", "loopback"),
            ("https://docs.rs/serde.", "public"),
        ] {
            let got = class(v, None);
            if want == "public" {
                assert_eq!(got, None, "{v}");
            } else {
                assert_eq!(got, Some(want), "{v}");
            }
        }
    }

    #[test]
    fn address_named_properties_are_read_without_a_scheme() {
        assert_eq!(class("169.254.169.254", Some("host")), Some("metadata"));
        assert_eq!(
            class("169.254.169.254/latest", Some("url")),
            Some("metadata")
        );
        assert_eq!(class("localhost:5432", Some("db_host")), Some("loopback"));
        assert_eq!(class("10.1.2.3", Some("ipAddress")), Some("private"));
        assert_eq!(class("example.com", Some("host")), None);
        assert_eq!(class("169.254.169.254", Some("note")), None);
        assert_eq!(class("alice@example.com", Some("email_address")), None);
        assert_eq!(class("12 Main Street", Some("address")), None);
    }

    #[test]
    fn a_name_is_an_address_name_by_its_words() {
        for key in [
            "url",
            "imageUrl",
            "image_url",
            "imageurl",
            "redirect_uri",
            "server_ip",
            "clientIP",
            "ip_address",
            "IpAddress",
            "db-host",
            "dbHostName",
            "endpoint",
            "webhook",
            "callbackUrl",
            "proxy",
            "baseURL",
            "mail server",
        ] {
            assert!(is_address_name(key), "{key}");
        }
        for key in [
            "relationship",
            "ownership",
            "zip",
            "tip",
            "observer",
            "ghost",
            "curl",
            "description",
            "email_address",
            "address",
            "partner_name",
            "hostility",
            "urlencoded_body",
        ] {
            assert!(!is_address_name(key), "{key}");
        }
    }

    #[test]
    fn a_single_word_is_a_local_machine_only_where_a_machine_is_named() {
        assert_eq!(class("intranet", Some("host")), Some("local_name"));
        assert_eq!(class("printer", Some("server")), Some("local_name"));
        assert_eq!(class("localhost", Some("url")), Some("loopback"));
        assert_eq!(class("localhost", Some("callback")), Some("loopback"));
        // A function's name, a bare word where a URL is asked.
        assert_eq!(class("handleButtonClick", Some("callback")), None);
        assert_eq!(class("home", Some("url")), None);
        // Still an address where it has the shape of one.
        assert_eq!(
            class("jenkins.internal/job", Some("callback")),
            Some("local_name")
        );
        assert_eq!(class("10.0.0.5", Some("webhook")), Some("private"));
        assert_eq!(class("intranet:8080", Some("endpoint")), Some("local_name"));
    }

    #[test]
    fn public_and_allowed_hosts_pass() {
        for v in [
            "https://example.com/a?next=https://example.org/b",
            "see https://docs.rs/url and http://crates.io",
            "https://build.corp.example.com/job/1",
            "mailto:someone@example.com",
            "no url here",
        ] {
            assert_eq!(class(v, None), None, "{v}");
        }
    }

    #[test]
    fn a_password_in_a_url_is_seen() {
        assert!(has_url_password("https://bob:hunter2@git.example.com/repo"));
        assert!(!has_url_password("https://bob@git.example.com/repo"));
        assert!(!has_url_password("https://example.com/@handle"));
    }
}
