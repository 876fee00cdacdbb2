//! JWT tests with keys generated per run (rcgen: P-256 and Ed25519). RSA keys
//! cannot be generated offline with the crates at hand (rcgen's ring backend
//! has no RSA key generation), so RS256 uses a fixed 2048-bit test key made
//! with `openssl genpkey` (testdata/rsa_test_key.pem, modulus in
//! testdata/rsa_test_key.n); it protects nothing.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Mutex;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{encode, get_current_timestamp, EncodingKey, Header};
use serde_json::json;

use super::*;
use crate::identify::tests::{build, build_err, headers};
use crate::identify::{AuthFailure, AuthSchemes, PeerIdentity};

const ISS: &str = "https://idp.example.com/";
const AUD: &str = "portcullis";

struct TestKey {
    kid: String,
    alg: Algorithm,
    enc: EncodingKey,
    jwk: Value,
}

fn b64(b: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(b)
}

fn ec_key(kid: &str) -> TestKey {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let raw = kp.public_key_raw();
    assert_eq!(raw.len(), 65);
    TestKey {
        kid: kid.into(),
        alg: Algorithm::ES256,
        enc: EncodingKey::from_ec_der(&kp.serialize_der()),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                    "x": b64(&raw[1..33]), "y": b64(&raw[33..])}),
    }
}

fn ed_key(kid: &str) -> TestKey {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    TestKey {
        kid: kid.into(),
        alg: Algorithm::EdDSA,
        enc: EncodingKey::from_ed_der(&kp.serialize_der()),
        jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(kp.public_key_raw())}),
    }
}

fn rsa_key(kid: &str) -> TestKey {
    TestKey {
        kid: kid.into(),
        alg: Algorithm::RS256,
        enc: EncodingKey::from_rsa_pem(include_bytes!("../testdata/rsa_test_key.pem")).unwrap(),
        jwk: json!({"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
                    "n": include_str!("../testdata/rsa_test_key.n").trim(), "e": "AQAB"}),
    }
}

fn jwks(keys: &[&TestKey]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}).to_string()
}

fn now() -> u64 {
    get_current_timestamp()
}

fn claims() -> Value {
    json!({"sub": "alice", "iss": ISS, "aud": AUD, "exp": now() + 300, "iat": now(),
           "groups": ["dev", "ops"]})
}

fn with(mut c: Value, k: &str, v: Value) -> Value {
    if v.is_null() {
        c.as_object_mut().unwrap().remove(k);
    } else {
        c[k] = v;
    }
    c
}

fn token(key: &TestKey, claims: &Value) -> String {
    let mut h = Header::new(key.alg);
    h.kid = Some(key.kid.clone());
    encode(&h, claims, &key.enc).unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    schemes: AuthSchemes,
    ec: TestKey,
    ed: TestKey,
    rsa: TestKey,
}

fn fixture(extra: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (ec, ed, rsa) = (ec_key("ec-1"), ed_key("ed-1"), rsa_key("rsa-1"));
    std::fs::write(dir.path().join("jwks.json"), jwks(&[&ec, &ed, &rsa])).unwrap();
    let text = format!(
        r#"
[[auth]]
name = "corp-jwt"
type = "jwt"
issuer = "{ISS}"
audience = ["{AUD}", "other"]
algorithms = ["RS256", "ES256", "EdDSA"]
jwks_file = "jwks.json"
{extra}
"#
    );
    let schemes = build(&text, dir.path()).unwrap();
    Fixture {
        _dir: dir,
        schemes,
        ec,
        ed,
        rsa,
    }
}

impl Fixture {
    fn auth(&self, token: &str) -> Result<Principal, AuthFailure> {
        let id = self.schemes.lookup("corp-jwt").unwrap();
        self.schemes.authenticate_now(
            &[id],
            false,
            &headers(&[("authorization", &format!("Bearer {token}"))]),
            &PeerIdentity::default(),
        )
    }

    fn why(&self, token: &str) -> &'static str {
        match self.auth(token) {
            Err(AuthFailure::Invalid { scheme, why }) => {
                assert_eq!(scheme, "corp-jwt");
                why
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }
}

#[test]
fn valid_tokens_give_principal_and_groups() {
    let f = fixture("");
    for key in [&f.ec, &f.ed, &f.rsa] {
        let p = f
            .auth(&token(key, &claims()))
            .unwrap_or_else(|e| panic!("{:?}: {e}", key.alg));
        assert_eq!(&*p.name, "alice");
        assert_eq!(&*p.groups, &["dev".to_string(), "ops".to_string()]);
        assert_eq!(p.method, AuthMethod::Jwt);
    }
    // Groups as a space-separated string; absent groups; second audience; aud as array.
    let c = with(claims(), "groups", json!("a b  c"));
    assert_eq!(
        &*f.auth(&token(&f.ec, &c)).unwrap().groups,
        &["a", "b", "c"]
    );
    let c = with(claims(), "groups", Value::Null);
    assert!(f.auth(&token(&f.ec, &c)).unwrap().groups.is_empty());
    let c = with(claims(), "aud", json!(["someone-else", "other"]));
    assert!(f.auth(&token(&f.ec, &c)).is_ok());
}

#[test]
fn custom_claims() {
    let f = fixture("principal_claim = \"email\"\ngroups_claim = \"roles\"");
    let c = with(
        with(claims(), "email", json!("alice@example.com")),
        "roles",
        json!(["admin"]),
    );
    let p = f.auth(&token(&f.ed, &c)).unwrap();
    assert_eq!(&*p.name, "alice@example.com");
    assert_eq!(&*p.groups, &["admin".to_string()]);
    assert_eq!(f.why(&token(&f.ed, &claims())), "missing principal claim");
}

#[test]
fn refusals_name_the_reason() {
    let f = fixture("");
    let t = |c: Value| token(&f.ec, &c);
    assert_eq!(
        f.why(&t(with(claims(), "exp", json!(now() - 120)))),
        "expired"
    );
    assert_eq!(
        f.why(&t(with(claims(), "nbf", json!(now() + 120)))),
        "not yet valid"
    );
    assert_eq!(
        f.why(&t(with(claims(), "iss", json!("https://evil.example/")))),
        "wrong issuer"
    );
    assert_eq!(
        f.why(&t(with(claims(), "aud", json!("someone-else")))),
        "wrong audience"
    );
    assert_eq!(
        f.why(&t(with(claims(), "exp", Value::Null))),
        "missing required claim"
    );
    assert_eq!(
        f.why(&t(with(claims(), "aud", Value::Null))),
        "missing required claim"
    );
    assert_eq!(
        f.why(&t(with(claims(), "sub", Value::Null))),
        "missing principal claim"
    );
    assert_eq!(
        f.why(&t(with(claims(), "sub", json!("a\u{7}b")))),
        "unusable principal claim"
    );
    assert_eq!(
        f.why(&t(with(claims(), "groups", json!([1, 2])))),
        "malformed groups claim"
    );
    assert_eq!(
        f.why(&t(with(claims(), "exp", json!("tomorrow")))),
        "missing required claim"
    );
    assert_eq!(
        f.why(&t(with(claims(), "nbf", json!("tomorrow")))),
        "malformed claims"
    );

    // Bad signature: payload swapped under a valid signature, and a token
    // signed by another key that claims the same kid.
    let good = t(claims());
    let other = t(with(claims(), "sub", json!("mallory")));
    let parts: Vec<&str> = good.split('.').collect();
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        other.split('.').nth(1).unwrap(),
        parts[2]
    );
    assert_eq!(f.why(&forged), "bad signature");
    let mut impostor = ec_key("ec-1");
    impostor.kid = "ec-1".into();
    assert_eq!(f.why(&token(&impostor, &claims())), "bad signature");
    // A different key type's signature under this kid.
    let mut wrong_type = ed_key("ec-1");
    wrong_type.kid = "ec-1".into();
    assert_eq!(
        f.why(&token(&wrong_type, &claims())),
        "algorithm not allowed for this key"
    );

    // Unknown kid; no kid with several keys.
    assert_eq!(f.why(&token(&ec_key("nope"), &claims())), "unknown key");
    let mut h = Header::new(Algorithm::ES256);
    h.kid = None;
    assert_eq!(
        f.why(&encode(&h, &claims(), &f.ec.enc).unwrap()),
        "unknown key"
    );

    // Not a JWT at all; garbage that is shaped like one.
    assert_eq!(f.why("not-a-jwt"), "malformed token");
    assert_eq!(f.why("eyJhbGciOi.eyJzdWIi.c2ln"), "malformed token");
}

#[test]
fn alg_none_and_algorithm_confusion() {
    let f = fixture("");
    // alg "none", unsigned.
    let header = b64(br#"{"alg":"none","typ":"JWT"}"#);
    let body = b64(claims().to_string().as_bytes());
    assert_eq!(f.why(&format!("{header}.{body}.")), "unsupported algorithm");
    assert_eq!(
        f.why(&format!("{header}.{body}.c2ln")),
        "unsupported algorithm"
    );

    // HS256 signed with the EC public key as the HMAC secret, naming the EC kid.
    let raw_pub = format!("{}{}", f.ec.jwk["x"], f.ec.jwk["y"]);
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some("ec-1".into());
    let confused = encode(&h, &claims(), &EncodingKey::from_secret(raw_pub.as_bytes())).unwrap();
    assert_eq!(f.why(&confused), "algorithm not allowed");
    // An allowed family, but not in the list (ES384 with a P-256 kid).
    let mut h = Header::new(Algorithm::ES384);
    h.kid = Some("ec-1".into());
    let forged = format!(
        "{}.{body}.c2ln",
        b64(serde_json::to_string(&h).unwrap().as_bytes())
    );
    assert_eq!(f.why(&forged), "algorithm not allowed");
}

#[test]
fn leeway_tolerates_small_skew() {
    let f = fixture("leeway = \"30s\"");
    let c = with(
        with(claims(), "exp", json!(now() - 10)),
        "nbf",
        json!(now() + 10),
    );
    assert!(f.auth(&token(&f.ec, &c)).is_ok());
    let c = with(claims(), "exp", json!(now() - 45));
    assert_eq!(f.why(&token(&f.ec, &c)), "expired");

    let f = fixture("leeway = \"0s\"");
    let c = with(claims(), "exp", json!(now() - 10));
    assert_eq!(f.why(&token(&f.ec, &c)), "expired");
}

#[test]
fn bearer_shared_with_api_keys() {
    let dir = tempfile::tempdir().unwrap();
    let ec = ec_key("ec-1");
    std::fs::write(dir.path().join("jwks.json"), jwks(&[&ec])).unwrap();
    let text = format!(
        r#"
[[auth]]
name = "keys"
type = "api_key"
[[auth.key]]
principal = "robot"
hash = "{}"

[[auth]]
name = "corp-jwt"
type = "jwt"
issuer = "{ISS}"
audience = "{AUD}"
algorithms = "ES256"
jwks_file = "{}"
"#,
        crate::identify::hash_key("pcl_robot"),
        dir.path().join("jwks.json").display()
    );
    let s = build(&text, Path::new("/elsewhere")).unwrap();
    let ids = [s.lookup("keys").unwrap(), s.lookup("corp-jwt").unwrap()];
    let rev = [ids[1], ids[0]];
    let peer = PeerIdentity::default();
    let bearer = |t: &str| headers(&[("authorization", &format!("Bearer {t}"))]);
    for order in [&ids, &rev] {
        let p = s
            .authenticate_now(order, false, &bearer("pcl_robot"), &peer)
            .unwrap();
        assert_eq!((&*p.name, p.method), ("robot", AuthMethod::ApiKey));
        let p = s
            .authenticate_now(order, false, &bearer(&token(&ec, &claims())), &peer)
            .unwrap();
        assert_eq!((&*p.name, p.method), ("alice", AuthMethod::Jwt));
        let bad = token(&ec, &with(claims(), "exp", json!(now() - 999)));
        assert_eq!(
            s.authenticate_now(order, true, &bearer(&bad), &peer),
            Err(AuthFailure::Invalid {
                scheme: "corp-jwt".into(),
                why: "expired"
            })
        );
        let e = s
            .authenticate_now(order, true, &bearer("pcl_wrong"), &peer)
            .unwrap_err();
        assert_eq!(e.reason().as_str(), "invalid_credentials");
    }
}

fn hs_config(source: &str) -> String {
    format!(
        "[[auth]]\nname = \"hs\"\ntype = \"jwt\"\nissuer = \"{ISS}\"\naudience = \"{AUD}\"\n{source}\n"
    )
}

#[test]
fn hs256_shared_secret() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "0123456789abcdef0123456789abcdef-test";
    std::fs::write(dir.path().join("hs.key"), format!("{secret}\n")).unwrap();
    let s = build(&hs_config("hs256_secret_file = \"hs.key\""), dir.path()).unwrap();
    let id = s.lookup("hs").unwrap();
    let peer = PeerIdentity::default();
    let run = |alg: Algorithm, key: &[u8], kid: Option<&str>| {
        let mut h = Header::new(alg);
        h.kid = kid.map(str::to_owned);
        let t = encode(&h, &claims(), &EncodingKey::from_secret(key)).unwrap();
        s.authenticate_now(
            &[id],
            false,
            &headers(&[("authorization", &format!("Bearer {t}"))]),
            &peer,
        )
    };
    assert_eq!(
        &*run(Algorithm::HS256, secret.as_bytes(), None).unwrap().name,
        "alice"
    );
    assert!(run(Algorithm::HS256, secret.as_bytes(), Some("whatever")).is_ok());
    assert_eq!(
        run(
            Algorithm::HS256,
            b"wrong-secret-wrong-secret-wrong-secret",
            None
        )
        .unwrap_err()
        .why(),
        Some("bad signature")
    );
    assert_eq!(
        run(Algorithm::HS512, secret.as_bytes(), None)
            .unwrap_err()
            .why(),
        Some("algorithm not allowed")
    );
    // An asymmetric token against an HMAC scheme.
    let ec = ec_key("k");
    let t = token(&ec, &claims());
    assert_eq!(
        s.authenticate_now(
            &[id],
            false,
            &headers(&[("authorization", &format!("Bearer {t}"))]),
            &peer
        )
        .unwrap_err()
        .why(),
        Some("algorithm not allowed")
    );
    // Debug output shows no secret.
    assert!(!format!("{s:?}").contains("0123456789abcdef"));

    // From the environment.
    std::env::set_var("PORTCULLIS_TEST_HS_SECRET", secret);
    let s = build(
        &hs_config("hs256_secret_env = \"PORTCULLIS_TEST_HS_SECRET\""),
        dir.path(),
    )
    .unwrap();
    let id = s.lookup("hs").unwrap();
    let t = encode(
        &Header::new(Algorithm::HS256),
        &claims(),
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap();
    assert!(s
        .authenticate_now(
            &[id],
            false,
            &headers(&[("authorization", &format!("Bearer {t}"))]),
            &peer
        )
        .is_ok());
}

#[test]
fn jwt_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("short.key"), "too-short").unwrap();
    std::fs::write(dir.path().join("bad.json"), "{\"keys\": 3}").unwrap();
    std::fs::write(
        dir.path().join("oct.json"),
        r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("dup.json"),
        jwks(&[&ec_key("same"), &ec_key("same")]),
    )
    .unwrap();
    let mut broken = ec_key("b");
    broken.jwk["x"] = json!(b64(&[7u8; 32]));
    std::fs::write(dir.path().join("broken.json"), jwks(&[&broken])).unwrap();
    let err = |text: &str| {
        let e = build(text, dir.path()).expect_err("must be refused");
        (crate::identify::tests::line_of(text, &e), e)
    };

    // Line 6 is the source line in hs_config.
    let (line, e) = err(&hs_config("hs256_secret_file = \"short.key\""));
    assert_eq!((line, e.field.as_str()), (6, "auth.hs256_secret_file"));
    assert!(
        e.message.contains("at least 32") && !e.message.contains("too-short"),
        "{e}"
    );
    let (line, e) = err(&hs_config("hs256_secret_file = \"missing.key\""));
    assert_eq!((line, e.field.as_str()), (6, "auth.hs256_secret_file"));
    let (line, e) = err(&hs_config(
        "hs256_secret_env = \"PORTCULLIS_TEST_UNSET_VAR\"",
    ));
    assert_eq!((line, e.field.as_str()), (6, "auth.hs256_secret_env"));
    assert!(e.message.contains("PORTCULLIS_TEST_UNSET_VAR"));
    for file in [
        "missing.json",
        "bad.json",
        "oct.json",
        "dup.json",
        "broken.json",
    ] {
        let (line, e) = err(&hs_config(&format!("jwks_file = \"{file}\"")));
        assert_eq!(
            (line, e.field.as_str()),
            (6, "auth.jwks_file"),
            "{file}: {e}"
        );
    }
    // Mixing HMAC and asymmetric algorithms.
    let (line, e) = err(&hs_config(
        "jwks_file = \"x.json\"\nalgorithms = [\"RS256\", \"HS256\"]",
    ));
    assert_eq!((line, e.field.as_str()), (7, "auth.algorithms"));
    assert!(e.message.contains("confusion"));
    let (_, e) = err(&hs_config(
        "jwks_file = \"x.json\"\nalgorithms = [\"HS256\"]",
    ));
    assert_eq!(e.field, "auth.algorithms");
    let (_, e) = err(&hs_config(
        "hs256_secret_env = \"X\"\nalgorithms = [\"ES256\"]",
    ));
    assert_eq!(e.field, "auth.algorithms");
    let (_, e) = err(&hs_config(
        "jwks_file = \"x.json\"\nalgorithms = [\"none\"]",
    ));
    assert!(e.message.contains("never"));
    let (_, e) = err(&hs_config(
        "jwks_file = \"x.json\"\nalgorithms = [\"XS256\"]",
    ));
    assert!(e.message.contains("unknown algorithm"));
    // Two key sources; none.
    let (line, e) = err(&hs_config(
        "jwks_file = \"x.json\"\njwks_url = \"https://idp/jwks\"",
    ));
    assert_eq!((line, e.field.as_str()), (7, "auth.jwks_url"));
    let (line, e) = err(&hs_config(""));
    assert_eq!((line, e.field.as_str()), (3, "auth.jwks_file"));
    // Missing issuer / audience, on the `type` line.
    let (line, e) =
        err("[[auth]]\nname = \"j\"\ntype = \"jwt\"\naudience = \"a\"\njwks_file = \"x\"\n");
    assert_eq!((line, e.field.as_str()), (3, "auth.issuer"));
    let (line, e) =
        err("[[auth]]\nname = \"j\"\ntype = \"jwt\"\nissuer = \"a\"\njwks_file = \"x\"\n");
    assert_eq!((line, e.field.as_str()), (3, "auth.audience"));
    let (line, e) = err("[[auth]]\nname = \"j\"\ntype = \"jwt\"\nissuer = \"a\"\naudience = []\njwks_file = \"x\"\n");
    assert_eq!((line, e.field.as_str()), (5, "auth.audience"));
    // Leeway, refresh, URL rules.
    let (_, e) = err(&hs_config(
        "jwks_url = \"https://idp/jwks\"\nleeway = \"1h\"",
    ));
    assert_eq!(e.field, "auth.leeway");
    let (_, e) = err(&hs_config(
        "jwks_url = \"https://idp/jwks\"\nleeway = \"soon\"",
    ));
    assert_eq!(e.field, "auth.leeway");
    let (_, e) = err(&hs_config(
        "jwks_url = \"https://idp/jwks\"\njwks_refresh = \"1ms\"",
    ));
    assert_eq!(e.field, "auth.jwks_refresh");
    let (_, e) = err(&hs_config(
        "hs256_secret_env = \"X\"\njwks_refresh = \"1m\"",
    ));
    assert_eq!(e.field, "auth.jwks_refresh");
    for bad in [
        "hs256_secret_env = \"X\"",
        "jwks_url = \"https://idp/jwks\"",
    ] {
        let (_, e) = err(&hs_config(&format!("{bad}\njwks_ready_timeout = \"soon\"")));
        assert_eq!(e.field, "auth.jwks_ready_timeout", "{bad}");
    }
    let (line, e) = err(&hs_config("jwks_url = \"http://idp.example.com/jwks\""));
    assert_eq!((line, e.field.as_str()), (6, "auth.jwks_url"));
    assert!(e.message.contains("https"));
    let (_, e) = err(&hs_config("jwks_url = \"ftp://idp.example.com/jwks\""));
    assert_eq!(e.field, "auth.jwks_url");
    // A field of another type.
    let (line, e) = err(&hs_config(
        "jwks_url = \"https://idp/jwks\"\nprincipal_from = \"san_dns\"",
    ));
    assert_eq!((line, e.field.as_str()), (7, "auth.principal_from"));
    let (_, e) = build_err(&hs_config(
        "jwks_url = \"https://idp/jwks\"\nprincipal_claim = \"\"",
    ));
    assert_eq!(e.field, "auth.principal_claim");

    // Accepted URL forms.
    for url in [
        "https://idp.example.com/jwks",
        "http://127.0.0.1:8080/jwks",
        "http://localhost/jwks",
        "http://[::1]:9/jwks",
    ] {
        assert!(check_jwks_url(url).is_ok(), "{url}");
    }
}

#[test]
fn jwks_parsing_skips_what_it_cannot_use() {
    let ec = ec_key("ec");
    let enc = json!({"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"});
    let oaep = json!({"kty": "RSA", "alg": "RSA-OAEP", "n": "AQAB", "e": "AQAB"});
    let p521 = json!({"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"});
    let oct = json!({"kty": "oct", "k": "c2VjcmV0"});
    let text = json!({"keys": [enc, oaep, p521, oct, ec.jwk.clone()]}).to_string();
    let (set, broken) = parse_jwks(text.as_bytes(), &[Algorithm::ES256], true).unwrap();
    assert_eq!(set.len(), 1);
    assert!(broken.is_empty());
    // An EC key when only EdDSA is allowed: nothing usable.
    assert!(parse_jwks(text.as_bytes(), &[Algorithm::EdDSA], true).is_err());
    // A short RSA key is refused.
    let weak = json!({"keys": [{"kty": "RSA", "n": b64(&[0xc5; 128]), "e": "AQAB"}]}).to_string();
    assert!(parse_jwks(weak.as_bytes(), &[Algorithm::RS256], true)
        .unwrap_err()
        .contains("2048"));
    // Non-strict (URL): a broken key is skipped with a note.
    let mut broken_key = ed_key("bad");
    broken_key.jwk["x"] = json!(b64(&[1u8; 31]));
    let text = jwks(&[&broken_key, &ec]);
    let (set, notes) = parse_jwks(
        text.as_bytes(),
        &[Algorithm::ES256, Algorithm::EdDSA],
        false,
    )
    .unwrap();
    assert_eq!((set.len(), notes.len()), (1, 1));
}

/// A JWKS server on 127.0.0.1 whose document the test can swap.
async fn jwks_server(body: Arc<Mutex<String>>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let body = body.clone();
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let doc = body.lock().unwrap().clone();
                        async move {
                            let resp = if req.uri().path() == "/jwks.json" && !doc.is_empty() {
                                http::Response::new(http_body_util::Full::new(Bytes::from(doc)))
                            } else {
                                let mut r =
                                    http::Response::new(http_body_util::Full::new(Bytes::new()));
                                *r.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                                r
                            };
                            Ok::<_, Infallible>(resp)
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwks_url_fetch_and_rotation() {
    let (a, b) = (ec_key("key-a"), ed_key("key-b"));
    let doc = Arc::new(Mutex::new(jwks(&[&a])));
    let addr = jwks_server(doc.clone()).await;
    let text = format!(
        r#"
[[auth]]
name = "remote"
type = "jwt"
issuer = "{ISS}"
audience = "{AUD}"
algorithms = ["ES256", "EdDSA"]
jwks_url = "http://{addr}/jwks.json"
jwks_refresh = "200ms"
"#
    );
    let s = build(&text, Path::new("/")).unwrap();
    let id = s.lookup("remote").unwrap();
    let peer = PeerIdentity::default();
    let auth = |t: &str| {
        s.authenticate_now(
            &[id],
            false,
            &headers(&[("authorization", &format!("Bearer {t}"))]),
            &peer,
        )
    };
    let (ta, tb) = (token(&a, &claims()), token(&b, &claims()));

    // Nothing fetched yet.
    assert_eq!(auth(&ta).unwrap_err().why(), Some("unknown key"));
    s.refresh_jwks_now().await.unwrap();
    assert_eq!(&*auth(&ta).unwrap().name, "alice");

    s.spawn_refresh(|_| std::sync::Arc::new(|| ()));
    s.spawn_refresh(|_| std::sync::Arc::new(|| ())); // idempotent

    // Rotate: the server now publishes only key B.
    *doc.lock().unwrap() = jwks(&[&b]);
    eventually("key B accepted", || auth(&tb).is_ok()).await;
    assert_eq!(auth(&ta).unwrap_err().why(), Some("unknown key"));

    // A failing refresh (503, then garbage) keeps the old keys.
    doc.lock().unwrap().clear();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(auth(&tb).is_ok());
    *doc.lock().unwrap() = "{not json".into();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(auth(&tb).is_ok());
    assert!(s.refresh_jwks_now().await.unwrap_err().contains("remote"));

    // Both keys again.
    *doc.lock().unwrap() = jwks(&[&a, &b]);
    eventually("both keys accepted", || {
        auth(&ta).is_ok() && auth(&tb).is_ok()
    })
    .await;

    // Dropping the schemes ends the refresh task (it holds only a weak ref).
    let weak = match &s.schemes[0].kind {
        crate::identify::Kind::Jwt(j) => Arc::downgrade(&j.keys),
        _ => unreachable!(),
    };
    drop(s);
    eventually("key set freed", || weak.strong_count() == 0).await;
}

#[tokio::test]
async fn jwks_url_unreachable_reports() {
    // A port nobody listens on (bound then dropped).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let text = format!(
        "[[auth]]\nname = \"r\"\ntype = \"jwt\"\nissuer = \"{ISS}\"\naudience = \"{AUD}\"\njwks_url = \"http://127.0.0.1:{port}/jwks.json\"\n"
    );
    let s = build(&text, Path::new("/")).unwrap();
    let e = s.refresh_jwks_now().await.unwrap_err();
    assert!(e.contains("auth scheme \"r\""), "{e}");
}
