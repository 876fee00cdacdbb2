//! A route as an OAuth protected resource (RFC 9728): what its metadata
//! document says, and the resource identifier tokens must be issued for.
//! Built once from the route's `oauth` schemes; the identifier defaults to
//! the URL the client used, so it is completed per request from the
//! checked `Host` (the head phase refuses names the listener does not serve).

use http::Uri;
use serde::Serialize;
use toml::Spanned;

use super::locate::Locator;
use super::ConfigError;
use crate::identify::{AuthSchemes, SchemeId};

/// Where every protected resource's metadata is served (RFC 9728 §3), the
/// route's path appended.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    /// `resource` as configured; `None`: the URL the client used.
    pub(crate) configured: Option<Uri>,
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Vec<String>,
    /// Scopes every token must carry (the first challenge's `scope`).
    pub required_scopes: Vec<String>,
}

/// The RFC 9728 document.
#[derive(Serialize)]
pub struct Metadata<'a> {
    pub resource: &'a str,
    pub authorization_servers: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub scopes_supported: &'a [String],
    pub bearer_methods_supported: [&'static str; 1],
    pub resource_name: &'a str,
}

impl ProtectedResource {
    /// From the route's schemes; `None` when none is of type `oauth`.
    pub(crate) fn of(
        schemes: &[SchemeId],
        auth: &AuthSchemes,
        configured: Option<Uri>,
    ) -> Option<ProtectedResource> {
        let mut out = ProtectedResource {
            configured,
            authorization_servers: Vec::new(),
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
        };
        let mut any = false;
        for view in schemes.iter().filter_map(|id| auth.oauth(*id)) {
            any = true;
            push_new(&mut out.authorization_servers, [&view.issuer]);
            push_new(&mut out.scopes_supported, &view.scopes);
            push_new(&mut out.required_scopes, &view.required);
        }
        any.then_some(out)
    }

    /// The resource identifier for a request to `path` at `authority`.
    pub fn resource(&self, tls: bool, authority: &str, path: &str) -> String {
        match &self.configured {
            Some(u) => u.to_string(),
            None => format!("{}://{authority}{path}", if tls { "https" } else { "http" }),
        }
    }

    /// The absolute URL of the metadata of `resource` (RFC 9728 §3.1: the
    /// well-known path inserted before the resource's path).
    pub fn metadata_url(resource: &str) -> String {
        match resource.parse::<Uri>() {
            Ok(u) => {
                let path = u.path().trim_end_matches('/');
                format!(
                    "{}://{}{METADATA_PATH}{path}",
                    u.scheme_str().unwrap_or("https"),
                    u.authority().map(|a| a.as_str()).unwrap_or_default()
                )
            }
            Err(_) => METADATA_PATH.to_owned(),
        }
    }

    /// The paths of this gateway the metadata of the route at `route_path`
    /// is served at: after the route's path, and after the configured
    /// resource's path when that differs (a proxy in front rewrites paths).
    pub fn metadata_paths(&self, route_path: &str) -> Vec<String> {
        let mut out = vec![format!(
            "{METADATA_PATH}{}",
            route_path.trim_end_matches('/')
        )];
        if let Some(u) = &self.configured {
            let p = format!("{METADATA_PATH}{}", u.path().trim_end_matches('/'));
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }
}

fn push_new<'a>(to: &mut Vec<String>, items: impl IntoIterator<Item = &'a String>) {
    for i in items {
        if !to.contains(i) {
            to.push(i.clone());
        }
    }
}

/// `route.resource`: an absolute https URL (http only for a loopback host)
/// without a fragment (RFC 8707 §2).
pub(super) fn configured(
    raw: &Option<Spanned<String>>,
    field: &str,
    loc: &Locator<'_>,
) -> Result<Option<Uri>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let text = raw.get_ref();
    if text.contains('#') {
        return Err(loc.at(
            raw.span(),
            field,
            "a resource identifier has no fragment (RFC 8707)",
        ));
    }
    crate::oauth::check_endpoint(text)
        .map(Some)
        .map_err(|why| loc.at(raw.span(), field, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_insert_the_well_known_path() {
        assert_eq!(
            ProtectedResource::metadata_url("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            ProtectedResource::metadata_url("http://127.0.0.1:8080/"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
        let r = ProtectedResource {
            configured: Some("https://mcp.example.com/tools/mcp".parse().unwrap()),
            authorization_servers: vec![],
            scopes_supported: vec![],
            required_scopes: vec![],
        };
        assert_eq!(
            r.resource(false, "10.0.0.1:8080", "/mcp"),
            "https://mcp.example.com/tools/mcp"
        );
        assert_eq!(
            r.metadata_paths("/mcp"),
            [
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource/tools/mcp"
            ]
        );
        let derived = ProtectedResource {
            configured: None,
            ..r
        };
        assert_eq!(
            derived.resource(true, "mcp.example.com", "/mcp"),
            "https://mcp.example.com/mcp"
        );
    }
}
