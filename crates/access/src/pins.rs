//! Upstream identity pins: the SHA-256 of the public key (SubjectPublicKeyInfo)
//! an https upstream's certificate must carry, as Envoy's
//! `verify_certificate_spki` and HPKP's `pin-sha256` spell it. Checked in the
//! handshake, after the usual chain and name verification: a server that keeps
//! its name but answers with another key (a new endpoint, an intercepting
//! proxy, a certificate a public CA issued to someone else) is refused before a
//! byte of MCP is sent. Several pins may be listed, so a key can be rotated
//! (the next key pinned before it is deployed).

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};

/// One pin: the SHA-256 of a SubjectPublicKeyInfo.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpkiPin([u8; 32]);

impl fmt::Debug for SpkiPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256/{}", self.to_base64())
    }
}

/// Why a pin cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error("a pin is the SHA-256 of the key's SubjectPublicKeyInfo: \"sha256/<base64>\", 44 base64 characters, or 64 hex digits (colons allowed); this is {0} bytes once decoded")]
    Length(usize),
    #[error("a pin is the SHA-256 of the key's SubjectPublicKeyInfo: \"sha256/<base64>\", 44 base64 characters, or 64 hex digits (colons allowed); this is neither base64 nor hex")]
    Encoding,
}

impl SpkiPin {
    /// `sha256/<base64>` (HPKP, curl's `--pinnedpubkey`), bare base64
    /// (Envoy's `verify_certificate_spki`), or hex with optional colons
    /// (`openssl … | xxd`-style fingerprints).
    pub fn parse(text: &str) -> Result<SpkiPin, PinError> {
        let t = text.trim();
        let t = t
            .strip_prefix("sha256/")
            .or_else(|| t.strip_prefix("sha256:"))
            .unwrap_or(t);
        let hex: String = t.chars().filter(|c| *c != ':').collect();
        let bytes = if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| PinError::Encoding)?
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(t)
                .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(t))
                .map_err(|_| PinError::Encoding)?
        };
        let array: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| PinError::Length(bytes.len()))?;
        Ok(SpkiPin(array))
    }

    /// The pin of a DER certificate's public key (`None`: not a certificate).
    pub fn of_certificate(der: &[u8]) -> Option<SpkiPin> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let spki = cert.tbs_certificate.subject_pki.raw;
        let digest = ring::digest::digest(&ring::digest::SHA256, spki);
        digest.as_ref().try_into().ok().map(SpkiPin)
    }

    pub fn to_base64(self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.0)
    }
}

/// The handshake failed because the upstream's key is not one of its pins:
/// carried inside rustls's error so that the forwarder can tell it from any
/// other TLS failure (`upstream_identity_mismatch`).
#[derive(Debug, thiserror::Error)]
#[error("the upstream's certificate key is not one of its pinned keys (tls_pins)")]
pub struct PinMismatch;

/// A server verifier that checks the usual chain and name first, then the
/// pins.
#[derive(Debug)]
pub(crate) struct PinnedVerifier {
    pub(crate) inner: Arc<dyn ServerCertVerifier>,
    pub(crate) pins: Vec<SpkiPin>,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        match SpkiPin::of_certificate(end_entity) {
            Some(pin) if self.pins.contains(&pin) => Ok(verified),
            _ => Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                OtherError(Arc::new(PinMismatch)),
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Whether an error (at any depth of its sources) is a pin mismatch.
pub fn is_pin_mismatch(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        if s.downcast_ref::<PinMismatch>().is_some() {
            return true;
        }
        if let Some(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(o)))) =
            s.downcast_ref::<rustls::Error>()
        {
            if o.downcast_ref::<PinMismatch>().is_some() {
                return true;
            }
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if is_pin_mismatch(inner) {
                    return true;
                }
            }
        }
        source = s.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_pin_is_read() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let pin = SpkiPin::of_certificate(cert.cert.der()).unwrap();
        let b64 = pin.to_base64();
        let hex: String = pin.0.iter().map(|b| format!("{b:02x}")).collect();
        let colons: Vec<String> = pin.0.iter().map(|b| format!("{b:02X}")).collect();
        for text in [
            format!("sha256/{b64}"),
            b64.clone(),
            hex.clone(),
            colons.join(":"),
            format!("sha256:{hex}"),
        ] {
            assert_eq!(SpkiPin::parse(&text), Ok(pin), "{text}");
        }
        assert_eq!(SpkiPin::parse("sha256/AAA="), Err(PinError::Length(2)));
        assert_eq!(SpkiPin::parse("not a pin!"), Err(PinError::Encoding));
        let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        assert_ne!(SpkiPin::of_certificate(other.cert.der()), Some(pin));
    }
}
