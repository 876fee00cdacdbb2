//! The approval page's HTML: every page is written by the gateway alone,
//! every value HTML-escaped, nothing loaded from elsewhere.

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::Full;

use crate::pipeline::approve::pending::{Undecided, PAGE_PATH};

/// Where the sign-in form posts, and the sign-out form.
pub(super) const SIGN_IN_PATH: &str = "/approvals/sign-in";
pub(super) const SIGN_OUT_PATH: &str = "/approvals/sign-out";

/// A page of the gateway's own: nothing is loaded from elsewhere, no
/// script runs, no other site may frame it or post to it.
pub(super) fn page(status: StatusCode, title: &str, body: &str) -> Response<Full<Bytes>> {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t} — Portcullis</title></head><body><h1>{t}</h1>{body}</body></html>\n",
        t = escape(title)
    );
    let mut r = crate::admin::text(status, "text/html; charset=utf-8", html);
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
pub(super) fn escape(text: &str) -> String {
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

/// The sign-in form: the approver pastes a credential of the approval's
/// route once (`approval`: the approval signed in for; none from the list).
pub(super) fn sign_in_form(csrf: &str, approval: Option<&str>) -> String {
    let approval = approval
        .map(|id| {
            format!(
                "<input type=\"hidden\" name=\"approval\" value=\"{}\">",
                escape(id)
            )
        })
        .unwrap_or_default();
    format!(
        "<form method=\"post\" action=\"{SIGN_IN_PATH}\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">{approval}<label>API key or access token of the call's route <input type=\"password\" name=\"credential\" autocomplete=\"off\" required></label> <button type=\"submit\">Sign in</button></form>",
        escape(csrf)
    )
}

/// The sign-out button of a signed-in approver (`csrf`: the session's).
pub(super) fn sign_out_form(who: &str, csrf: &str) -> String {
    format!(
        "<form method=\"post\" action=\"{SIGN_OUT_PATH}\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">Signed in as {} <button type=\"submit\">Sign out</button></form>",
        escape(csrf),
        escape(who)
    )
}

pub(super) fn undecided(why: Undecided) -> Response<Full<Bytes>> {
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

pub(super) fn forbidden(name: &str) -> Response<Full<Bytes>> {
    page(
        StatusCode::FORBIDDEN,
        "Not an approver",
        &format!(
            "<p>{} is not an approver of this call's rule.</p>",
            escape(name)
        ),
    )
}

/// 401, with the sign-in form when `form` is given (a browser may sign in).
pub(super) fn unauthenticated(why: &str, form: Option<String>) -> Response<Full<Bytes>> {
    let mut r = page(
        StatusCode::UNAUTHORIZED,
        "Sign-in needed",
        &format!("<p>{}</p>{}", escape(why), form.unwrap_or_default()),
    );
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// The path of an approval (or of the list) on the page, under the path
/// prefix of `[admin] approval_url`: where a sign-in returns to. Made of
/// the gateway's own values only, never a URL from the request.
pub(super) fn page_path(approval_url: Option<&str>, id: Option<&str>) -> String {
    let prefix = approval_url
        .and_then(|u| url::Url::parse(u).ok())
        .map(|u| u.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    match id {
        Some(id) => format!("{prefix}{PAGE_PATH}/{id}"),
        None => format!("{prefix}{PAGE_PATH}"),
    }
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
    fn a_sign_in_returns_under_the_configured_prefix_only() {
        assert_eq!(page_path(None, Some("abc")), "/approvals/abc");
        assert_eq!(
            page_path(Some("https://a.example/gw"), Some("abc")),
            "/gw/approvals/abc"
        );
        assert_eq!(page_path(Some("https://a.example"), None), "/approvals");
    }
}
