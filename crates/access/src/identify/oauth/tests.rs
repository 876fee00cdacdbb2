use super::*;
use crate::identify::tests::{build, build_err, headers};
use serde_json::json;

const CONFIG: &str = r#"
[[auth]]
name = "corp"
type = "oauth"
issuer = "https://idp.example.com/realms/mcp"
scopes = ["mcp:tools", "mcp:admin"]
required_scopes = ["mcp:tools"]
audience = "api://mcp"
"#;

fn scheme() -> OAuthScheme {
    #[derive(serde::Deserialize)]
    struct Doc {
        auth: Vec<RawAuthScheme>,
    }
    let doc: Doc = toml::from_str(CONFIG).unwrap();
    OAuthScheme::build(&doc.auth[0], Path::new("/")).unwrap()
}

fn claims(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

const RES: Option<&str> = Some("https://mcp.example.com/mcp");

#[test]
fn tokens_must_name_the_route_resource_or_an_extra_audience() {
    let s = scheme();
    let ok = |aud: Value| {
        matches!(
            s.judge(
                &claims(json!({"sub": "alice", "aud": aud, "scope": "mcp:tools"})),
                RES
            ),
            Attempt::Accepted(_)
        )
    };
    assert!(ok(json!("https://mcp.example.com/mcp")));
    assert!(ok(json!(["other", "https://mcp.example.com/mcp"])));
    assert!(ok(json!("api://mcp")));
    assert!(!ok(json!("https://mcp.example.com/other")));
    assert!(!ok(json!("https://mcp.example.com/mcp/")));
    assert!(!ok(json!(["a", "b"])));
    assert!(!ok(json!(null)));
    let none = s.judge(&claims(json!({"sub": "alice", "scope": "mcp:tools"})), RES);
    assert!(matches!(
        none,
        Attempt::Rejected("token not issued for this resource")
    ));
}

#[test]
fn scopes_are_read_from_scope_or_scp_and_required_ones_step_up() {
    let s = scheme();
    let aud = "https://mcp.example.com/mcp";
    match s.judge(
        &claims(json!({"sub": "alice", "aud": aud, "scp": ["mcp:tools", "x"], "azp": "app"})),
        RES,
    ) {
        Attempt::Accepted(p) => {
            assert_eq!(p.method, AuthMethod::OAuth);
            assert_eq!(p.scopes(), ["mcp:tools", "x"]);
            assert_eq!(p.grant.as_ref().unwrap().client_id.as_deref(), Some("app"));
        }
        other => panic!("{other:?}"),
    }
    match s.judge(
        &claims(json!({"sub": "alice", "aud": aud, "scope": "openid"})),
        RES,
    ) {
        Attempt::Insufficient(p, missing) => {
            assert_eq!(missing, ["mcp:tools"]);
            assert_eq!(&*p.name, "alice");
        }
        other => panic!("{other:?}"),
    }
    // A client's own token without a subject: the client is the caller.
    match s.judge(
        &claims(json!({"aud": aud, "scope": "mcp:tools", "client_id": "robot"})),
        RES,
    ) {
        Attempt::Accepted(p) => assert_eq!(&*p.name, "robot"),
        other => panic!("{other:?}"),
    }
    for bad in [json!(7), json!([1]), json!({"a": 1})] {
        let a = s.judge(
            &claims(json!({"sub": "alice", "aud": aud, "scope": bad})),
            RES,
        );
        assert!(
            matches!(a, Attempt::Rejected("malformed scope claim")),
            "{a:?}"
        );
    }
}

#[test]
fn opaque_tokens_without_introspection_are_declined_and_jwts_need_keys() {
    let s = scheme();
    let h = headers(&[("authorization", "Bearer opaque-token-123")]);
    assert!(matches!(s.attempt(&h, RES), Attempt::Declined(_)));
    let jwt = headers(&[(
        "authorization",
        "Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln",
    )]);
    assert!(matches!(s.attempt(&jwt, RES), Attempt::Rejected(_)));
    assert!(matches!(s.attempt(&HeaderMap::new(), RES), Attempt::Absent));
}

#[test]
fn config_is_checked() {
    for (extra, field) in [
        ("issuer = \"http://idp.example.com\"", "auth.issuer"),
        ("required_scopes = [\"mcp:other\"]", "auth.required_scopes"),
        ("scopes = [\"has space\"]", "auth.scopes"),
        ("jwks_url = \"https://idp/jwks\"", "auth.jwks_url"),
        ("introspection_client_secret_env = \"X\"", "auth.introspection_client_secret_env"),
        ("introspection_client_id = \"gw\"\nintrospection_client_secret_env = \"PORTCULLIS_NOT_SET_X\"", "auth.introspection_client_secret_env"),
    ] {
        let scopes = if extra.starts_with("scopes") { "" } else { "scopes = [\"mcp:tools\"]\n" };
        let base = format!("[[auth]]\nname = \"corp\"\ntype = \"oauth\"\n{scopes}");
        let text = if extra.starts_with("issuer") {
            format!("{base}{extra}\n")
        } else {
            format!("{base}issuer = \"https://idp.example.com\"\n{extra}\n")
        };
        let (_, e) = build_err(&text);
        assert_eq!(e.field, field, "{text}: {e}");
    }
    let s = build(CONFIG, Path::new("/")).unwrap();
    let id = s.lookup("corp").unwrap();
    let view = s.oauth(id).unwrap();
    assert_eq!(view.issuer, "https://idp.example.com/realms/mcp");
    assert_eq!(view.required, ["mcp:tools"]);
    assert!(s.fetches_keys());
}

#[test]
fn challenges_name_the_metadata_and_the_scopes() {
    let md = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
    let required = vec!["mcp:tools".to_string()];
    let c = Some(crate::identify::Challenge {
        resource_metadata: md,
        scopes: &required,
    });
    let missing = crate::identify::AuthFailure::Missing.www_authenticate(c);
    assert_eq!(
        missing,
        format!(r#"Bearer resource_metadata="{md}", scope="mcp:tools""#).as_str()
    );
    let s = scheme();
    let p = match s.judge(
        &claims(json!({"sub": "a", "aud": RES.unwrap(), "scope": "openid"})),
        RES,
    ) {
        Attempt::Insufficient(p, _) => p,
        other => panic!("{other:?}"),
    };
    let step = crate::identify::AuthFailure::InsufficientScope {
        principal: Box::new(p),
        needed: vec!["mcp:tools".into()],
    };
    assert_eq!(
        step.www_authenticate(c),
        format!(r#"Bearer resource_metadata="{md}", scope="openid mcp:tools", error="insufficient_scope""#).as_str()
    );
    assert_eq!(step.reason(), crate::model::Reason::InsufficientScope);
}
