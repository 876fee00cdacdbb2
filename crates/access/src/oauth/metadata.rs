//! An authorization server's metadata, found from its issuer identifier:
//! RFC 8414 (`/.well-known/oauth-authorization-server`, inserted before the
//! issuer's path) first, then OpenID Connect discovery (appended, and the
//! RFC 8414 form of it). The document must name the same issuer (RFC 8414
//! §3.3), or an attacker who controls one document could redirect keys.

use http::Uri;
use serde::Deserialize;

use super::http::{check_endpoint, shown, Endpoint, OAuthHttp, OAuthHttpError};

/// What the gateway uses of an authorization server's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerMetadata {
    pub issuer: String,
    pub jwks_uri: Option<Endpoint>,
    pub token_endpoint: Option<Endpoint>,
    pub introspection_endpoint: Option<Endpoint>,
    /// Where a browser signs in (the approval page's sign-in, code flow).
    pub authorization_endpoint: Option<Endpoint>,
    /// `code_challenge_methods_supported` (RFC 8414 §2).
    pub code_challenge_methods: Vec<String>,
}

#[derive(Deserialize)]
struct Document {
    issuer: String,
    jwks_uri: Option<String>,
    token_endpoint: Option<String>,
    introspection_endpoint: Option<String>,
    authorization_endpoint: Option<String>,
    #[serde(default)]
    code_challenge_methods_supported: Vec<String>,
}

/// Where the metadata of `issuer` may be, in the order they are tried.
fn candidates(issuer: &Uri) -> Vec<String> {
    let origin = format!(
        "{}://{}",
        issuer.scheme_str().unwrap_or("https"),
        issuer.authority().map(|a| a.as_str()).unwrap_or_default()
    );
    let path = issuer.path().trim_end_matches('/');
    let mut out = vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ];
    if !path.is_empty() {
        out.push(format!("{origin}/.well-known/openid-configuration{path}"));
    }
    out
}

/// Fetches and checks the metadata of `issuer` (the configured string).
pub async fn discover(http: &OAuthHttp, issuer: &str) -> Result<IssuerMetadata, OAuthHttpError> {
    let issuer_uri = check_endpoint(issuer).map_err(|why| OAuthHttpError::Malformed {
        url: issuer.to_owned(),
        why,
    })?;
    let mut last = None;
    for url in candidates(&issuer_uri) {
        let Ok(url) = url.parse::<Uri>() else {
            continue;
        };
        match http.get(&url, "application/json").await {
            Ok(body) => return parse(&url, &body, issuer),
            // Not there: try the next place. Anything else is the answer.
            Err(e @ OAuthHttpError::Status { status: 404, .. }) => last = Some(e),
            Err(e @ OAuthHttpError::Status { status: 400, .. }) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(OAuthHttpError::Malformed {
        url: shown(&issuer_uri),
        why: "no metadata location",
    }))
}

fn parse(url: &Uri, body: &[u8], issuer: &str) -> Result<IssuerMetadata, OAuthHttpError> {
    let bad = |why| OAuthHttpError::Malformed {
        url: shown(url),
        why,
    };
    let doc: Document =
        serde_json::from_slice(body).map_err(|_| bad("not an authorization server's metadata"))?;
    if doc.issuer != issuer {
        return Err(bad("the metadata names another issuer"));
    }
    let endpoint = |v: Option<String>, why| -> Result<Option<Endpoint>, OAuthHttpError> {
        v.map(|s| check_endpoint(&s).map_err(|_| bad(why)))
            .transpose()
    };
    Ok(IssuerMetadata {
        jwks_uri: endpoint(doc.jwks_uri, "jwks_uri is not an https URL")?,
        token_endpoint: endpoint(doc.token_endpoint, "token_endpoint is not an https URL")?,
        introspection_endpoint: endpoint(
            doc.introspection_endpoint,
            "introspection_endpoint is not an https URL",
        )?,
        authorization_endpoint: endpoint(
            doc.authorization_endpoint,
            "authorization_endpoint is not an https URL",
        )?,
        code_challenge_methods: doc.code_challenge_methods_supported,
        issuer: doc.issuer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_follow_rfc8414_then_oidc() {
        let u: Uri = "https://idp.example.com/realms/mcp".parse().unwrap();
        assert_eq!(
            candidates(&u),
            [
                "https://idp.example.com/.well-known/oauth-authorization-server/realms/mcp",
                "https://idp.example.com/realms/mcp/.well-known/openid-configuration",
                "https://idp.example.com/.well-known/openid-configuration/realms/mcp",
            ]
        );
        let bare: Uri = "https://idp.example.com/".parse().unwrap();
        assert_eq!(
            candidates(&bare),
            [
                "https://idp.example.com/.well-known/oauth-authorization-server",
                "https://idp.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn metadata_must_name_its_issuer_and_https_endpoints() {
        let url: Uri = "https://idp/x".parse().unwrap();
        let ok = br#"{"issuer":"https://idp","jwks_uri":"https://idp/jwks","token_endpoint":"https://idp/token"}"#;
        let m = parse(&url, ok, "https://idp").unwrap();
        assert_eq!(m.jwks_uri.unwrap().path(), "/jwks");
        assert!(m.authorization_endpoint.is_none() && m.code_challenge_methods.is_empty());
        let browser = br#"{"issuer":"https://idp","authorization_endpoint":"https://idp/auth","code_challenge_methods_supported":["S256"]}"#;
        let m = parse(&url, browser, "https://idp").unwrap();
        assert_eq!(m.authorization_endpoint.unwrap().path(), "/auth");
        assert_eq!(m.code_challenge_methods, ["S256"]);
        let plain_auth = br#"{"issuer":"https://idp","authorization_endpoint":"http://evil/auth"}"#;
        assert!(parse(&url, plain_auth, "https://idp").is_err());
        assert!(m.introspection_endpoint.is_none());
        assert!(parse(&url, ok, "https://idp/other").is_err());
        let plain = br#"{"issuer":"https://idp","jwks_uri":"http://evil/jwks"}"#;
        assert!(parse(&url, plain, "https://idp").is_err());
        assert!(parse(&url, b"[]", "https://idp").is_err());
    }
}
