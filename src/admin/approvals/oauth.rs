//! Signing in at the route's authorization server: when the route of an
//! approval has an `oauth` scheme with a sign-in client (`[[admin.sign_in]]`),
//! a browser that opens the approval without a credential is sent to the
//! issuer's authorization endpoint (found in its metadata) with the
//! authorization code flow: PKCE (S256), the route's resource (RFC 8707)
//! and a `state` bound to the browser by a short-lived sealed cookie that
//! also holds the PKCE verifier and the approval. The issuer sends the
//! browser back to `GET /approvals/callback`; the gateway redeems the code
//! at the token endpoint as a confidential client, checks the access token
//! exactly as the route checks bearer tokens (issuer, signature, audience,
//! scopes), and signs the approver in like the form does. It returns only
//! to the approval the flow was started for, never to a URL of the request.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::Full;
use serde::{Deserialize, Serialize};

use super::page::{self, page};
use super::session::Jar;
use super::sign_in;
use crate::config::ApprovalSignIn;
use crate::oauth::{discover, IssuerMetadata, OAuthHttp};
use crate::pipeline::approve::pending::{new_token, same_token, Deciders, Pending};
use crate::pipeline::approve::{self, RefusedSignIn};
use crate::pipeline::Gateway;

/// Where the issuer sends the browser back.
pub(super) const CALLBACK_PATH: &str = "/approvals/callback";
const FLOW_PREFIX: &str = "pcaf1.";
const FLOW_NAME: &str = "portcullis-oauth";
/// How long a browser has to sign in at the issuer.
const FLOW_WINDOW: Duration = Duration::from_secs(600);

/// What the flow's cookie holds.
#[derive(Serialize, Deserialize)]
struct Flow {
    state: String,
    verifier: String,
    approval: String,
    scheme: String,
    expires_ms: u64,
}

fn http() -> Option<&'static OAuthHttp> {
    static HTTP: OnceLock<Option<OAuthHttp>> = OnceLock::new();
    HTTP.get_or_init(|| OAuthHttp::new().ok()).as_ref()
}

/// The sign-in client of a scheme of the approval's route, if any.
fn client_for<'g>(gateway: &'g Gateway, d: &Deciders) -> Option<&'g ApprovalSignIn> {
    gateway.config.approval_sign_in.iter().find(|s| {
        d.auth
            .lookup(&s.scheme)
            .is_some_and(|id| d.schemes.contains(&id))
    })
}

fn redirect_uri(gateway: &Gateway) -> Option<String> {
    let base = gateway
        .pending
        .page_base(gateway.config.approval_url.as_deref())?;
    Some(format!("{base}{CALLBACK_PATH}"))
}

/// How long an issuer's metadata is used before it is read again.
const METADATA_TTL: Duration = Duration::from_secs(300);

/// The issuer's metadata, read at most once per [`METADATA_TTL`]: a
/// browser without a credential cannot make the gateway ask the issuer
/// at every request.
async fn metadata(client: &ApprovalSignIn) -> Option<IssuerMetadata> {
    type Cache = Mutex<HashMap<String, (IssuerMetadata, Instant)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    let fresh = cache.lock().ok().and_then(|c| {
        c.get(&client.issuer)
            .filter(|(_, at)| at.elapsed() < METADATA_TTL)
            .map(|(m, _)| m.clone())
    });
    if fresh.is_some() {
        return fresh;
    }
    match discover(http()?, &client.issuer).await {
        Ok(m) => {
            if let Ok(mut c) = cache.lock() {
                c.insert(client.issuer.clone(), (m.clone(), Instant::now()));
            }
            Some(m)
        }
        Err(e) => {
            tracing::warn!(scheme = %client.scheme, error = %e, "approval page: the issuer's metadata cannot be read");
            None
        }
    }
}

/// The redirect to the issuer for approval `id`, when its route signs in
/// there; `None`: the page's form is the way.
pub(super) async fn start(
    gateway: &Gateway,
    pending: &Pending,
    id: &str,
) -> Option<Response<Full<Bytes>>> {
    let client = client_for(gateway, &pending.deciders)?;
    let meta = metadata(client).await?;
    let supports_s256 = meta.code_challenge_methods.is_empty()
        || meta.code_challenge_methods.iter().any(|m| m == "S256");
    if !supports_s256 {
        tracing::warn!(scheme = %client.scheme, "approval page: the issuer does not take PKCE S256; no sign-in there");
        return None;
    }
    let verifier = format!("{}{}", new_token(), new_token());
    let challenge = URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        verifier.as_bytes(),
    ));
    let flow = Flow {
        state: new_token(),
        verifier,
        approval: id.to_owned(),
        scheme: client.scheme.clone(),
        expires_ms: gateway
            .clock
            .now_millis()
            .saturating_add(FLOW_WINDOW.as_millis() as u64),
    };
    let mut url = url::Url::parse(&meta.authorization_endpoint?.to_string()).ok()?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client.client.id)
            .append_pair("redirect_uri", &redirect_uri(gateway)?)
            .append_pair("state", &flow.state)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        if let Some(resource) = &pending.deciders.resource {
            q.append_pair("resource", resource);
        }
        let scopes = pending
            .deciders
            .auth
            .lookup(&client.scheme)
            .and_then(|id| pending.deciders.auth.oauth(id))
            .map(|v| v.required.join(" "))
            .unwrap_or_default();
        if !scopes.is_empty() {
            q.append_pair("scope", &scopes);
        }
    }
    let jar = Jar::of(gateway);
    let cookie = jar.set_lax(
        FLOW_NAME,
        jar.keys().seal_as(FLOW_PREFIX, &flow)?,
        FLOW_WINDOW,
    )?;
    let mut r = page(
        StatusCode::SEE_OTHER,
        "Sign in",
        "<p>Signing in at the route's authorization server.</p>",
    );
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_str(url.as_str()).ok()?);
    r.headers_mut().append(header::SET_COOKIE, cookie);
    Some(r)
}

/// The callback's query parameters.
#[derive(Default)]
struct Answer {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: bool,
}

fn answer_of(query: Option<&str>) -> Answer {
    let mut a = Answer::default();
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match &*k {
            "code" => a.code = Some(v.into_owned()),
            "state" => a.state = Some(v.into_owned()),
            "iss" => a.iss = Some(v.into_owned()),
            "error" => a.error = true,
            _ => {}
        }
    }
    a
}

/// `GET /approvals/callback`: the issuer's answer, redeemed and checked.
pub(super) async fn callback(
    parts: &http::request::Parts,
    gateway: &Gateway,
) -> Response<Full<Bytes>> {
    let jar = Jar::of(gateway);
    let mut r = redeem(parts, gateway, &jar).await;
    if let Some(done) = jar.set_lax(FLOW_NAME, String::new(), Duration::ZERO) {
        r.headers_mut().append(header::SET_COOKIE, done);
    }
    r
}

async fn redeem(
    parts: &http::request::Parts,
    gateway: &Gateway,
    jar: &Jar<'_>,
) -> Response<Full<Bytes>> {
    let now = gateway.clock.now_millis();
    let answer = answer_of(parts.uri.query());
    let flow = jar
        .read(&parts.headers, FLOW_NAME)
        .and_then(|v| jar.keys().open_as::<Flow>(FLOW_PREFIX, v).ok())
        .filter(|f| f.expires_ms > now);
    let Some(flow) = flow else {
        tracing::warn!(
            why = RefusedSignIn::TokenMismatch.as_str(),
            "approval page: a sign-in callback without its browser's flow"
        );
        return page(StatusCode::BAD_REQUEST, "Not signed in", "<p>This sign-in was not started in this browser, or took too long: open the approval's link again.</p>");
    };
    let Some(pending) = gateway.approval_known(&flow.approval).await else {
        return page::undecided(crate::pipeline::approve::pending::Undecided::NotFound);
    };
    let refuse = |why: RefusedSignIn, status: StatusCode, words: &str| {
        approve::refused_sign_in(gateway, &pending, None, why);
        page(
            status,
            "Not signed in",
            &format!("<p>{}</p>", page::escape(words)),
        )
    };
    if !answer
        .state
        .as_deref()
        .is_some_and(|s| same_token(&flow.state, s))
    {
        return refuse(
            RefusedSignIn::TokenMismatch,
            StatusCode::FORBIDDEN,
            "The sign-in's state is not this browser's.",
        );
    }
    // One callback per flow: a copied flow cookie replayed with made-up
    // codes would make the gateway call the token endpoint each time.
    let first = gateway
        .mrtr
        .replay
        .consume_once(
            &format!("approval-sign-in:{}", flow.state),
            flow.expires_ms / 1000 + 1,
        )
        .await;
    if !matches!(first, Ok(true)) {
        return refuse(
            RefusedSignIn::TokenMismatch,
            StatusCode::FORBIDDEN,
            "This sign-in was already used: open the approval's link again.",
        );
    }
    let Some(client) = gateway
        .config
        .approval_sign_in
        .iter()
        .find(|c| c.scheme == flow.scheme)
    else {
        return refuse(
            RefusedSignIn::CredentialRefused,
            StatusCode::FORBIDDEN,
            "The route no longer signs in there.",
        );
    };
    if answer.error {
        return refuse(
            RefusedSignIn::CredentialRefused,
            StatusCode::UNAUTHORIZED,
            "The authorization server did not sign you in.",
        );
    }
    // RFC 9207: an answer from another issuer is a mix-up.
    if answer
        .iss
        .as_deref()
        .is_some_and(|iss| iss != client.issuer)
    {
        return refuse(
            RefusedSignIn::CredentialRefused,
            StatusCode::FORBIDDEN,
            "The answer came from another issuer.",
        );
    }
    let Some(code) = answer.code else {
        return refuse(
            RefusedSignIn::CredentialMissing,
            StatusCode::BAD_REQUEST,
            "The authorization server sent no code.",
        );
    };
    let Some(token) = exchange(gateway, client, &pending, &code, &flow.verifier).await else {
        return refuse(
            RefusedSignIn::CredentialRefused,
            StatusCode::BAD_GATEWAY,
            "The code could not be redeemed at the authorization server.",
        );
    };
    let Some(who) = sign_in::check(&pending.deciders, &token).await else {
        return refuse(
            RefusedSignIn::CredentialRefused,
            StatusCode::UNAUTHORIZED,
            "The access token was refused by the route.",
        );
    };
    let name = who.name(&pending.deciders);
    if !who
        .viewer_for(&pending.deciders)
        .is_some_and(|v| v.may_decide(&pending))
    {
        approve::refused_sign_in(gateway, &pending, Some(&name), RefusedSignIn::NotApprover);
        return page::forbidden(&name);
    }
    tracing::info!(who = %name, "approval page: an approver signed in at the route's issuer");
    sign_in::landed(gateway, jar, who, Some(&flow.approval), now, true)
}

/// The access token for the code (authorization code grant, RFC 6749
/// §4.1.3, with the PKCE verifier and the route's resource).
async fn exchange(
    gateway: &Gateway,
    client: &ApprovalSignIn,
    pending: &Pending,
    code: &str,
    verifier: &str,
) -> Option<String> {
    #[derive(Deserialize)]
    struct TokenAnswer {
        access_token: String,
    }
    let meta = metadata(client).await?;
    let endpoint = meta.token_endpoint?;
    let redirect = redirect_uri(gateway)?;
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect.as_str()),
        ("code_verifier", verifier),
    ];
    if let Some(resource) = &pending.deciders.resource {
        form.push(("resource", resource));
    }
    match http()?
        .post_form(&endpoint, Some(&client.client), &form)
        .await
    {
        Ok(body) => serde_json::from_slice::<TokenAnswer>(&body)
            .ok()
            .map(|t| t.access_token),
        Err(e) => {
            tracing::warn!(scheme = %client.scheme, error = %e, "approval page: the code was not redeemed");
            None
        }
    }
}
