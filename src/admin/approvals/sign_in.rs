//! Signing in to the approval page with a browser: the approver pastes an
//! API key or access token of the call's route once into the page's form
//! (`POST /approvals/sign-in`: `csrf`, `credential`, and `approval`, the
//! approval signed in for). It is checked exactly as the Authorization
//! header would be (`Bearer`, by the route's schemes, for its resource),
//! never logged, echoed or kept: the session cookie says who signed in.
//! The operator pastes a short-lived token that `portcullis approval-token`
//! makes with the `[state]` keys (never the keys themselves).
//! `POST /approvals/sign-out` (`csrf`: the session's) ends the session.
//!
//! A refused sign-in for a known approval is recorded like a refused
//! decision (`approval_sign_in_refused`, and its count): who tried when the
//! credential was valid, and why.

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::Full;

use super::page::{self, escape, page, page_path};
use super::session::{self, Jar, Who};
use crate::identify::PeerIdentity;
use crate::pipeline::approve::pending::{same_token, Pending, Undecided};
use crate::pipeline::approve::{self, RefusedSignIn};
use crate::pipeline::Gateway;

/// The fields of a sign-in or sign-out form.
#[derive(Default)]
struct SignInForm {
    csrf: String,
    approval: Option<String>,
    /// The pasted credential: read, checked and dropped.
    credential: String,
}

fn fields(body: &[u8]) -> SignInForm {
    let mut form = SignInForm::default();
    for (k, v) in url::form_urlencoded::parse(body) {
        match &*k {
            "csrf" => form.csrf = v.into_owned(),
            "approval" if !v.is_empty() => form.approval = Some(v.into_owned()),
            "credential" => form.credential = v.trim().to_owned(),
            _ => {}
        }
    }
    form
}

/// 401 with the sign-in form, and the cookie that binds the form to this
/// browser; `end_session`: a session cookie that did not hold is removed.
pub(super) fn needed(
    gateway: &Gateway,
    why: &str,
    approval: Option<&str>,
    end_session: bool,
) -> Response<Full<Bytes>> {
    let jar = Jar::of(gateway);
    let Some((csrf, cookie)) = jar.sign_in_form(gateway.clock.now_millis()) else {
        return page::unauthenticated(why, None);
    };
    let mut r = page::unauthenticated(why, Some(page::sign_in_form(&csrf, approval)));
    r.headers_mut().append(header::SET_COOKIE, cookie);
    if end_session {
        if let Some(end) = jar.end() {
            r.headers_mut().append(header::SET_COOKIE, end);
        }
    }
    r
}

/// `POST /approvals/sign-in`.
pub(super) async fn sign_in(
    parts: &http::request::Parts,
    body: &[u8],
    gateway: &Gateway,
) -> Response<Full<Bytes>> {
    let form = fields(body);
    let now = gateway.clock.now_millis();
    let jar = Jar::of(gateway);
    let pending = match &form.approval {
        Some(id) => match gateway.approval_known(id).await {
            Some(p) => Some(p),
            None => return page::undecided(Undecided::NotFound),
        },
        None => None,
    };
    let refuse = |who: Option<&str>, why: RefusedSignIn| {
        match &pending {
            Some(p) => approve::refused_sign_in(gateway, p, who, why),
            None => tracing::warn!(
                who = who.unwrap_or("unknown"),
                why = why.as_str(),
                "approval page: a sign-in was refused"
            ),
        };
    };
    let approval = form.approval.as_deref();
    if !jar.sign_in_matches(&parts.headers, &form.csrf, now) {
        refuse(None, RefusedSignIn::TokenMismatch);
        let mut r = needed(
            gateway,
            "The sign-in form has expired or was not shown to this browser: sign in again.",
            approval,
            false,
        );
        *r.status_mut() = StatusCode::FORBIDDEN;
        return r;
    }
    if form.credential.is_empty() {
        refuse(None, RefusedSignIn::CredentialMissing);
        return needed(
            gateway,
            "Paste an API key or access token.",
            approval,
            false,
        );
    }
    if form.credential.starts_with(session::OPERATOR_PREFIX) {
        if !jar.operator_token_holds(&form.credential, now) {
            refuse(None, RefusedSignIn::CredentialRefused);
            return needed(gateway, "The operator's token was refused (made with other keys, or more than 5 minutes ago).", approval, false);
        }
        tracing::info!(who = "admin", "approval page: the operator signed in");
        return signed_in(gateway, &jar, Who::Operator, approval, now);
    }
    let candidates: Vec<std::sync::Arc<Pending>> = match &pending {
        Some(p) => vec![p.clone()],
        None => gateway
            .pending
            .waiting(now)
            .into_iter()
            .map(|(_, p)| p)
            .collect(),
    };
    let mut found = None;
    let mut tried: Vec<Tried<'_>> = Vec::new();
    for p in &candidates {
        // One check per route's schemes and resource, however many calls wait.
        let d = &p.deciders;
        // (Scheme ids are of their config generation: its schemes are part of it.)
        let route = (
            std::sync::Arc::as_ptr(&d.auth) as usize,
            d.schemes.as_slice(),
            d.resource.as_deref(),
        );
        if tried.contains(&route) {
            continue;
        }
        tried.push(route);
        if let Some(who) = check(d, &form.credential).await {
            found = Some((who, p));
            break;
        }
    }
    let Some((who, p)) = found else {
        refuse(None, RefusedSignIn::CredentialRefused);
        return needed(gateway, "The credential was refused.", approval, false);
    };
    let name = who.name(&p.deciders);
    let admitted = who.viewer_for(&p.deciders).is_some_and(|v| v.may_decide(p));
    if pending.is_some() && !admitted {
        refuse(Some(&name), RefusedSignIn::NotApprover);
        return page::forbidden(&name);
    }
    tracing::info!(who = %name, "approval page: an approver signed in");
    signed_in(gateway, &jar, who, approval, now)
}

/// A route's schemes (of their config generation, by its address) and
/// resource, checked.
type Tried<'a> = (usize, &'a [crate::identify::SchemeId], Option<&'a str>);

/// 303 to the approval (or the list) with the session cookie.
pub(super) fn signed_in(
    gateway: &Gateway,
    jar: &Jar<'_>,
    who: Who,
    approval: Option<&str>,
    now: u64,
) -> Response<Full<Bytes>> {
    landed(gateway, jar, who, approval, now, false)
}

/// Signed in: the session cookie, and the way back to the approval (or
/// the list). `from_other_site`: the browser came from the issuer's
/// redirect, and a redirect chain that began on another site does not
/// carry `SameSite=Strict` cookies, so the page sends the browser on
/// itself (a refresh from this site's own page).
pub(super) fn landed(
    gateway: &Gateway,
    jar: &Jar<'_>,
    who: Who,
    approval: Option<&str>,
    now: u64,
    from_other_site: bool,
) -> Response<Full<Bytes>> {
    let Some(cookie) = jar.start(who, now) else {
        return page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Not signed in",
            "<p>The gateway holds no key to seal a session with.</p>",
        );
    };
    let to = escape(&page_path(gateway.config.approval_url.as_deref(), approval));
    let link = format!("<p><a href=\"{to}\">{to}</a></p>");
    let mut r = match from_other_site {
        false => page(StatusCode::SEE_OTHER, "Signed in", &link),
        true => page(
            StatusCode::OK,
            "Signed in",
            &format!("<meta http-equiv=\"refresh\" content=\"0;url={to}\">{link}"),
        ),
    };
    let h = r.headers_mut();
    h.append(header::SET_COOKIE, cookie);
    if let Some(done) = jar.sign_in_done() {
        h.append(header::SET_COOKIE, done);
    }
    if !from_other_site {
        if let Ok(location) = HeaderValue::from_str(&to) {
            h.insert(header::LOCATION, location);
        }
    }
    r
}

/// Who `credential` is to the route of `deciders`, checked as its
/// Authorization header would be; and the scheme that took it.
pub(super) async fn check(deciders: &approve::pending::Deciders, credential: &str) -> Option<Who> {
    let mut value = HeaderValue::from_str(&format!("Bearer {credential}")).ok()?;
    value.set_sensitive(true);
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, value);
    let resource = deciders.resource.as_deref();
    let peer = PeerIdentity::default();
    let auth = &deciders.auth;
    let principal = auth
        .authenticate(&deciders.schemes, false, &headers, &peer, resource)
        .await
        .ok()?;
    // The scheme that took it: the session is good on routes that list it.
    let id = auth.lookup(&principal.scheme)?;
    Who::principal(deciders, id, &principal)
}

/// `POST /approvals/sign-out`: the session's own token ends it.
pub(super) fn sign_out(
    parts: &http::request::Parts,
    body: &[u8],
    gateway: &Gateway,
) -> Response<Full<Bytes>> {
    let form = fields(body);
    let jar = Jar::of(gateway);
    let now = gateway.clock.now_millis();
    if let Some(Ok(session)) = jar.session(&parts.headers, now) {
        if !same_token(&session.csrf, &form.csrf) {
            tracing::warn!(
                why = RefusedSignIn::TokenMismatch.as_str(),
                "approval page: a sign-out was refused"
            );
            return page(
                StatusCode::FORBIDDEN,
                "Not signed out",
                "<p>The sign-out form is not this session's.</p>",
            );
        }
    }
    let mut r = page(
        StatusCode::OK,
        "Signed out",
        "<p>You are signed out of the approval page.</p>",
    );
    if let Some(end) = jar.end() {
        r.headers_mut().append(header::SET_COOKIE, end);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_is_read_decoded_and_trimmed() {
        let f = fields(b"csrf=a%2Bb&approval=&credential=+pcl_x+");
        assert_eq!(f.csrf, "a+b");
        assert_eq!(f.approval, None);
        assert_eq!(f.credential, "pcl_x");
    }
}
