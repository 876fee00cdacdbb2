//! A browser signs in to the approval page once (issue 38): the approver
//! pastes an API key of the call's route into the page's form, is given a
//! sealed session cookie, and decides with it — over real loopback HTTP,
//! with a plain HTTP client that keeps cookies by hand and follows no
//! redirect, as a browser's requests look on the wire. The cookie says who
//! signed in and until when, never the credential; a tampered or expired
//! one, one of another approver, a forged form and a return path from the
//! request are refused, and every refused sign-in is recorded.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::approval_page::{calls, csrf_of, keyed, linked, retry, rooms, ALICE, BOB, CAROL};
use crate::common::*;

/// Only bob may decide, by name (carol's group is not named).
const BOB_ONLY: &str = "name = \"second\"\ntools = [\"cancel_booking\"]\napprover = \"approvers\"\napprovers = [\"bob\"]\ntimeout = \"20s\"";
/// Only carol may decide.
const CAROL_ONLY: &str = "name = \"second\"\ntools = [\"cancel_booking\"]\napprover = \"approvers\"\napprovers = [\"carol\"]\ntimeout = \"20s\"";

/// A browser: its cookie jar, kept by hand from `Set-Cookie`.
#[derive(Default, Clone)]
struct Browser {
    jar: BTreeMap<String, String>,
}

/// What one request of the browser got.
struct Got {
    status: u16,
    location: Option<String>,
    set_cookies: Vec<String>,
    html: String,
}

impl Browser {
    fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }

    fn cookie_header(&self) -> Option<String> {
        (!self.jar.is_empty()).then(|| {
            self.jar
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Got {
        let req = match self.cookie_header() {
            Some(c) => req.header("cookie", c),
            None => req,
        };
        let resp = req.header("accept", "text/html").send().await.unwrap();
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_owned());
        let set_cookies: Vec<String> = resp
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        for c in &set_cookies {
            let (pair, attrs) = c.split_once(';').unwrap_or((c, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || attrs.contains("Max-Age=0") {
                self.jar.remove(name);
            } else {
                self.jar.insert(name.to_owned(), value.to_owned());
            }
        }
        Got {
            status,
            location,
            set_cookies,
            html: resp.text().await.unwrap(),
        }
    }

    async fn get(&mut self, url: &str) -> Got {
        self.send(Self::client().get(url)).await
    }

    async fn post(&mut self, url: &str, form: &str) -> Got {
        self.send(
            Self::client()
                .post(url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form.to_owned()),
        )
        .await
    }

    /// Open the approval, sign in with `key` on the form it shows.
    async fn sign_in(&mut self, admin: &str, link: &str, key: &str) -> Got {
        let asked = self.get(link).await;
        assert_eq!(asked.status, 401, "{}", asked.html);
        let form_csrf = csrf_of(&asked.html);
        let id = link.rsplit('/').next().unwrap();
        self.post(
            &format!("http://{admin}/approvals/sign-in"),
            &format!("csrf={form_csrf}&approval={id}&credential={key}"),
        )
        .await
    }
}

fn session_cookie(got: &Got) -> &str {
    got.set_cookies
        .iter()
        .find(|c| c.starts_with("portcullis-approver=") && !c.contains("Max-Age=0"))
        .unwrap_or_else(|| panic!("a session cookie: {:?}", got.set_cookies))
}

/// The gateway with an audit trail: its text and the trail's path.
fn audited(
    up: &ScriptedUpstream,
    rule: &str,
    dir: &tempfile::TempDir,
) -> (String, std::path::PathBuf) {
    let trail = dir.path().join("audit.jsonl");
    let text = keyed(up, rule).replace(
        "[audit]\nsink = \"off\"",
        &format!("[audit]\nsink = \"file\"\npath = \"{}\"", trail.display()),
    );
    (text, trail)
}

fn events(trail: &std::path::Path, name: &str) -> Vec<Value> {
    std::fs::read_to_string(trail)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == name)
        .collect()
}

#[tokio::test]
async fn an_approver_signs_in_once_and_decides_with_the_cookie() {
    let up = rooms().await;
    let dir = tempfile::tempdir().unwrap();
    let (text, trail) = audited(&up, BOB_ONLY, &dir);
    let gw = start_gateway(&text).await;
    let (c, g) = (client(), url(&gw));
    let admin = gw.admin_addr.unwrap().to_string();
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);

    let mut bob = Browser::default();
    let signed = bob.sign_in(&admin, &link, BOB).await;
    assert_eq!(signed.status, 303, "{}", signed.html);
    let id = link.rsplit('/').next().unwrap();
    assert_eq!(
        signed.location.as_deref(),
        Some(format!("/approvals/{id}").as_str()),
        "back to the approval, as a path of the page"
    );
    let cookie = session_cookie(&signed);
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=28800"] {
        assert!(cookie.contains(attr), "{attr}: {cookie}");
    }
    assert!(
        !cookie.contains("Secure") && !cookie.starts_with("__Host-"),
        "plain http: no Secure cookie: {cookie}"
    );
    assert!(
        !cookie.contains(BOB) && !cookie.contains("bob"),
        "sealed, never the credential: {cookie}"
    );
    let shown = bob.get(&link).await;
    assert_eq!(shown.status, 200, "{}", shown.html);
    assert!(
        shown.html.contains("Sign out") && !shown.html.contains(BOB),
        "{}",
        shown.html
    );
    // The cookie makes the approval's own token matter: without it, nothing.
    let forged = bob.post(&link, "csrf=forged&decision=approve").await;
    assert_eq!(forged.status, 403, "{}", forged.html);
    assert!(calls(&up).is_empty(), "nothing went upstream");
    let decided = bob
        .post(
            &link,
            &format!("csrf={}&decision=approve", decision_token(&shown.html)),
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.html);
    let done = waiting.await.unwrap();
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(calls(&up).len(), 1);
    gw.shutdown().await;
    let approved = events(&trail, "approval")
        .into_iter()
        .find(|e| e["step"] == "approved")
        .expect("an approved step");
    assert_eq!(approved["decided_by"], "keys:bob", "{approved}");
    let trail_text = std::fs::read_to_string(&trail).unwrap();
    assert!(!trail_text.contains(BOB), "the key is never written");
}

/// The token of the approval's own decision forms (not the sign-out form's).
fn decision_token(html: &str) -> String {
    let at = html.find("name=\"decision\"").expect("a decision form");
    let form_start = html[..at].rfind("<form").unwrap();
    csrf_of(&html[form_start..])
}

#[tokio::test]
async fn a_tampered_or_foreign_cookie_is_refused_and_recorded() {
    let up = rooms().await;
    let dir = tempfile::tempdir().unwrap();
    let (text, trail) = audited(&up, BOB_ONLY, &dir);
    let gw = start_gateway(&text).await;
    let (c, g) = (client(), url(&gw));
    let admin = gw.admin_addr.unwrap().to_string();
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);
    let mut bob = Browser::default();
    assert_eq!(bob.sign_in(&admin, &link, BOB).await.status, 303);
    let sealed = bob.jar["portcullis-approver"].clone();
    // Every byte flipped somewhere in the sealed value: refused.
    let mut tampered = bob.clone();
    let mut bytes = sealed.clone().into_bytes();
    let last = bytes.len() - 2;
    bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
    let tampered_value = String::from_utf8(bytes).unwrap();
    tampered
        .jar
        .insert("portcullis-approver".into(), tampered_value.clone());
    let got = tampered.get(&link).await;
    assert_eq!(got.status, 401, "{}", got.html);
    assert!(
        got.set_cookies
            .iter()
            .any(|c| c.starts_with("portcullis-approver=;") || c.contains("Max-Age=0")),
        "the broken cookie is removed: {:?}",
        got.set_cookies
    );
    // The gateway removed it; a client that sends it again is refused again.
    tampered
        .jar
        .insert("portcullis-approver".into(), tampered_value.clone());
    let decided = tampered.post(&link, "csrf=x&decision=approve").await;
    assert_eq!(decided.status, 401);
    // A cookie made up by hand is no sign-in either.
    let mut forger = Browser::default();
    forger.jar.insert(
        "portcullis-approver".into(),
        "pcas1.eyJ3aG8iOnsia2luZCI6Im9wZXJhdG9yIn19".into(),
    );
    assert_eq!(forger.get(&link).await.status, 401);
    assert!(calls(&up).is_empty());
    let m = metrics(&gw).await;
    assert!(
        m.contains("portcullis_approval_sign_ins_refused_total{rule=\"second\",upstream=\"test\",why=\"session_tampered\"} 3"),
        "{m}"
    );
    waiting.abort();
    gw.shutdown().await;
    let refused = events(&trail, "approval_sign_in_refused");
    assert!(
        refused.iter().all(|e| e["why"] == "session_tampered"
            && e["rule"] == "second"
            && e["principal"] == "alice"
            && e["attempted_by"].is_null()),
        "{refused:?}"
    );
    let text = std::fs::read_to_string(&trail).unwrap();
    assert!(!text.contains(&sealed), "the cookie is never written");
}

#[tokio::test]
async fn an_expired_session_is_refused_with_who_it_was() {
    let up = rooms().await;
    let dir = tempfile::tempdir().unwrap();
    let (text, trail) = audited(&up, BOB_ONLY, &dir);
    let text = text.replace(
        "[admin]\naddress = \"127.0.0.1:0\"",
        "[admin]\naddress = \"127.0.0.1:0\"\nsession_lifetime = \"1s\"",
    );
    let gw = start_gateway(&text).await;
    let (c, g) = (client(), url(&gw));
    let admin = gw.admin_addr.unwrap().to_string();
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);
    let mut bob = Browser::default();
    let signed = bob.sign_in(&admin, &link, BOB).await;
    assert!(session_cookie(&signed).contains("Max-Age=1"));
    assert_eq!(bob.get(&link).await.status, 200);
    // The browser keeps the cookie past its end (as a replayed one would be).
    let kept = bob.jar.clone();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let mut late = Browser { jar: kept };
    let got = late.get(&link).await;
    assert_eq!(got.status, 401, "{}", got.html);
    assert!(got.html.contains("ended"), "{}", got.html);
    waiting.abort();
    gw.shutdown().await;
    let refused = events(&trail, "approval_sign_in_refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["why"], "session_expired");
    assert_eq!(refused[0]["attempted_by"], "keys:bob");
}

#[tokio::test]
async fn a_cookie_of_one_approver_decides_nothing_for_a_rule_naming_another() {
    let up = rooms().await;
    let dir = tempfile::tempdir().unwrap();
    let (text, trail) = audited(&up, CAROL_ONLY, &dir);
    let gw = start_gateway(&text).await;
    let (c, g) = (client(), url(&gw));
    let admin = gw.admin_addr.unwrap().to_string();
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);
    // Bob cannot sign in for carol's approval...
    let mut bob = Browser::default();
    let refused = bob.sign_in(&admin, &link, BOB).await;
    assert_eq!(refused.status, 403, "{}", refused.html);
    assert!(!bob.jar.contains_key("portcullis-approver"));
    // ... nor with a wrong key, nor an empty one.
    let mut guesser = Browser::default();
    assert_eq!(
        guesser
            .sign_in(&admin, &link, "pcl_nobody-0123456789abcdef0123")
            .await
            .status,
        401
    );
    // From the list he signs in (a principal of the route), and his
    // cookie shows him nothing of carol's and decides nothing.
    let list = format!("http://{admin}/approvals");
    let asked = bob.get(&list).await;
    assert_eq!(asked.status, 401);
    let signed = bob
        .post(
            &format!("http://{admin}/approvals/sign-in"),
            &format!("csrf={}&credential={BOB}", csrf_of(&asked.html)),
        )
        .await;
    assert_eq!(signed.status, 303, "{}", signed.html);
    assert_eq!(signed.location.as_deref(), Some("/approvals"));
    let listed = bob.get(&list).await;
    assert_eq!(listed.status, 200);
    assert!(
        !listed.html.contains(link.rsplit('/').next().unwrap()),
        "{}",
        listed.html
    );
    assert_eq!(bob.get(&link).await.status, 403);
    let mut carol = Browser::default();
    assert_eq!(carol.sign_in(&admin, &link, CAROL).await.status, 303);
    let shown = carol.get(&link).await;
    let token = decision_token(&shown.html);
    assert_eq!(
        bob.post(&link, &format!("csrf={token}&decision=approve"))
            .await
            .status,
        403
    );
    assert!(calls(&up).is_empty());
    assert_eq!(
        carol
            .post(&link, &format!("csrf={token}&decision=decline"))
            .await
            .status,
        200
    );
    let done = waiting.await.unwrap();
    assert_eq!(
        done["error"]["data"]["reason"], "approval_declined",
        "{done}"
    );
    gw.shutdown().await;
    let sign_ins: Vec<(String, String)> = events(&trail, "approval_sign_in_refused")
        .iter()
        .map(|e| {
            (
                e["attempted_by"].as_str().unwrap_or("-").to_owned(),
                e["why"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        sign_ins,
        [
            ("keys:bob".to_owned(), "not_approver".to_owned()),
            ("-".to_owned(), "credential_refused".to_owned())
        ]
    );
    let decisions = events(&trail, "approval_decision_refused");
    assert!(
        decisions
            .iter()
            .any(|e| e["attempted_by"] == "keys:bob" && e["why"] == "not_approver"),
        "{decisions:?}"
    );
    let _ = ALICE;
}

#[tokio::test]
async fn a_sign_in_form_needs_this_browsers_token_and_returns_only_to_the_page() {
    let up = rooms().await;
    let text = keyed(&up, BOB_ONLY).replace(
        "[admin]\naddress = \"127.0.0.1:0\"",
        "[admin]\naddress = \"127.0.0.1:0\"\napproval_url = \"https://approvals.example.com/gw/\"",
    );
    let gw = start_gateway(&text).await;
    let (c, g) = (client(), url(&gw));
    let admin = gw.admin_addr.unwrap().to_string();
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);
    let id = link.rsplit('/').next().unwrap().to_owned();
    let page = format!("http://{admin}/approvals/{id}");
    let sign_in = format!("http://{admin}/approvals/sign-in");
    let mut bob = Browser::default();
    let asked = bob.get(&page).await;
    assert_eq!(asked.status, 401);
    let form_csrf = csrf_of(&asked.html);
    let form_cookie = asked
        .set_cookies
        .iter()
        .find(|c| c.starts_with("__Host-portcullis-sign-in="))
        .unwrap_or_else(|| panic!("over https, a __Host- cookie: {:?}", asked.set_cookies));
    assert!(form_cookie.contains("Secure") && form_cookie.contains("SameSite=Strict"));
    // Another browser (no cookie of the form), or a forged token: refused.
    let mut other = Browser::default();
    let cross = other
        .post(
            &sign_in,
            &format!("csrf={form_csrf}&approval={id}&credential={BOB}"),
        )
        .await;
    assert_eq!(cross.status, 403, "{}", cross.html);
    let forged = bob
        .post(
            &sign_in,
            &format!("csrf=forged&approval={id}&credential={BOB}"),
        )
        .await;
    assert_eq!(forged.status, 403);
    // A return path is never taken from the request.
    for evil in [
        "https://evil.example/x",
        "//evil.example",
        "/%2F%2Fevil.example",
    ] {
        let fresh = bob.get(&page).await;
        let got = bob
            .post(
                &sign_in,
                &format!(
                    "csrf={}&approval={}&credential={BOB}",
                    csrf_of(&fresh.html),
                    url::form_urlencoded::byte_serialize(evil.as_bytes()).collect::<String>()
                ),
            )
            .await;
        assert_eq!(got.status, 404, "{evil}: {}", got.html);
        assert!(got.location.is_none(), "{evil}");
    }
    let fresh = bob.get(&page).await;
    let signed = bob
        .post(
            &sign_in,
            &format!(
                "csrf={}&approval={id}&credential={BOB}",
                csrf_of(&fresh.html)
            ),
        )
        .await;
    assert_eq!(signed.status, 303, "{}", signed.html);
    assert_eq!(
        signed.location.as_deref(),
        Some(format!("/gw/approvals/{id}").as_str()),
        "a path under approval_url's own"
    );
    let cookie = signed
        .set_cookies
        .iter()
        .find(|c| c.starts_with("__Host-portcullis-approver="))
        .unwrap();
    assert!(
        cookie.contains("Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    // The form's cookie is used up.
    assert!(signed
        .set_cookies
        .iter()
        .any(|c| c.starts_with("__Host-portcullis-sign-in=;")));
    // Signing out needs the session's own token, and clears the cookie.
    let shown = bob.get(&page).await;
    assert_eq!(shown.status, 200, "{}", shown.html);
    let out_at = shown.html.find("/approvals/sign-out").unwrap();
    let out_token = csrf_of(&shown.html[out_at..]);
    let sign_out = format!("http://{admin}/approvals/sign-out");
    assert_eq!(bob.post(&sign_out, "csrf=forged").await.status, 403);
    assert_eq!(bob.get(&page).await.status, 200, "still signed in");
    let out = bob.post(&sign_out, &format!("csrf={out_token}")).await;
    assert_eq!(out.status, 200);
    assert!(
        out.set_cookies
            .iter()
            .any(|c| c.starts_with("__Host-portcullis-approver=;") && c.contains("Max-Age=0")),
        "{:?}",
        out.set_cookies
    );
    assert_eq!(bob.get(&page).await.status, 401, "signed out");
    waiting.abort();
    gw.shutdown().await;
}

#[tokio::test]
async fn a_sign_in_holds_only_on_routes_of_the_scheme_that_checked_it() {
    const PARTNER_BOB: &str = "pcl_partner-bob-key-0123456789abcdef";
    let up = rooms().await;
    let hash = portcullis::identify::hash_key;
    // Another scheme with a principal of the same name: another person.
    let partners = format!(
        "[[auth]]\nname = \"partners\"\ntype = \"api_key\"\n[[auth.key]]\nprincipal = \"alice\"\nhash = \"{}\"\n[[auth.key]]\nprincipal = \"bob\"\nhash = \"{}\"\n",
        hash(ALICE),
        hash(PARTNER_BOB),
    );
    let route = format!(
        "\n[[route]]\npath = \"/partners\"\nupstream = \"test\"\nauth = [\"partners\"]\n[[route.approval]]\n{BOB_ONLY}\n"
    );
    let text = format!("{partners}\n{}{route}", keyed(&up, BOB_ONLY));
    let gw = start_gateway(&text).await;
    let c = client();
    let ours = url(&gw);
    let theirs = ours.replace("/mcp", "/partners");
    let admin = gw.admin_addr.unwrap().to_string();
    let (link_ours, state_ours) = linked(&c, &ours).await;
    let (link_theirs, state_theirs) = linked(&c, &theirs).await;
    let waiting = [
        retry(&c, &ours, &state_ours),
        retry(&c, &theirs, &state_theirs),
    ];
    let mut partner = Browser::default();
    assert_eq!(
        partner
            .sign_in(&admin, &link_theirs, PARTNER_BOB)
            .await
            .status,
        303
    );
    assert_eq!(partner.get(&link_theirs).await.status, 200);
    let elsewhere = partner.get(&link_ours).await;
    assert_eq!(
        elsewhere.status, 401,
        "the partners' bob is not the keys' bob: {}",
        elsewhere.html
    );
    assert_eq!(
        partner
            .post(&link_ours, "csrf=x&decision=approve")
            .await
            .status,
        401
    );
    assert!(calls(&up).is_empty());
    for w in waiting {
        w.abort();
    }
    gw.shutdown().await;
}

/// The operator signs in with a token `portcullis approval-token` made
/// with the gateway's `[state]` keys; one made with other keys, or a
/// sealed value of another purpose, signs nobody in.
#[tokio::test]
async fn the_operator_signs_in_with_a_token_of_the_state_keys() {
    let up = rooms().await;
    let dir = tempfile::tempdir().unwrap();
    let keys_path = dir.path().join("keys");
    std::fs::write(&keys_path, portcullis::mrtr::seal::new_key_line("k1")).unwrap();
    let text = format!(
        "{}\n[state]\nkeys_file = \"{}\"\n",
        keyed(&up, CAROL_ONLY),
        keys_path.display()
    );
    let config = dir.path().join("gw.toml");
    std::fs::write(&config, &text).unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let other_keys = other_dir.path().join("keys");
    std::fs::write(&other_keys, portcullis::mrtr::seal::new_key_line("k1")).unwrap();
    let other_config = other_dir.path().join("gw.toml");
    std::fs::write(
        &other_config,
        format!("[state]\nkeys_file = \"{}\"\n", other_keys.display()),
    )
    .unwrap();
    let token_of = |config: &std::path::Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["approval-token", "--config"])
            .arg(config)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let gw = start_gateway(&text).await;
    let (c, g) = (client(), url(&gw));
    let admin = gw.admin_addr.unwrap().to_string();
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);
    let mut stranger = Browser::default();
    let refused = stranger
        .sign_in(&admin, &link, &token_of(&other_config))
        .await;
    assert_eq!(refused.status, 401, "{}", refused.html);
    // A session cookie's value is no operator token either.
    let mut bob = Browser::default();
    let list = format!("http://{admin}/approvals");
    let asked = bob.get(&list).await;
    bob.post(
        &format!("http://{admin}/approvals/sign-in"),
        &format!("csrf={}&credential={BOB}", csrf_of(&asked.html)),
    )
    .await;
    let sealed = bob.jar["portcullis-approver"].clone();
    let mut replayer = Browser::default();
    assert_eq!(replayer.sign_in(&admin, &link, &sealed).await.status, 401);
    let mut operator = Browser::default();
    let signed = operator.sign_in(&admin, &link, &token_of(&config)).await;
    assert_eq!(signed.status, 303, "{}", signed.html);
    let shown = operator.get(&link).await;
    assert_eq!(shown.status, 200, "{}", shown.html);
    let decided = operator
        .post(
            &link,
            &format!("csrf={}&decision=approve", decision_token(&shown.html)),
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.html);
    let done = waiting.await.unwrap();
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    gw.shutdown().await;
}

/// A sign-in lasts only while the config still accepts who it names: bob's
/// key given to someone else on a reload ends his session at his next
/// request, not when the cookie expires.
#[tokio::test]
async fn a_session_ends_when_a_reload_no_longer_accepts_who_it_names() {
    let up = rooms().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    let text = keyed(&up, BOB_ONLY);
    std::fs::write(&path, &text).unwrap();
    install_crypto();
    let config = portcullis::config::GatewayConfig::load(&path).unwrap();
    let gw = portcullis::server::RunningGateway::start(config)
        .await
        .unwrap();
    let (c, g) = (client(), url(&gw));
    let admin = gw.admin_addr.unwrap().to_string();
    let (link, state) = linked(&c, &g).await;
    let waiting = retry(&c, &g, &state);
    let mut bob = Browser::default();
    assert_eq!(bob.sign_in(&admin, &link, BOB).await.status, 303);
    assert_eq!(bob.get(&link).await.status, 200);
    let renamed = text.replacen("principal = \"bob\"", "principal = \"robert\"", 1);
    assert_ne!(renamed, text);
    std::fs::write(&path, renamed).unwrap();
    gw.reload().await.unwrap();
    let after = bob.get(&link).await;
    assert_eq!(after.status, 401, "{}", after.html);
    assert!(after.html.contains("no longer holds"), "{}", after.html);
    let shown = bob.get(&link).await;
    assert_eq!(shown.status, 401);
    assert!(calls(&up).is_empty());
    waiting.abort();
    gw.shutdown().await;
}
