//! Where a host leads: the one reading of a host that URL-mode elicitation
//! (`url_rules.rs`) and the addresses in a call's arguments
//! (`arguments/hosts.rs`) share.
//!
//! A host is read as a browser or an HTTP client would read it (the WHATWG
//! URL standard, the `url` crate): percent escapes and IDNA mapping undone
//! (`１２７．０．０．１`, `%31%32%37.0.0.1`), IPv4 in every spelling the
//! standard accepts (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`), IPv6
//! with what it embeds (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible,
//! NAT64 `64:ff9b::/96`, 6to4 `2002::/16`), and a name that spells an
//! address in its labels (`169.254.169.254.nip.io`, `10-0-0-1.sslip.io`,
//! `7f000001.nip.io`) as that address. Then its class: cloud metadata
//! (`data/arguments/metadata-hosts.txt`), loopback, private, link-local,
//! reserved, a name of the local network (`policies/data/local-network-names.txt`),
//! a public IP literal, or a public name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use url::Host;

use super::url_rules::HostPattern;

/// Where a host leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostClass {
    /// A cloud instance metadata service (it hands out the machine's own
    /// credentials).
    Metadata,
    /// This machine: `127.0.0.0/8`, `::1`, `0.0.0.0/8`, `::`, `localhost`.
    Loopback,
    /// A private network: `10/8`, `172.16/12`, `192.168/16`, `100.64/10`
    /// (shared address space), `198.18/15`, `fc00::/7`, `fec0::/10`.
    Private,
    /// `169.254/16`, `fe80::/10`.
    LinkLocal,
    /// Multicast, broadcast, documentation and other reserved ranges.
    Reserved,
    /// A name of the local machine or network (a single label,
    /// `*.internal`, `*.local`, …).
    LocalName,
    /// A public address written as a number.
    IpLiteral,
    /// A public name.
    Public,
}

impl HostClass {
    /// Stable snake_case name (`data.addressClass`, verdict details).
    pub fn as_str(self) -> &'static str {
        match self {
            HostClass::Metadata => "metadata",
            HostClass::Loopback => "loopback",
            HostClass::Private => "private",
            HostClass::LinkLocal => "link_local",
            HostClass::Reserved => "reserved",
            HostClass::LocalName => "local_name",
            HostClass::IpLiteral => "ip_literal",
            HostClass::Public => "public",
        }
    }

    /// Whether the host leads into the machine or its networks.
    pub fn is_inside(self) -> bool {
        !matches!(self, HostClass::IpLiteral | HostClass::Public)
    }
}

/// The class of a host as the WHATWG parser read it (`ascii` is its ASCII
/// form, lower case, for names).
pub(crate) fn classify(host: &Host<&str>) -> HostClass {
    match host {
        Host::Ipv4(a) => classify_ip(IpAddr::V4(*a)),
        Host::Ipv6(a) => classify_ip(IpAddr::V6(*a)),
        Host::Domain(d) => classify_name(d),
    }
}

/// The class of a host written as text (a bare host, or a URL's host),
/// read as the WHATWG parser reads a special URL's host; `None` when it is
/// no host at all.
pub fn classify_text(host: &str) -> Option<HostClass> {
    let host = host.trim();
    let parsed = Host::parse(host).ok()?;
    Some(match &parsed {
        Host::Domain(d) => classify_name(d),
        Host::Ipv4(a) => classify_ip(IpAddr::V4(*a)),
        Host::Ipv6(a) => classify_ip(IpAddr::V6(*a)),
    })
}

fn classify_name(name: &str) -> HostClass {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if metadata().names.iter().any(|p| p.matches(&name)) {
        return HostClass::Metadata;
    }
    if name == "localhost" || name.ends_with(".localhost") {
        return HostClass::Loopback;
    }
    if let Some((_, class)) = inside_names().iter().find(|(p, _)| p.matches(&name)) {
        return *class;
    }
    if let Some(embedded) = embedded_address(&name) {
        let class = classify_ip(embedded);
        if class.is_inside() {
            return class;
        }
    }
    if leads_inside(&name) {
        return HostClass::LocalName;
    }
    HostClass::Public
}

/// The class of an address; an IPv6 address that carries an IPv4 one is
/// read as that.
pub(crate) fn classify_ip(ip: IpAddr) -> HostClass {
    if metadata().addresses.contains(&ip) {
        return HostClass::Metadata;
    }
    match ip {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => match embedded_v4(a) {
            Some(v4) => classify_ip(IpAddr::V4(v4)),
            None => classify_v6(a),
        },
    }
}

fn classify_v4(a: Ipv4Addr) -> HostClass {
    let [o1, o2, o3, _] = a.octets();
    if a.is_loopback() || o1 == 0 {
        return HostClass::Loopback;
    }
    if a.is_private() || (o1 == 100 && (64..128).contains(&o2)) || (o1 == 198 && (o2 & 0xfe) == 18)
    {
        return HostClass::Private;
    }
    if a.is_link_local() {
        return HostClass::LinkLocal;
    }
    let documentation = matches!((o1, o2, o3), (192, 0, 2) | (198, 51, 100) | (203, 0, 113));
    if a.is_multicast() || a.is_broadcast() || o1 >= 240 || documentation || (o1, o2) == (192, 0) {
        return HostClass::Reserved;
    }
    HostClass::IpLiteral
}

fn classify_v6(a: Ipv6Addr) -> HostClass {
    let s = a.segments();
    if a.is_loopback() || a.is_unspecified() {
        return HostClass::Loopback;
    }
    if (s[0] & 0xfe00) == 0xfc00 || (s[0] & 0xffc0) == 0xfec0 {
        return HostClass::Private;
    }
    if (s[0] & 0xffc0) == 0xfe80 {
        return HostClass::LinkLocal;
    }
    if a.is_multicast() || s[0] == 0x2001 && s[1] == 0x0db8 || s[0] == 0x0100 {
        return HostClass::Reserved;
    }
    HostClass::IpLiteral
}

/// The IPv4 address an IPv6 one carries: IPv4-mapped (`::ffff:0:0/96`),
/// IPv4-compatible (`::/96`, but `::` and `::1`), NAT64 (`64:ff9b::/96`,
/// `64:ff9b:1::/48`), 6to4 (`2002::/16`).
fn embedded_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = a.segments();
    let low = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = a.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1) {
        return Some(low(s[6], s[7]));
    }
    if s[0] == 0x0064 && s[1] == 0xff9b {
        return Some(low(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(low(s[1], s[2]));
    }
    None
}

/// An address spelled in a name's labels, as wildcard DNS services answer
/// them: four decimal labels (`10.0.0.1.nip.io`), a label of four
/// dash-separated numbers (`10-0-0-1.sslip.io`, also ending one:
/// `app-10-0-0-1.sslip.io`), or eight hex digits (`0a000001.nip.io`).
fn embedded_address(name: &str) -> Option<IpAddr> {
    let labels: Vec<&str> = name.split('.').collect();
    for window in labels.windows(4) {
        let dotted = window.join(".");
        if let Ok(a) = dotted.parse::<Ipv4Addr>() {
            return Some(IpAddr::V4(a));
        }
    }
    for label in &labels {
        let parts: Vec<&str> = label.split('-').collect();
        if parts.len() >= 4 {
            let dotted = parts[parts.len() - 4..].join(".");
            if let Ok(a) = dotted.parse::<Ipv4Addr>() {
                return Some(IpAddr::V4(a));
            }
            let dotted = parts[..4].join(".");
            if let Ok(a) = dotted.parse::<Ipv4Addr>() {
                return Some(IpAddr::V4(a));
            }
        }
        if label.len() == 8 && labels.len() > 2 && label.bytes().all(|b| b.is_ascii_hexdigit()) {
            if let Ok(n) = u32::from_str_radix(label, 16) {
                return Some(IpAddr::V4(Ipv4Addr::from(n)));
            }
        }
    }
    None
}

/// The shipped list of local-network names (data, not code).
fn network_names() -> &'static [HostPattern] {
    static NAMES: OnceLock<Vec<HostPattern>> = OnceLock::new();
    NAMES.get_or_init(|| {
        patterns(include_str!(
            "../../../../policies/data/local-network-names.txt"
        ))
    })
}

/// The shipped list of special-use names that lead nowhere (data, not code).
fn nowhere_names() -> &'static [HostPattern] {
    static NAMES: OnceLock<Vec<HostPattern>> = OnceLock::new();
    NAMES.get_or_init(|| patterns(include_str!("../../../../policies/data/nowhere-names.txt")))
}

/// A name that leads into the local machine or network: a single label, or
/// on the list of local-network names.
fn leads_inside(ascii_host: &str) -> bool {
    !ascii_host.contains('.') || network_names().iter().any(|p| p.matches(ascii_host))
}

/// A name no person should be sent to by a link: one leading inside, or a
/// special-use name that leads nowhere.
pub(crate) fn is_local_name(ascii_host: &str) -> bool {
    leads_inside(ascii_host) || nowhere_names().iter().any(|p| p.matches(ascii_host))
}

/// Names of this machine and its platform (`data/arguments/inside-names.txt`),
/// with the class of what they stand for.
fn inside_names() -> &'static [(HostPattern, HostClass)] {
    static LIST: OnceLock<Vec<(HostPattern, HostClass)>> = OnceLock::new();
    LIST.get_or_init(|| {
        lines(data_file!("arguments/inside-names.txt"))
            .filter_map(|line| {
                let mut parts = line.split_whitespace();
                let pattern = HostPattern::parse(parts.next()?).ok()?;
                let class = match parts.next()? {
                    "loopback" => HostClass::Loopback,
                    "private" => HostClass::Private,
                    _ => return None,
                };
                Some((pattern, class))
            })
            .collect()
    })
}

struct Metadata {
    names: Vec<HostPattern>,
    addresses: Vec<IpAddr>,
}

fn metadata() -> &'static Metadata {
    static LIST: OnceLock<Metadata> = OnceLock::new();
    LIST.get_or_init(|| {
        let text = data_file!("arguments/metadata-hosts.txt");
        let mut names = Vec::new();
        let mut addresses = Vec::new();
        for line in lines(text) {
            match line.parse::<IpAddr>() {
                Ok(ip) => addresses.push(ip),
                Err(_) => names.extend(HostPattern::parse(line).ok()),
            }
        }
        Metadata { names, addresses }
    })
}

fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

fn patterns(text: &str) -> Vec<HostPattern> {
    lines(text)
        .filter_map(|l| HostPattern::parse(l).ok())
        .collect()
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    network_names();
    nowhere_names();
    inside_names();
    metadata();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(host: &str) -> HostClass {
        classify_text(host).unwrap_or_else(|| panic!("{host} is no host"))
    }

    #[test]
    fn every_spelling_of_the_metadata_address_is_metadata() {
        for host in [
            "169.254.169.254",
            "2852039166",
            "0xa9fea9fe",
            "0xA9.0xFE.0xA9.0xFE",
            "0251.0376.0251.0376",
            "169.254.43518",
            "[::ffff:169.254.169.254]",
            "[::ffff:a9fe:a9fe]",
            "[64:ff9b::a9fe:a9fe]",
            "[2002:a9fe:a9fe::]",
            "[fd00:ec2::254]",
            "１６９．２５４．１６９．２５４",
            "%31%36%39.254.169.254",
            "169.254.169.254.nip.io",
            "169-254-169-254.sslip.io",
            "metadata.google.internal",
            "METADATA.google.internal.",
            "metadata",
            "a9fea9fe.nip.io",
        ] {
            assert_eq!(class(host), HostClass::Metadata, "{host}");
        }
    }

    #[test]
    fn loopback_private_and_link_local_in_every_spelling() {
        for (host, want) in [
            ("127.0.0.1", HostClass::Loopback),
            ("2130706433", HostClass::Loopback),
            ("0x7f.1", HostClass::Loopback),
            ("0177.0.0.1", HostClass::Loopback),
            ("127.1", HostClass::Loopback),
            ("0.0.0.0", HostClass::Loopback),
            ("0", HostClass::Loopback),
            ("[::1]", HostClass::Loopback),
            ("[::]", HostClass::Loopback),
            ("[0:0:0:0:0:ffff:7f00:1]", HostClass::Loopback),
            ("localhost", HostClass::Loopback),
            ("api.localhost", HostClass::Loopback),
            ("ⓛⓞⓒⓐⓛⓗⓞⓢⓣ", HostClass::Loopback),
            ("127.0.0.1.nip.io", HostClass::Loopback),
            ("10.0.0.5", HostClass::Private),
            ("012.0.0.5", HostClass::Private),
            ("172.16.3.4", HostClass::Private),
            ("192.168.1.1", HostClass::Private),
            ("3232235777", HostClass::Private),
            ("100.64.0.1", HostClass::Private),
            ("[fd12:3456::1]", HostClass::Private),
            ("app-10-1-2-3.sslip.io", HostClass::Private),
            ("169.254.1.1", HostClass::LinkLocal),
            ("[fe80::1]", HostClass::LinkLocal),
            ("224.0.0.1", HostClass::Reserved),
            ("255.255.255.255", HostClass::Reserved),
            ("intranet", HostClass::LocalName),
            ("git.corp", HostClass::LocalName),
            ("nas.local", HostClass::LocalName),
            // This machine and its platform by the names every system gives
            // them: never the organization's own names.
            ("localhost.localdomain", HostClass::Loopback),
            ("LOCALHOST6.", HostClass::Loopback),
            ("ip6-loopback", HostClass::Loopback),
            ("app.localtest.me", HostClass::Loopback),
            ("host.docker.internal", HostClass::Private),
            ("host.containers.internal", HostClass::Private),
            ("kubernetes", HostClass::Private),
            ("8.8.8.8", HostClass::IpLiteral),
            ("[2606:4700::1111]", HostClass::IpLiteral),
            ("example.com", HostClass::Public),
            ("8.8.8.8.example.com", HostClass::Public),
            ("deadbeef.example.com", HostClass::Public),
        ] {
            assert_eq!(class(host), want, "{host}");
        }
    }

    #[test]
    fn what_is_no_host_is_none() {
        for text in ["", "a b", "user@host", "[::1", "exa mple.com"] {
            assert_eq!(classify_text(text), None, "{text}");
        }
    }
}
