//! mTLS: the principal comes from the client certificate rustls has already
//! verified against the listener's client CA (`[listener.tls] client_ca`).
//! This module only reads a name out of it.

use std::sync::Arc;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::config::{printable_name, AuthConfigError, RawAuthScheme};
use super::{Attempt, AuthMethod, PeerIdentity, Principal};

/// Which part of the certificate names the principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CertPrincipal {
    /// The subject's common name (exactly one CN, else no principal).
    SubjectCn,
    /// The first DNS name in the subject alternative names.
    SanDns,
    /// The first e-mail address (rfc822Name) in the subject alternative names.
    SanEmail,
    /// The first URI in the subject alternative names (e.g. a SPIFFE ID).
    SanUri,
}

impl CertPrincipal {
    pub(crate) fn parse(s: &str) -> Option<CertPrincipal> {
        Some(match s {
            "subject_cn" => CertPrincipal::SubjectCn,
            "san_dns" => CertPrincipal::SanDns,
            "san_email" => CertPrincipal::SanEmail,
            "san_uri" => CertPrincipal::SanUri,
            _ => return None,
        })
    }

    #[cfg(test)]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CertPrincipal::SubjectCn => "subject_cn",
            CertPrincipal::SanDns => "san_dns",
            CertPrincipal::SanEmail => "san_email",
            CertPrincipal::SanUri => "san_uri",
        }
    }
}

/// The principal name in a DER certificate, or `None` when the certificate
/// does not parse or lacks the chosen name.
pub(crate) fn principal_from_cert(der: &[u8], from: CertPrincipal) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    if from == CertPrincipal::SubjectCn {
        let mut cns = cert.subject().iter_common_name();
        let cn = cns.next()?;
        if cns.next().is_some() {
            return None; // two CNs: ambiguous, refuse rather than guess
        }
        return cn.as_str().ok().map(str::to_owned);
    }
    let san = cert.subject_alternative_name().ok()??;
    san.value
        .general_names
        .iter()
        .find_map(|name| match (from, name) {
            (CertPrincipal::SanDns, GeneralName::DNSName(s))
            | (CertPrincipal::SanEmail, GeneralName::RFC822Name(s))
            | (CertPrincipal::SanUri, GeneralName::URI(s)) => Some((*s).to_owned()),
            _ => None,
        })
}

#[derive(Debug)]
pub(crate) struct MtlsScheme {
    from: CertPrincipal,
}

impl MtlsScheme {
    pub(crate) fn build(raw: &RawAuthScheme) -> Result<MtlsScheme, AuthConfigError> {
        raw.only("mtls", super::config::MTLS_FIELDS)?;
        let from = match &raw.principal_from {
            None => CertPrincipal::SubjectCn,
            Some(v) => CertPrincipal::parse(v.get_ref()).ok_or_else(|| {
                AuthConfigError::at(
                    v,
                    "auth.principal_from",
                    "expected \"subject_cn\", \"san_dns\", \"san_email\" or \"san_uri\"",
                )
            })?,
        };
        Ok(MtlsScheme { from })
    }

    /// Parses the certificate per request (a few microseconds); no state is
    /// kept between requests.
    pub(crate) fn attempt(&self, peer: &PeerIdentity) -> Attempt {
        let Some(der) = &peer.client_cert else {
            return Attempt::Absent;
        };
        match principal_from_cert(der, self.from) {
            Some(name) if printable_name(&name) => Attempt::Accepted(Principal {
                name: Arc::from(name),
                groups: Arc::from(Vec::<String>::new()),
                method: AuthMethod::Mtls,
                scheme: Arc::default(),
                grant: None,
            }),
            Some(_) => Attempt::Rejected("unusable principal in certificate"),
            None => Attempt::Rejected("no principal in certificate"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identify::tests::{build, build_err};
    use crate::identify::AuthFailure;
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};
    use std::path::Path;

    fn cert(cn: Option<&str>, sans: Vec<SanType>) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Example");
        params.subject_alt_names = sans;
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    fn full_cert() -> Vec<u8> {
        cert(
            Some("alice"),
            vec![
                SanType::DnsName("client.example.com".try_into().unwrap()),
                SanType::DnsName("other.example.com".try_into().unwrap()),
                SanType::Rfc822Name("alice@example.com".try_into().unwrap()),
                SanType::URI("spiffe://example.org/ns/prod/sa/alice".try_into().unwrap()),
            ],
        )
    }

    #[test]
    fn principal_per_source() {
        let der = full_cert();
        let get = |f| principal_from_cert(&der, f);
        assert_eq!(get(CertPrincipal::SubjectCn).as_deref(), Some("alice"));
        assert_eq!(
            get(CertPrincipal::SanDns).as_deref(),
            Some("client.example.com")
        );
        assert_eq!(
            get(CertPrincipal::SanEmail).as_deref(),
            Some("alice@example.com")
        );
        assert_eq!(
            get(CertPrincipal::SanUri).as_deref(),
            Some("spiffe://example.org/ns/prod/sa/alice")
        );

        let bare = cert(None, vec![]);
        for f in ["subject_cn", "san_dns", "san_email", "san_uri"] {
            let f = CertPrincipal::parse(f).unwrap();
            assert_eq!(
                f.as_str(),
                CertPrincipal::parse(f.as_str()).unwrap().as_str()
            );
            assert_eq!(principal_from_cert(&bare, f), None);
        }
        assert_eq!(
            principal_from_cert(b"not a certificate", CertPrincipal::SubjectCn),
            None
        );
    }

    #[test]
    fn mtls_scheme_authenticates() {
        let text = r#"
[[auth]]
name = "cn"
type = "mtls"

[[auth]]
name = "spiffe"
type = "mtls"
principal_from = "san_uri"
"#;
        let s = build(text, Path::new("/")).unwrap();
        let cn = s.lookup("cn").unwrap();
        let uri = s.lookup("spiffe").unwrap();
        let h = http::HeaderMap::new();
        let peer = PeerIdentity {
            client_cert: Some(Arc::from(full_cert())),
        };
        let p = s.authenticate_now(&[cn], false, &h, &peer).unwrap();
        assert_eq!((&*p.name, p.method), ("alice", AuthMethod::Mtls));
        assert!(p.groups.is_empty());
        let p = s.authenticate_now(&[uri], false, &h, &peer).unwrap();
        assert_eq!(&*p.name, "spiffe://example.org/ns/prod/sa/alice");

        // No certificate: missing (or anonymous when allowed).
        let none = PeerIdentity::default();
        assert_eq!(
            s.authenticate_now(&[cn], false, &h, &none),
            Err(AuthFailure::Missing)
        );
        assert!(s
            .authenticate_now(&[cn], true, &h, &none)
            .unwrap()
            .is_anonymous());

        // A certificate without the chosen name is refused, not anonymous.
        let bare = PeerIdentity {
            client_cert: Some(Arc::from(cert(Some("svc"), vec![]))),
        };
        assert_eq!(
            s.authenticate_now(&[uri], true, &h, &bare),
            Err(AuthFailure::Invalid {
                scheme: "spiffe".into(),
                why: "no principal in certificate"
            })
        );
        assert!(format!("{bare:?}").contains("client_cert"));
    }

    #[test]
    fn mtls_config_errors() {
        let (line, e) =
            build_err("[[auth]]\nname = \"m\"\ntype = \"mtls\"\nprincipal_from = \"subject\"\n");
        assert_eq!((line, e.field.as_str()), (4, "auth.principal_from"));
        let (line, e) = build_err("[[auth]]\nname = \"m\"\ntype = \"mtls\"\njwks_file = \"x\"\n");
        assert_eq!((line, e.field.as_str()), (4, "auth.jwks_file"));
        // API keys on an mtls scheme: reported at the [[auth.key]] table.
        let (line, e) = build_err(&format!(
            "[[auth]]\nname = \"m\"\ntype = \"mtls\"\n\n[[auth.key]]\nprincipal = \"a\"\nhash = \"{}\"\n",
            crate::identify::hash_key("k")
        ));
        assert_eq!(e.field, "auth.key");
        assert!((5..=6).contains(&line), "line {line}");
    }
}
