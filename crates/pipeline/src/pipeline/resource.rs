//! The route as an OAuth protected resource: its metadata document (RFC
//! 9728), served by the gateway itself at the well-known path from config
//! alone (so it answers while the authorization server is down), and the
//! challenges that point clients at it (`WWW-Authenticate`).

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Method, Response};

use super::body::ProxyBody;
use super::refuse::Refused;
use super::request::head::{check_host, HeadRules};
use super::route::Route;
use super::Peer;
use crate::config::{ProtectedResource, ResourceMetadata, METADATA_PATH};
use crate::identify::{AuthFailure, Challenge};
use crate::model::{Reason, Refusal};

/// Whether `path` is where protected resource metadata is served.
pub(crate) fn is_metadata_path(path: &str) -> bool {
    path.strip_prefix(METADATA_PATH)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The metadata document of the route at `route_path`.
pub(crate) fn metadata(
    parts: &Parts,
    rules: &HeadRules<'_>,
    route_path: &str,
    route: &Route,
    peer: &Peer,
) -> Result<Response<ProxyBody>, Refused> {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return Err(Refused::from(Refusal::new(
            Reason::MethodNotAllowed,
            "protected resource metadata is read with GET",
        ))
        .with_header(header::ALLOW, HeaderValue::from_static("GET, HEAD")));
    }
    let Some(protected) = &route.config.protected else {
        return Err(not_found());
    };
    let authority = check_host(parts, rules).map_err(Refused::from)?;
    let resource = protected.resource(peer.tls, authority.to_str().unwrap_or_default(), route_path);
    let doc = ResourceMetadata {
        resource: &resource,
        authorization_servers: &protected.authorization_servers,
        scopes_supported: &protected.scopes_supported,
        bearer_methods_supported: ["header"],
        resource_name: route
            .config
            .federation
            .as_ref()
            .map_or(route.name(), |f| f.name.as_str()),
    };
    let body = serde_json::to_vec(&doc).map_err(|_| not_found())?;
    let body = if parts.method == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(body)
    };
    let mut resp = Response::new(ProxyBody::full(body));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    // Public by design: browser-based hosts read it across origins.
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    Ok(resp)
}

fn not_found() -> Refused {
    Refused::from(Refusal::new(
        Reason::RouteNotFound,
        "no OAuth protected resource is configured at this path",
    ))
}

/// What a request's challenges say of the route: its resource identifier
/// and where its metadata is.
pub(crate) struct Protected<'a> {
    pub(crate) config: &'a ProtectedResource,
    pub(crate) resource: String,
    pub(crate) metadata_url: String,
}

impl<'a> Protected<'a> {
    /// For a request to `path` at the checked `authority`.
    pub(crate) fn of(
        route: &'a Route,
        peer: &Peer,
        authority: &HeaderValue,
        path: &str,
    ) -> Option<Self> {
        let config = route.config.protected.as_ref()?;
        let resource = config.resource(peer.tls, authority.to_str().unwrap_or_default(), path);
        let metadata_url = ProtectedResource::metadata_url(&resource);
        Some(Protected {
            config,
            resource,
            metadata_url,
        })
    }

    /// The `WWW-Authenticate` value for `failure` on this resource.
    pub(crate) fn challenge(&self, failure: &AuthFailure) -> HeaderValue {
        failure.www_authenticate(Some(Challenge {
            resource_metadata: &self.metadata_url,
            scopes: &self.config.required_scopes,
        }))
    }
}
