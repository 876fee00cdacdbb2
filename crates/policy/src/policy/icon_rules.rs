//! Which icons a client may be handed. A server names icons for itself and
//! for every tool, prompt, resource and template it lists; the client
//! fetches and draws them without asking anyone. An `http:`, `file:` or
//! `javascript:` source, a URL to an address inside the client's network,
//! or an SVG (which can carry script) is something the client fetches or
//! runs on the server's say-so. An icon is kept only when its source is a
//! `data:` URI of an image or a URL that passes the same host checks as a
//! URL-mode elicitation.

use crate::policy::url_rules::{UrlPolicy, UrlRefusal};

/// What happens to the icons of an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IconAction {
    /// Keep the icons that pass [`IconPolicy::check`], remove the others.
    Check,
    /// Remove every icon.
    Strip,
    /// Pass every icon unread.
    Allow,
}

/// Raster image types a `data:` icon may have; SVG only with `allow_svg`.
const RASTER: &[&str] = &[
    "image/png",
    "image/apng",
    "image/jpeg",
    "image/jpg",
    "image/gif",
    "image/webp",
    "image/avif",
    "image/bmp",
    "image/x-icon",
    "image/vnd.microsoft.icon",
];
const SVG: &str = "image/svg+xml";

#[derive(Debug, Clone)]
pub struct IconPolicy {
    pub action: IconAction,
    pub(crate) allow_svg: bool,
    /// The checks for an icon given by URL: the URL-mode flags (scheme,
    /// IP literals, local names, punycode, denied hosts) with the icons'
    /// own allowed hosts.
    pub(crate) url: UrlPolicy,
}

impl Default for IconPolicy {
    fn default() -> Self {
        IconPolicy {
            action: IconAction::Check,
            allow_svg: false,
            url: UrlPolicy::strict(),
        }
    }
}

/// Why an icon is removed. [`IconRefusal::as_str`] values are a stable
/// contract (they are the verdict's detail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IconRefusal {
    /// Not an object with a string `src`.
    NotAnIcon,
    /// The policy removes every icon.
    Stripped,
    /// A `data:` URI that is not an image, or a `mimeType` that is not one.
    NotAnImage,
    /// An SVG, by its media type or its file name, without `allow_svg`.
    Svg,
    /// A URL the host checks refuse.
    Url(UrlRefusal),
}

impl IconRefusal {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            IconRefusal::NotAnIcon => "not_an_icon",
            IconRefusal::Stripped => "icons_stripped",
            IconRefusal::NotAnImage => "not_an_image",
            IconRefusal::Svg => "svg",
            IconRefusal::Url(why) => why.as_str(),
        }
    }
}

impl IconPolicy {
    /// Check one icon's `src` and its optional `mimeType`.
    pub fn check(&self, src: &str, mime_type: Option<&str>) -> Result<(), IconRefusal> {
        match self.action {
            IconAction::Allow => return Ok(()),
            IconAction::Strip => return Err(IconRefusal::Stripped),
            IconAction::Check => {}
        }
        if let Some(mime) = mime_type {
            self.image_type(mime)?;
        }
        match data_media_type(src) {
            Some(media) => self.image_type(media),
            None => {
                self.url.check(src).map_err(IconRefusal::Url)?;
                if !self.allow_svg && names_svg(src) {
                    return Err(IconRefusal::Svg);
                }
                Ok(())
            }
        }
    }

    /// A media type, parameters aside (`image/png; charset=binary`).
    fn image_type(&self, media: &str) -> Result<(), IconRefusal> {
        let media = media.split(';').next().unwrap_or(media).trim();
        if media.eq_ignore_ascii_case(SVG) {
            return if self.allow_svg {
                Ok(())
            } else {
                Err(IconRefusal::Svg)
            };
        }
        if RASTER.iter().any(|t| media.eq_ignore_ascii_case(t)) {
            Ok(())
        } else {
            Err(IconRefusal::NotAnImage)
        }
    }
}

/// The media type of a `data:` URI (empty when it names none, which means
/// text), or `None` when `src` is not one.
fn data_media_type(src: &str) -> Option<&str> {
    let scheme = src.get(..5)?;
    if !scheme.eq_ignore_ascii_case("data:") {
        return None;
    }
    let rest = &src[5..];
    let header = rest.split(',').next().unwrap_or(rest);
    Some(header.split(';').next().unwrap_or(header))
}

/// Whether a URL's path, decoded, names an SVG file anywhere (`i.svg`,
/// `i%2Esvg`, `i.svg;.png`, `i.svg%00.png`). What the server really serves
/// there is the client's to read: the gateway does not fetch icons.
fn names_svg(src: &str) -> bool {
    let path = src.split(['?', '#']).next().unwrap_or(src);
    let decoded = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
    decoded.to_ascii_lowercase().contains(".svg")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow_svg: bool) -> IconPolicy {
        IconPolicy {
            allow_svg,
            ..IconPolicy::default()
        }
    }

    #[test]
    fn images_pass_and_everything_a_client_should_not_fetch_is_removed() {
        let p = policy(false);
        for ok in [
            "data:image/png;base64,iVBORw0KGgo=",
            "DATA:IMAGE/JPEG;base64,/9j/",
            "data:image/webp,RIFF",
            "https://cdn.example.com/icons/book.png",
            "https://example.com/i?size=48",
        ] {
            assert_eq!(p.check(ok, None), Ok(()), "{ok}");
        }
        let refused = [
            (
                "http://example.com/i.png",
                IconRefusal::Url(UrlRefusal::SchemeNotAllowed),
            ),
            (
                "javascript:alert(1)",
                IconRefusal::Url(UrlRefusal::SchemeNotAllowed),
            ),
            (
                "file:///etc/passwd",
                IconRefusal::Url(UrlRefusal::SchemeNotAllowed),
            ),
            (
                "https://10.0.0.7/i.png",
                IconRefusal::Url(UrlRefusal::IpLiteral),
            ),
            (
                "https://[::1]/i.png",
                IconRefusal::Url(UrlRefusal::IpLiteral),
            ),
            (
                "https://printer/i.png",
                IconRefusal::Url(UrlRefusal::LocalName),
            ),
            (
                "https://user:pw@example.com/i.png",
                IconRefusal::Url(UrlRefusal::UserInfo),
            ),
            (
                "https://xn--pple-43d.com/i.png",
                IconRefusal::Url(UrlRefusal::Punycode),
            ),
            ("https://example.com/logo.SVG?x=1", IconRefusal::Svg),
            ("https://example.com/i%2Esvg", IconRefusal::Svg),
            ("https://example.com/i.sv%67", IconRefusal::Svg),
            ("https://example.com/i.svg;.png", IconRefusal::Svg),
            ("https://example.com/i.svg%00.png", IconRefusal::Svg),
            ("https://example.com/i.svgz", IconRefusal::Svg),
            ("data:image/svg+xml;base64,PHN2Zz4=", IconRefusal::Svg),
            (
                "data:text/html,<script>alert(1)</script>",
                IconRefusal::NotAnImage,
            ),
            ("data:,hello", IconRefusal::NotAnImage),
            ("not a url", IconRefusal::Url(UrlRefusal::Unparseable)),
        ];
        for (src, why) in refused {
            assert_eq!(p.check(src, None), Err(why), "{src}");
        }
    }

    #[test]
    fn the_mime_type_override_is_held_to_the_same_types() {
        let p = policy(false);
        let png = "https://example.com/i.png";
        assert_eq!(p.check(png, Some("image/png")), Ok(()));
        assert_eq!(p.check(png, Some("image/png; charset=binary")), Ok(()));
        assert_eq!(p.check(png, Some("image/apng")), Ok(()));
        assert_eq!(
            p.check(png, Some("IMAGE/SVG+XML ; x=1")),
            Err(IconRefusal::Svg)
        );
        assert_eq!(
            p.check(png, Some("text/html")),
            Err(IconRefusal::NotAnImage)
        );
        assert_eq!(p.check(png, Some("image/svg+xml")), Err(IconRefusal::Svg));
        assert_eq!(policy(true).check(png, Some("image/svg+xml")), Ok(()));
        assert_eq!(
            policy(true).check("https://example.com/a.svg", None),
            Ok(())
        );
    }

    #[test]
    fn strip_removes_all_and_allow_reads_nothing() {
        let strip = IconPolicy {
            action: IconAction::Strip,
            ..IconPolicy::default()
        };
        let allow = IconPolicy {
            action: IconAction::Allow,
            ..IconPolicy::default()
        };
        let png = "data:image/png;base64,iVBORw0KGgo=";
        assert_eq!(strip.check(png, None), Err(IconRefusal::Stripped));
        assert_eq!(allow.check("javascript:alert(1)", None), Ok(()));
    }
}
