//! The approval page (`[[approval]]` rules with `approver = "approvers"`
//! or `fallback = "approvers"`): `GET /approvals` lists the calls waiting
//! for the approver who asks, `GET /approvals/ID` shows one, and
//! `POST /approvals/ID` decides it (`csrf` and `decision` =
//! `approve`/`decline`, form-encoded; `remember`, where the rule lets an
//! approval be remembered, keeps it as a person's own would be). Every page is written by the gateway
//! alone — the approval form's words, every value HTML-escaped.
//!
//! Who may see and decide an approval: a principal the schemes of the
//! route the call came on authenticate (a bearer token for its resource on
//! an OAuth protected route, a JWT, an API key) whose name matches the
//! rule's `approvers` or one of whose groups matches `approver_groups`;
//! or the operator, with a request signed with the gateway's `[state]`
//! keys (`Authorization: Portcullis-Admin`, `signed.rs`), who may decide
//! any. The caller is an approver only when the rule names them too.
//! A decision is taken once; a second one, one for an expired approval, or
//! one whose `csrf` is not the approval's own is refused.

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use crate::identify::{AuthFailure, PeerIdentity, Principal};
use crate::pipeline::approve::{
    self,
    pending::{Pending, Undecided, Verdict, PAGE_PATH},
    RefusedDecision,
};
use crate::pipeline::Gateway;
use crate::signed;

/// The largest decision body read.
const MAX_BODY: usize = 1024;

/// Who asks for the page.
enum Viewer {
    /// The operator (a request signed with the `[state]` keys).
    Operator,
    Principal(Principal),
}

impl Viewer {
    fn name(&self) -> String {
        match self {
            Viewer::Operator => "admin".to_owned(),
            Viewer::Principal(p) => format!("{}:{}", p.method, p.name),
        }
    }

    fn may_decide(&self, pending: &Pending) -> bool {
        match self {
            Viewer::Operator => true,
            Viewer::Principal(p) => pending.deciders.admits(p),
        }
    }
}

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
    let id = parts
        .uri
        .path()
        .strip_prefix(PAGE_PATH)
        .and_then(|r| r.strip_prefix('/'))
        .filter(|id| !id.is_empty());
    match (&parts.method, id) {
        (&Method::GET, None) => list(&parts, gateway).await,
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

/// Who asks about `pending`: the operator, or a principal of its route's schemes.
async fn viewer(
    parts: &http::request::Parts,
    body: &[u8],
    pending: &Pending,
    gateway: &Gateway,
) -> Result<Viewer, Response<Full<Bytes>>> {
    if let Some(signed) = operator(parts, gateway, body) {
        return signed.map_err(|()| unauthenticated("The admin signature was refused."));
    }
    let d = &pending.deciders;
    d.auth
        .authenticate(&d.schemes, false, &parts.headers, &PeerIdentity::default(), d.resource.as_deref())
        .await
        .map(Viewer::Principal)
        .map_err(|failure| match failure {
            AuthFailure::Missing => unauthenticated("This page needs a credential: a bearer token of the route's sign-in, or the operator's signed request."),
            _ => unauthenticated("The credential was refused."),
        })
}

async fn list(parts: &http::request::Parts, gateway: &Gateway) -> Response<Full<Bytes>> {
    let now = gateway.clock.now_millis();
    let waiting = gateway.approvals_waiting(now).await;
    let operator = operator(parts, gateway, b"");
    if matches!(operator, Some(Err(()))) {
        return unauthenticated("The admin signature was refused.");
    }
    let mut rows = String::new();
    let mut anyone = operator.is_some();
    for (id, pending) in &waiting {
        let viewer = match &operator {
            Some(_) => Viewer::Operator,
            None => match viewer(parts, b"", pending, gateway).await {
                Ok(v) => v,
                Err(_) => continue,
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
        return unauthenticated("This page needs a credential: a bearer token of the route's sign-in, or the operator's signed request.");
    }
    let body = match rows.is_empty() {
        true => "<p>No call waits for your approval.</p>".to_owned(),
        false => format!("<ul>{rows}</ul>"),
    };
    page(StatusCode::OK, "Calls waiting for approval", &body)
}

async fn show(parts: &http::request::Parts, id: &str, gateway: &Gateway) -> Response<Full<Bytes>> {
    let pending = match gateway.approval(id, gateway.clock.now_millis()).await {
        Ok(p) => p,
        Err(why) => return undecided(why),
    };
    let viewer = match viewer(parts, b"", &pending, gateway).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    if !viewer.may_decide(&pending) {
        return forbidden(&viewer);
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
    let body = format!(
        "<dl><dt>Server</dt><dd>{}</dd><dt>Tool</dt><dd>{}</dd><dt>Asked by</dt><dd>{}</dd><dt>Rule</dt><dd>{} ({})</dd></dl><pre>{}</pre>{}{}",
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
    let viewer = match viewer(parts, body, &known, gateway).await {
        Ok(v) => v,
        Err(r) => {
            approve::refused_decision(gateway, &known, None, RefusedDecision::Unauthenticated);
            return r;
        }
    };
    let by = viewer.name();
    if !viewer.may_decide(&known) {
        approve::refused_decision(gateway, &known, Some(&by), RefusedDecision::NotApprover);
        return forbidden(&viewer);
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

fn undecided(why: Undecided) -> Response<Full<Bytes>> {
    let status = match why {
        Undecided::NotFound => StatusCode::NOT_FOUND,
        Undecided::Expired => StatusCode::GONE,
        Undecided::AlreadyDecided => StatusCode::CONFLICT,
        Undecided::CsrfMismatch => StatusCode::FORBIDDEN,
        Undecided::HolderGone => StatusCode::GONE,
        Undecided::Unreachable => StatusCode::SERVICE_UNAVAILABLE,
    };
    page(
        status,
        "Not decided",
        &format!("<p>{}.</p>", escape(&capitalised(&why.to_string()))),
    )
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn forbidden(viewer: &Viewer) -> Response<Full<Bytes>> {
    page(
        StatusCode::FORBIDDEN,
        "Not an approver",
        &format!(
            "<p>{} is not an approver of this call's rule.</p>",
            escape(&viewer.name())
        ),
    )
}

fn unauthenticated(why: &str) -> Response<Full<Bytes>> {
    let mut r = page(
        StatusCode::UNAUTHORIZED,
        "Sign-in needed",
        &format!("<p>{}</p>", escape(why)),
    );
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// A page of the gateway's own: nothing is loaded from elsewhere, no
/// script runs, no other site may frame it or post to it.
fn page(status: StatusCode, title: &str, body: &str) -> Response<Full<Bytes>> {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t} — Portcullis</title></head><body><h1>{t}</h1>{body}</body></html>\n",
        t = escape(title)
    );
    let mut r = super::text(status, "text/html; charset=utf-8", html);
    secure(r.headers_mut());
    r
}

fn secure(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// Text as HTML text or an attribute value.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            escape("<script>\"a\" & 'b'</script>"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
    }

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
