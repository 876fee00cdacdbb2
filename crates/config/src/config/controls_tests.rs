//! The comparison over generated variants of one reviewed config: each
//! control weakened alone, strengthened alone, lists reordered, scopes
//! added and removed.

use super::*;

/// The reviewed policy, one setting a line (`section`, `key = value`).
const POLICY: &[(&str, &str)] = &[
    ("", "mode = \"enforce\""),
    ("arguments", "secrets = \"redact\""),
    ("arguments", "shell = \"monitor\""),
    ("arguments", "private_paths = \"ask\""),
    (
        "arguments",
        "allowed_hosts = [\"a.internal\", \"b.internal\"]",
    ),
    (
        "arguments",
        "denied_hosts = [\"evil.example\", \"bad.example\"]",
    ),
    (
        "url_mode",
        "allowed_hosts = [\"docs.example.com\", \"help.example.com\"]",
    ),
    ("url_mode", "allow_ip_literals = false"),
    ("content", "secrets = \"flag\""),
    ("listing", "on_change = \"flag\""),
    ("transport", "plaintext_remote = \"refuse\""),
    ("arguments", "listed_credentials = \"enforce\""),
    ("arguments", "local_names = \"enforce\""),
    ("authorization", "excessive_scopes = \"enforce\""),
];

const APPROVAL: &str = "[[approval]]\nname = \"pay\"\ntools = [\"pay\"]\n[[approval]]\nname = \"wipe\"\ntools = [\"wipe\"]\n";

/// One line of [`POLICY`] written otherwise, and the control the change
/// weakens (`None`: it does not).
struct Variant {
    key: &'static str,
    now: &'static str,
    weakens: Option<&'static str>,
}

const fn v(key: &'static str, now: &'static str, weakens: Option<&'static str>) -> Variant {
    Variant { key, now, weakens }
}

const VARIANTS: &[Variant] = &[
    v(
        "local_names",
        "local_names = \"off\"",
        Some("arguments.local_names"),
    ),
    v(
        "listed_credentials",
        "listed_credentials = \"monitor\"",
        Some("arguments.listed_credentials"),
    ),
    v(
        "excessive_scopes",
        "excessive_scopes = \"off\"",
        Some("authorization.excessive_scopes"),
    ),
    v(
        "excessive_scopes",
        "excessive_scopes = \"monitor\"",
        Some("authorization.excessive_scopes"),
    ),
    v("mode", "mode = \"monitor\"", Some("mode")),
    v(
        "arguments.secrets",
        "secrets = \"monitor\"",
        Some("arguments.secrets"),
    ),
    v(
        "arguments.secrets",
        "secrets = \"off\"",
        Some("arguments.secrets"),
    ),
    v("arguments.secrets", "secrets = \"enforce\"", None),
    // redact and ask both change the call: neither is weaker.
    v("arguments.secrets", "secrets = \"ask\"", None),
    v("shell", "shell = \"off\"", Some("arguments.shell")),
    v("shell", "shell = \"ask\"", None),
    v(
        "private_paths",
        "private_paths = \"monitor\"",
        Some("arguments.private_paths"),
    ),
    v("private_paths", "private_paths = \"enforce\"", None),
    v(
        "allowed_hosts = [\"a",
        "allowed_hosts = [\"a.internal\", \"b.internal\", \"*.internal\"]",
        Some("arguments.allowed_hosts"),
    ),
    v(
        "allowed_hosts = [\"a",
        "allowed_hosts = [\"b.internal\", \"a.internal\"]",
        None,
    ),
    v(
        "allowed_hosts = [\"a",
        "allowed_hosts = [\"a.internal\"]",
        None,
    ),
    v(
        "denied_hosts",
        "denied_hosts = [\"evil.example\"]",
        Some("arguments.denied_hosts"),
    ),
    v(
        "denied_hosts",
        "denied_hosts = [\"bad.example\", \"evil.example\"]",
        None,
    ),
    v(
        "denied_hosts",
        "denied_hosts = [\"bad.example\", \"evil.example\", \"worse.example\"]",
        None,
    ),
    v(
        "allowed_hosts = [\"docs",
        "allowed_hosts = []",
        Some("url_mode.allowed_hosts"),
    ),
    v(
        "allowed_hosts = [\"docs",
        "allowed_hosts = [\"docs.example.com\", \"help.example.com\", \"files.example.net\"]",
        Some("url_mode.allowed_hosts"),
    ),
    v(
        "allowed_hosts = [\"docs",
        "allowed_hosts = [\"help.example.com\", \"docs.example.com\"]",
        None,
    ),
    v(
        "allowed_hosts = [\"docs",
        "allowed_hosts = [\"docs.example.com\"]",
        None,
    ),
    v(
        "allow_ip_literals",
        "allow_ip_literals = true",
        Some("url_mode.allow_ip_literals"),
    ),
    v(
        "content.secrets",
        "secrets = \"off\"",
        Some("content.secrets"),
    ),
    v("content.secrets", "secrets = \"redact\"", None),
    v(
        "on_change",
        "on_change = \"allow\"",
        Some("listing.on_change"),
    ),
    v("on_change", "on_change = \"remove\"", None),
    v(
        "plaintext_remote",
        "plaintext_remote = \"warn\"",
        Some("transport.plaintext_remote"),
    ),
];

/// [`POLICY`] with the line `key` names replaced by `now` (a key with a
/// section prefix names the line of that section).
fn policy_text(replace: Option<(&str, &str)>, approval: &str) -> String {
    let mut sections: Vec<(&str, Vec<String>)> = Vec::new();
    for (section, line) in POLICY {
        let mut line = (*line).to_owned();
        if let Some((key, now)) = replace {
            let (want_section, key) = key.split_once('.').unwrap_or(("", key));
            let section_matches = want_section.is_empty() || want_section == *section;
            if section_matches && line.starts_with(key) {
                line = now.to_owned();
            }
        }
        match sections.iter_mut().find(|(s, _)| s == section) {
            Some((_, lines)) => lines.push(line),
            None => sections.push((section, vec![line])),
        }
    }
    let mut out = String::from("extends = \"untrusted\"\n");
    for (section, lines) in &sections {
        if !section.is_empty() {
            out.push_str(&format!("[{section}]\n"));
        }
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    out + approval
}

const PIN_A: &str = "sha256/AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
const PIN_B: &str = "sha256/AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";

/// The reviewed upstream `api` and route `/mcp` (an API key required).
const UPSTREAM: &str = "url = \"https://api.internal/mcp\"\ntls_pins = [\"PIN_A\", \"PIN_B\"]\n";
const ROUTE: &str = "auth = [\"keys\"]\n";

struct Parts<'a> {
    policy: String,
    upstream: &'a str,
    route: &'a str,
    top: &'a str,
    more: &'a str,
    /// The upstream's id and the route's path.
    names: (&'a str, &'a str),
}

fn reviewed() -> Parts<'static> {
    Parts {
        policy: policy_text(None, APPROVAL),
        upstream: UPSTREAM,
        route: ROUTE,
        top: "",
        more: "",
        names: ("api", "/mcp"),
    }
}

fn load(parts: &Parts<'_>) -> GatewayConfig {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    std::fs::write(policies.join("p.toml"), &parts.policy).unwrap();
    let hash = crate::identify::hash_key("pcl_test-key-0123456789abcdef");
    let upstream = parts
        .upstream
        .replace("PIN_A", PIN_A)
        .replace("PIN_B", PIN_B);
    let text = format!(
        "{top}[[listener]]\naddress = \"127.0.0.1:0\"\n[policies]\ndir = \"policies\"\n\
         [[auth]]\nname = \"keys\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"alice\"\nhash = \"{hash}\"\n\
         [[upstream]]\nid = \"{id}\"\nname = \"API\"\npolicy = \"p\"\n{upstream}\
         [[route]]\npath = \"{path}\"\nupstream = \"{id}\"\n{route}{more}",
        id = parts.names.0,
        path = parts.names.1,
        top = parts.top,
        route = parts.route,
        more = parts.more,
    );
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, text).unwrap();
    GatewayConfig::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn changes(old: &Parts<'_>, new: &Parts<'_>) -> Vec<Weakened> {
    weakened(
        &SecurityControls::of(&load(old)),
        &SecurityControls::of(&load(new)),
    )
}

fn controls(w: &[Weakened]) -> Vec<(Scope, &'static str)> {
    w.iter().map(|w| (w.scope.clone(), w.control)).collect()
}

fn api() -> Scope {
    Scope::Upstream("api".into())
}

#[test]
fn the_same_config_weakens_nothing() {
    assert_eq!(changes(&reviewed(), &reviewed()), []);
    assert!(SecurityControls::of(&load(&reviewed())).len() > 30);
}

#[test]
fn each_policy_control_weakened_alone_is_named_and_nothing_else() {
    let old = load(&reviewed());
    for v in VARIANTS {
        let text = policy_text(Some((v.key, v.now)), APPROVAL);
        assert_ne!(text, reviewed().policy, "{} matches no line", v.key);
        let new = load(&Parts {
            policy: text,
            ..reviewed()
        });
        let found = weakened(&SecurityControls::of(&old), &SecurityControls::of(&new));
        let want: Vec<_> = v.weakens.iter().map(|c| (api(), *c)).collect();
        assert_eq!(controls(&found), want, "{} -> {}", v.key, v.now);
        // The other way round is never a weakening of the same control.
        let back = weakened(&SecurityControls::of(&new), &SecurityControls::of(&old));
        if v.weakens.is_some() {
            assert!(
                back.iter().all(|b| Some(b.control) != v.weakens),
                "{} back: {back:?}",
                v.now
            );
        }
    }
}

#[test]
fn a_weakening_says_what_it_was_and_what_it_is() {
    let new = Parts {
        policy: policy_text(Some(("arguments.secrets", "secrets = \"off\"")), APPROVAL),
        ..reviewed()
    };
    let found = changes(&reviewed(), &new);
    assert_eq!(
        (found[0].from.as_str(), found[0].to.as_str()),
        ("redact", "off")
    );
    assert_eq!(
        found[0].to_string(),
        "upstream \"api\" arguments.secrets: redact -> off"
    );
    let any = Parts {
        policy: policy_text(
            Some(("allowed_hosts = [\"docs", "allowed_hosts = []")),
            APPROVAL,
        ),
        ..reviewed()
    };
    let found = changes(&reviewed(), &any);
    assert_eq!(
        (found[0].from.as_str(), found[0].to.as_str()),
        ("[docs.example.com, help.example.com]", "[*]")
    );
}

#[test]
fn an_approval_rule_removed_weakens_and_one_added_or_moved_does_not() {
    let one = "[[approval]]\nname = \"pay\"\ntools = [\"pay\"]\n";
    let removed = Parts {
        policy: policy_text(None, one),
        ..reviewed()
    };
    assert_eq!(
        controls(&changes(&reviewed(), &removed)),
        [(api(), "approval")]
    );
    assert_eq!(changes(&removed, &reviewed()), []);
    let swapped = "[[approval]]\nname = \"wipe\"\ntools = [\"wipe\"]\n[[approval]]\nname = \"pay\"\ntools = [\"pay\"]\n";
    let moved = Parts {
        policy: policy_text(None, swapped),
        ..reviewed()
    };
    assert_eq!(changes(&reviewed(), &moved), []);
}

#[test]
fn an_upstreams_transport_weakened_is_named() {
    let plain = Parts {
        upstream: "url = \"http://api.internal/mcp\"\nallow_plaintext = true\n",
        ..reviewed()
    };
    assert_eq!(
        controls(&changes(&reviewed(), &plain)),
        [
            (api(), "upstream.allow_plaintext"),
            (api(), "upstream.tls_pins"),
            (api(), "upstream.url"),
        ]
    );
    assert_eq!(changes(&plain, &reviewed()), [], "https again is stronger");
    let unpinned = Parts {
        upstream: "url = \"https://api.internal/mcp\"\n",
        ..reviewed()
    };
    assert_eq!(
        controls(&changes(&reviewed(), &unpinned)),
        [(api(), "upstream.tls_pins")]
    );
    let one_pin = Parts {
        upstream: "url = \"https://api.internal/mcp\"\ntls_pins = [\"PIN_A\"]\n",
        ..reviewed()
    };
    assert_eq!(changes(&reviewed(), &one_pin), [], "fewer keys accepted");
    assert_eq!(
        controls(&changes(&one_pin, &reviewed())),
        [(api(), "upstream.tls_pins")],
        "another key accepted"
    );
    let reordered = Parts {
        upstream: "url = \"https://api.internal/mcp\"\ntls_pins = [\"PIN_B\", \"PIN_A\"]\n",
        ..reviewed()
    };
    assert_eq!(changes(&reviewed(), &reordered), []);
    let forwarded = Parts {
        upstream: "url = \"https://api.internal/mcp\"\ntls_pins = [\"PIN_A\", \"PIN_B\"]\nforward_authorization = true\n",
        ..reviewed()
    };
    assert_eq!(
        controls(&changes(&reviewed(), &forwarded)),
        [(api(), "upstream.forward_authorization")]
    );
}

#[test]
fn a_routes_authentication_removed_or_widened_is_named() {
    let route = || Scope::Route("/mcp".into());
    let open = Parts {
        route: "",
        ..reviewed()
    };
    assert_eq!(
        controls(&changes(&reviewed(), &open)),
        [(route(), "route.auth")]
    );
    let also_anonymous = Parts {
        route: "auth = [\"keys\"]\nallow_anonymous = true\n",
        ..reviewed()
    };
    assert_eq!(
        controls(&changes(&reviewed(), &also_anonymous)),
        [(route(), "route.auth")]
    );
    assert_eq!(changes(&open, &reviewed()), []);
    let tasks = Parts {
        route: "auth = [\"keys\"]\ntasks = \"refuse\"\n",
        ..reviewed()
    };
    assert_eq!(changes(&reviewed(), &tasks), []);
    assert_eq!(
        controls(&changes(&tasks, &reviewed())),
        [(route(), "route.tasks")]
    );
}

#[test]
fn a_routes_permissions_widened_are_named() {
    let route = || Scope::Route("/mcp".into());
    let rules = "auth = [\"keys\"]\n[[route.allow]]\ntools = [\"get_*\"]\n[[route.deny]]\nprincipals = [\"mallory\"]\ntools = [\"*\"]\n[[route.deny]]\ntools = [\"delete_*\"]\n";
    let rules_reviewed = Parts {
        route: rules,
        ..reviewed()
    };
    let variants: &[(&str, Option<&str>)] = &[
        // unchanged
        ("[[route.allow]]\ntools = [\"get_*\"]\n", None),
        // another allow rule, or a wider one, lets more through
        (
            "[[route.allow]]\ntools = [\"get_*\"]\n[[route.allow]]\ntools = [\"set_*\"]\n",
            Some("route.allow"),
        ),
        (
            "[[route.allow]]\ntools = [\"get_*\", \"set_*\"]\n",
            Some("route.allow"),
        ),
        // every allow rule gone: anything goes
        ("", Some("route.allow")),
    ];
    let deny = "[[route.deny]]\nprincipals = [\"mallory\"]\ntools = [\"*\"]\n[[route.deny]]\ntools = [\"delete_*\"]\n";
    for (allow, weakens) in variants {
        let text = format!("auth = [\"keys\"]\n{allow}{deny}");
        let new = Parts {
            route: &text,
            ..reviewed()
        };
        let found = controls(&changes(&rules_reviewed, &new));
        let want: Vec<_> = weakens.iter().map(|c| (route(), *c)).collect();
        assert_eq!(found, want, "{allow}");
    }
    let one_deny = "auth = [\"keys\"]\n[[route.allow]]\ntools = [\"get_*\"]\n[[route.deny]]\ntools = [\"delete_*\"]\n";
    let fewer = Parts {
        route: one_deny,
        ..reviewed()
    };
    assert_eq!(
        controls(&changes(&rules_reviewed, &fewer)),
        [(route(), "route.deny")]
    );
    assert_eq!(changes(&fewer, &rules_reviewed), [], "a deny rule added");
    let reordered = "auth = [\"keys\"]\n[[route.allow]]\ntools = [\"get_*\"]\n[[route.deny]]\ntools = [\"delete_*\"]\n[[route.deny]]\nprincipals = [\"mallory\"]\ntools = [\"*\"]\n";
    let moved = Parts {
        route: reordered,
        ..reviewed()
    };
    assert_eq!(changes(&rules_reviewed, &moved), []);
}

#[test]
fn the_gateways_own_controls_weakened_are_named() {
    let refuse = Parts {
        top: "[reload]\non_weakened = \"refuse\"\n[security]\nallowed_origins = [\"https://app.example\"]\n",
        ..reviewed()
    };
    let apply = Parts {
        top: "[security]\nallowed_origins = [\"https://app.example\", \"https://other.example\"]\n",
        ..reviewed()
    };
    assert_eq!(
        controls(&changes(&refuse, &apply)),
        [
            (Scope::Gateway, "reload.on_weakened"),
            (Scope::Gateway, "security.allowed_origins"),
        ]
    );
    assert_eq!(changes(&apply, &refuse), []);
}

#[test]
fn a_listener_that_drops_tls_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert, key) = (dir.path().join("gw.pem"), dir.path().join("gw.key"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.key_pair.serialize_pem()).unwrap();
    let tls = format!(
        "[[listener]]\nname = \"public\"\naddress = \"127.0.0.1:0\"\n[listener.tls]\ncert = \"{}\"\nkey = \"{}\"\n",
        cert.display(),
        key.display()
    );
    let plain = "[[listener]]\nname = \"public\"\naddress = \"127.0.0.1:0\"\n";
    let rest = "[[upstream]]\nid = \"u\"\nname = \"U\"\nurl = \"http://127.0.0.1:9/mcp\"\n[[route]]\npath = \"/mcp\"\nupstream = \"u\"\n";
    let load = |listener: &str| {
        let path = dir.path().join("gw.toml");
        std::fs::write(&path, format!("{listener}{rest}")).unwrap();
        SecurityControls::of(&GatewayConfig::load(&path).unwrap_or_else(|e| panic!("{e}")))
    };
    let found = weakened(&load(&tls), &load(plain));
    assert_eq!(
        controls(&found),
        [(Scope::Listener("public".into()), "listener.tls")]
    );
    assert_eq!(
        found[0].to_string(),
        "listener \"public\" listener.tls: on -> off"
    );
    assert_eq!(weakened(&load(plain), &load(&tls)), []);
}

#[test]
fn an_upstream_added_or_removed_weakens_no_other() {
    let second = "[[upstream]]\nid = \"docs\"\nname = \"Docs\"\nurl = \"http://127.0.0.1:9/mcp\"\npolicy = \"trusted\"\n[[route]]\npath = \"/docs\"\nupstream = \"docs\"\n";
    let with = Parts {
        more: second,
        ..reviewed()
    };
    assert_eq!(
        changes(&reviewed(), &with),
        [],
        "a new upstream is reviewed as new"
    );
    assert_eq!(
        changes(&with, &reviewed()),
        [],
        "a removed one takes its traffic"
    );
}

/// A new id or path does not make a weakened upstream or route new: the
/// same endpoint (the same endpoints served) is the same one.
#[test]
fn a_renamed_upstream_or_route_is_compared_with_what_it_was() {
    let renamed = |policy: Option<(&str, &str)>, route: &'static str| Parts {
        policy: policy_text(policy, APPROVAL),
        route,
        names: ("api2", "/mcp2"),
        ..reviewed()
    };
    assert_eq!(
        changes(&reviewed(), &renamed(None, ROUTE)),
        [],
        "renamed alone"
    );
    assert_eq!(
        controls(&changes(
            &reviewed(),
            &renamed(Some(("arguments.secrets", "secrets = \"off\"")), "")
        )),
        [
            (Scope::Upstream("api2".into()), "arguments.secrets"),
            (Scope::Route("/mcp2".into()), "route.auth"),
        ]
    );
}

#[test]
fn the_config_paths_are_keys_of_the_files() {
    // A stdio program's controls, which the reviewed config has none of.
    for path in ["upstream.sandbox", "upstream.sandbox.network"] {
        assert!(crate::config::file_shape().at(path).is_some(), "{path}");
    }
    let table = SecurityControls::of(&load(&reviewed()));
    let policy = crate::policy::config::PolicySet::load(None).unwrap();
    let paths: Vec<&str> = policy
        .get("untrusted")
        .unwrap()
        .controls()
        .iter()
        .map(|c| c.path)
        .collect();
    for (scope, path) in table.table.keys() {
        let in_policy = matches!(scope, Scope::Upstream(_)) && paths.contains(path);
        assert!(
            in_policy || crate::config::file_shape().at(path).is_some(),
            "{scope:?} {path}"
        );
    }
}
