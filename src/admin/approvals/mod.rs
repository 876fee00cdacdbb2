//! The approval page (`[[approval]]` rules with `approver = "approvers"`
//! or `fallback = "approvers"`): `GET /approvals` lists the calls waiting
//! for the approver who asks, `GET /approvals/ID` shows one, and
//! `POST /approvals/ID` decides it (`csrf` and `decision` =
//! `approve`/`decline`, form-encoded; `remember`, where the rule lets an
//! approval be remembered, keeps it as a person's own would be). Every page is written by the gateway
//! alone — the approval form's words, every value HTML-escaped (`page.rs`).
//!
//! Who may see and decide an approval: a principal the schemes of the
//! route the call came on authenticate (a bearer token for its resource on
//! an OAuth protected route, a JWT, an API key) whose name matches the
//! rule's `approvers` or one of whose groups matches `approver_groups`;
//! or the operator, with a request signed with the gateway's `[state]`
//! keys (`Authorization: Portcullis-Admin`, `signed.rs`), who may decide
//! any. The caller is an approver only when the rule names them too.
//! The credential comes with every request, or once: a browser signs in
//! with the page's form (`sign_in.rs`) and is given a session cookie
//! (`session.rs`). A decision is taken once; a second one, one for an
//! expired approval, or one whose `csrf` is not the approval's own is
//! refused — with a cookie as without.

mod oauth;
mod page;
mod session;
mod sign_in;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use crate::identify::{AuthFailure, PeerIdentity};
use crate::pipeline::approve::{
    self,
    pending::{Pending, Undecided, Verdict, PAGE_PATH},
    RefusedDecision, RefusedSignIn,
};
use crate::pipeline::Gateway;
use crate::signed;
use page::{escape, forbidden, page, undecided};
pub use session::{operator_sign_in_token, OPERATOR_TOKEN_LIFETIME};
use session::{Broken, Jar, Session, Viewer};

/// The largest body read (a pasted access token fits).
const MAX_BODY: usize = 16 << 10;

const NEEDS_CREDENTIAL: &str = "This page needs a credential: sign in with an API key or access token of the call's route, or send it (or the operator's signed request) in the Authorization header.";

/// Whether `path` is the approval page's.
pub(super) fn is_page(path: &str) -> bool {
    path == PAGE_PATH
        || path
            .strip_prefix(PAGE_PATH)
            .is_some_and(|r| r.starts_with('/'))
}

pub(super) async fn answer(req: Request<Incoming>, gateway: &Gateway) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => {
            return page(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Too large",
                "<p>The request body is too large.</p>",
            )
        }
    };
    let path = parts.uri.path();
    let id = path
        .strip_prefix(PAGE_PATH)
        .and_then(|r| r.strip_prefix('/'))
        .filter(|id| !id.is_empty());
    match (&parts.method, id) {
        (&Method::GET, None) => list(&parts, gateway).await,
        (&Method::POST, _) if path == page::SIGN_IN_PATH => {
            sign_in::sign_in(&parts, &bytes, gateway).await
        }
        (&Method::POST, _) if path == page::SIGN_OUT_PATH => {
            sign_in::sign_out(&parts, &bytes, gateway)
        }
        (&Method::GET, _) if path == oauth::CALLBACK_PATH => oauth::callback(&parts, gateway).await,
        (&Method::GET, Some(id)) => show(&parts, id, gateway).await,
        (&Method::POST, Some(id)) => decide(&parts, &bytes, id, gateway).await,
        _ => {
            let mut r = page(
                StatusCode::METHOD_NOT_ALLOWED,
                "Not allowed",
                "<p>GET /approvals, GET or POST /approvals/ID.</p>",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST"));
            r
        }
    }
}

/// The operator's signature, or `None` when the request carries none.
fn operator(
    parts: &http::request::Parts,
    gateway: &Gateway,
    body: &[u8],
) -> Option<Result<Viewer, ()>> {
    let auth = parts.headers.get(header::AUTHORIZATION)?;
    if !auth.as_bytes().starts_with(signed::SCHEME.as_bytes()) {
        return None;
    }
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    Some(
        signed::verify(
            &gateway.config.state.keys,
            Some(auth),
            parts.method.as_str(),
            target,
            body,
        )
        .map(|()| Viewer::Operator)
        .map_err(|_| ()),
    )
}

/// Who asks, and the session they asked with (for its sign-out form).
struct Seen {
    viewer: Viewer,
    session: Option<Session>,
}

/// Why nobody is seen: the page to answer with, and a session cookie that
/// did not hold (to be recorded where the approval is known).
struct Unseen {
    response: Response<Full<Bytes>>,
    broken: Option<(RefusedSignIn, Option<String>)>,
    /// No credential at all came (a browser may be sent to sign in).
    missing: bool,
}

/// Who asks about `pending` (`id`): the operator, a principal of its
/// route's schemes (from the Authorization header or any header those
/// schemes read), or the approver the session cookie names.
async fn viewer(
    parts: &http::request::Parts,
    body: &[u8],
    id: Option<&str>,
    pending: &Pending,
    gateway: &Gateway,
) -> Result<Seen, Unseen> {
    let plain = |response| Unseen {
        response,
        broken: None,
        missing: false,
    };
    if let Some(signed) = operator(parts, gateway, body) {
        return match signed {
            Ok(viewer) => Ok(Seen {
                viewer,
                session: None,
            }),
            Err(()) => Err(plain(page::unauthenticated(
                "The admin signature was refused.",
                None,
            ))),
        };
    }
    let jar = Jar::of(gateway);
    let now = gateway.clock.now_millis();
    let by_header = parts.headers.contains_key(header::AUTHORIZATION);
    let session = jar.session(&parts.headers, now).filter(|_| !by_header);
    let session = match session {
        Some(Ok(s)) if !s.who.still_known(&gateway.config.auth) => {
            Some(Err((Broken::Revoked, Some(s.who))))
        }
        other => other,
    };
    match session {
        Some(Ok(session)) => match session.who.viewer_for(&pending.deciders) {
            Some(viewer) => Ok(Seen {
                viewer,
                session: Some(session),
            }),
            None => Err(plain(sign_in::needed(
                gateway,
                "You are signed in with a credential this call's route does not take: sign in with one of its own.",
                id,
                false,
            ))),
        },
        Some(Err((broken, who))) => {
            let why = match broken {
                Broken::Tampered => RefusedSignIn::SessionTampered,
                Broken::Expired | Broken::Revoked => RefusedSignIn::SessionExpired,
            };
            let words = match broken {
                Broken::Tampered => "The sign-in cookie was refused: sign in again.",
                Broken::Expired => "Your sign-in has ended: sign in again.",
                Broken::Revoked => "Your sign-in no longer holds (the gateway's configuration changed): sign in again.",
            };
            Err(Unseen {
                response: sign_in::needed(gateway, words, id, true),
                broken: Some((why, who.map(|w| w.name(&pending.deciders)))),
                missing: false,
            })
        }
        None => by_credential(parts, id, pending, gateway).await,
    }
}

/// A principal of the route's schemes, from the request's own headers.
async fn by_credential(
    parts: &http::request::Parts,
    id: Option<&str>,
    pending: &Pending,
    gateway: &Gateway,
) -> Result<Seen, Unseen> {
    let d = &pending.deciders;
    d.auth
        .authenticate(
            &d.schemes,
            false,
            &parts.headers,
            &PeerIdentity::default(),
            d.resource.as_deref(),
        )
        .await
        .map(|p| Seen {
            viewer: Viewer::Principal(p),
            session: None,
        })
        .map_err(|failure| Unseen {
            missing: failure == AuthFailure::Missing,
            response: match failure {
                AuthFailure::Missing => sign_in::needed(gateway, NEEDS_CREDENTIAL, id, false),
                _ => page::unauthenticated("The credential was refused.", None),
            },
            broken: None,
        })
}

/// Who asks about `pending`, a session cookie that did not hold recorded.
async fn viewer_recorded(
    parts: &http::request::Parts,
    body: &[u8],
    id: &str,
    pending: &Pending,
    gateway: &Gateway,
) -> Result<Seen, Unseen> {
    let seen = viewer(parts, body, Some(id), pending, gateway).await;
    if let Err(Unseen {
        broken: Some((why, who)),
        ..
    }) = &seen
    {
        approve::refused_sign_in(gateway, pending, who.as_deref(), *why);
    }
    seen
}

async fn list(parts: &http::request::Parts, gateway: &Gateway) -> Response<Full<Bytes>> {
    let now = gateway.clock.now_millis();
    let operator = operator(parts, gateway, b"");
    if matches!(operator, Some(Err(()))) {
        return page::unauthenticated("The admin signature was refused.", None);
    }
    // Nothing is read (from this replica or the shared store) for a
    // request that carries no credential at all.
    let presented = operator.is_some()
        || parts.headers.contains_key(header::AUTHORIZATION)
        || Jar::of(gateway).has_session(&parts.headers);
    if !presented {
        return sign_in::needed(gateway, NEEDS_CREDENTIAL, None, false);
    }
    let waiting = gateway.approvals_waiting(now).await;
    let mut rows = String::new();
    let mut anyone = operator.is_some();
    let mut session = None;
    let mut refused = None;
    for (id, pending) in &waiting {
        let viewer = match &operator {
            Some(_) => Viewer::Operator,
            None => match viewer(parts, b"", None, pending, gateway).await {
                Ok(seen) => {
                    session = session.or(seen.session);
                    seen.viewer
                }
                Err(unseen) => {
                    refused.get_or_insert(unseen.response);
                    continue;
                }
            },
        };
        anyone = true;
        if viewer.may_decide(pending) {
            rows.push_str(&format!(
                "<li><a href=\"{PAGE_PATH}/{}\">{} of {}</a>: rule {}, asked by {}</li>",
                escape(id),
                escape(&pending.tool),
                escape(&pending.server),
                escape(&pending.rule),
                escape(&pending.caller),
            ));
        }
    }
    if !anyone && !waiting.is_empty() {
        return refused.unwrap_or_else(|| sign_in::needed(gateway, NEEDS_CREDENTIAL, None, false));
    }
    let body = match rows.is_empty() {
        true => "<p>No call waits for your approval.</p>".to_owned(),
        false => format!("<ul>{rows}</ul>"),
    };
    let signed_in = session
        .map(|s| page::sign_out_form(&session_name(&s), &s.csrf))
        .unwrap_or_default();
    page(
        StatusCode::OK,
        "Calls waiting for approval",
        &format!("{signed_in}{body}"),
    )
}

/// A browser's navigation (`Accept: text/html`), not a tool's request.
fn wants_html(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/html"))
}

fn session_name(s: &Session) -> String {
    match &s.who {
        session::Who::Operator => "admin".to_owned(),
        session::Who::Principal { name, .. } => name.clone(),
    }
}

async fn show(parts: &http::request::Parts, id: &str, gateway: &Gateway) -> Response<Full<Bytes>> {
    let pending = match gateway.approval(id, gateway.clock.now_millis()).await {
        Ok(p) => p,
        Err(why) => return undecided(why),
    };
    let seen = match viewer_recorded(parts, b"", id, &pending, gateway).await {
        Ok(v) => v,
        // A browser without a credential signs in at the route's issuer
        // when the route has a sign-in client there.
        Err(unseen) if unseen.missing && wants_html(&parts.headers) => {
            match oauth::start(gateway, &pending, id).await {
                Some(redirect) => return redirect,
                None => return unseen.response,
            }
        }
        Err(unseen) => return unseen.response,
    };
    if !seen.viewer.may_decide(&pending) {
        return forbidden(&seen.viewer.name());
    }
    let action = format!("{PAGE_PATH}/{}", escape(id));
    let csrf = escape(&pending.csrf);
    let button = |decision: &str, label: &str, extra: &str| {
        format!(
            "<form method=\"post\" action=\"{action}\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"decision\" value=\"{decision}\">{extra}<button type=\"submit\">{label}</button></form>"
        )
    };
    // Where the rule lets an approval be remembered, the approver may.
    let remember = pending
        .remember
        .as_deref()
        .map(|how| {
            format!(
                "<label><input type=\"checkbox\" name=\"remember\" value=\"1\"> Remember this approval {}</label> ",
                escape(how)
            )
        })
        .unwrap_or_default();
    let signed_in = seen
        .session
        .map(|s| page::sign_out_form(&seen.viewer.name(), &s.csrf))
        .unwrap_or_default();
    let body = format!(
        "{signed_in}<dl><dt>Server</dt><dd>{}</dd><dt>Tool</dt><dd>{}</dd><dt>Asked by</dt><dd>{}</dd><dt>Rule</dt><dd>{} ({})</dd></dl><pre>{}</pre>{}{}",
        escape(&pending.server),
        escape(&pending.tool),
        escape(&pending.caller),
        escape(&pending.rule),
        escape(&pending.because),
        escape(&pending.message),
        button("approve", "Approve", &remember),
        button("decline", "Decline", ""),
    );
    page(StatusCode::OK, "A call waits for your approval", &body)
}

async fn decide(
    parts: &http::request::Parts,
    body: &[u8],
    id: &str,
    gateway: &Gateway,
) -> Response<Full<Bytes>> {
    // Who decides is known before what became of the approval: an
    // unauthenticated request learns nothing about it, and every attempt
    // on a known approval is recorded with who made it.
    let Some(known) = gateway.approval_known(id).await else {
        return refused_decision(id, Undecided::NotFound);
    };
    let viewer = match viewer_recorded(parts, body, id, &known, gateway).await {
        Ok(seen) => seen.viewer,
        Err(unseen) => {
            approve::refused_decision(gateway, &known, None, RefusedDecision::Unauthenticated);
            return unseen.response;
        }
    };
    let by = viewer.name();
    if !viewer.may_decide(&known) {
        approve::refused_decision(gateway, &known, Some(&by), RefusedDecision::NotApprover);
        return forbidden(&by);
    }
    let form = form_fields(body);
    let verdict = match form.decision.as_deref() {
        Some("approve") => Verdict::Approved,
        Some("decline") => Verdict::Declined,
        _ => {
            return page(
                StatusCode::BAD_REQUEST,
                "No decision",
                "<p>Send decision=approve or decision=decline.</p>",
            )
        }
    };
    let now = gateway.clock.now_millis();
    let decision = approve::Decision {
        csrf: form.csrf.as_deref().unwrap_or(""),
        verdict,
        remember: form.remember,
        by: &by,
    };
    match gateway.decide_approval(id, decision, now).await {
        Ok(()) => {
            tracing::info!(rule = %known.rule, by = %by, verdict = verdict.as_str(), "approval decided on the page");
            let words = match verdict {
                Verdict::Approved => "Approved: the call goes on to the server.",
                Verdict::Declined => "Declined: the call is refused; nothing was forwarded.",
            };
            page(StatusCode::OK, "Decided", &format!("<p>{words}</p>"))
        }
        Err(why) => {
            if let Some(recorded) = why.recorded_as() {
                approve::refused_decision(gateway, &known, Some(&by), recorded);
            }
            undecided(why)
        }
    }
}

/// The fields of a decision's form-encoded body.
struct DecisionForm {
    csrf: Option<String>,
    decision: Option<String>,
    /// The approver ticked "remember".
    remember: bool,
}

fn form_fields(body: &[u8]) -> DecisionForm {
    let mut form = DecisionForm {
        csrf: None,
        decision: None,
        remember: false,
    };
    for (k, v) in url::form_urlencoded::parse(body) {
        match &*k {
            "csrf" => form.csrf = Some(v.into_owned()),
            "decision" => form.decision = Some(v.into_owned()),
            "remember" => form.remember = !v.is_empty() && v != "0",
            _ => {}
        }
    }
    form
}

/// A decision for no approval this process knows.
fn refused_decision(id: &str, why: Undecided) -> Response<Full<Bytes>> {
    // The id is the approval's; only its first characters are logged.
    let short: String = id.chars().take(6).collect();
    tracing::warn!(approval = %short, why = %why, "approval page: a decision was refused");
    undecided(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_are_read_decoded() {
        let form = form_fields(b"decision=approve&csrf=a%2Bb&other=x");
        assert_eq!(form.csrf.as_deref(), Some("a+b"));
        assert_eq!(form.decision.as_deref(), Some("approve"));
        assert!(!form.remember);
        assert!(form_fields(b"decision=approve&remember=1").remember);
        assert!(!form_fields(b"decision=approve&remember=0").remember);
    }

    #[test]
    fn only_the_page_paths_are_the_page() {
        assert!(is_page("/approvals") && is_page("/approvals/abc"));
        assert!(!is_page("/approvalsx") && !is_page("/listings"));
    }
}
