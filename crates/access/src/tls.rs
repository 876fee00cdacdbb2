//! Building rustls configurations from PEM files, once, at config load.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: String },
    #[error("{path} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey { path: String },
    #[error("certificate/key rejected by rustls: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("CA certificate in {path} rejected: {message}")]
    BadCa { path: String, message: String },
}

/// The crypto provider every TLS config in the process uses. Chosen explicitly
/// so that the binary does not depend on which provider features other crates
/// switch on.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn open(path: &Path) -> Result<BufReader<File>, TlsError> {
    File::open(path)
        .map(BufReader::new)
        .map_err(|source| TlsError::Read {
            path: path.display().to_string(),
            source,
        })
}

pub(crate) fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = CertificateDer::pem_reader_iter(open(path)?)
        .collect::<Result<_, _>>()
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.display().to_string(),
        });
    }
    Ok(certs)
}

pub(crate) fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    match PrivateKeyDer::from_pem_reader(open(path)?) {
        Ok(key) => Ok(key),
        Err(pem::Error::NoItemsFound) => Err(TlsError::NoKey {
            path: path.display().to_string(),
        }),
        Err(e) => Err(pem_error(path, e)),
    }
}

/// A file that could not be read, or whose PEM sections are malformed (an unterminated
/// section, bad base64): both are a file the gateway cannot use, reported with its path.
fn pem_error(path: &Path, e: pem::Error) -> TlsError {
    let source = match e {
        pem::Error::Io(source) => source,
        other => std::io::Error::new(std::io::ErrorKind::InvalidData, other),
    };
    TlsError::Read {
        path: path.display().to_string(),
        source,
    }
}

/// Server side of a TLS listener, offering HTTP/2 and HTTP/1.1 over ALPN.
/// `client_ca`: verify client certificates against this CA (mTLS);
/// `required` refuses handshakes without one.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<(&Path, bool)>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = load_certs(cert)?;
    let key = load_key(key)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some((ca, required)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in load_certs(ca)? {
                roots.add(c).map_err(|e| TlsError::BadCa {
                    path: ca.display().to_string(),
                    message: e.to_string(),
                })?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider(),
            );
            let verifier = if required {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            let verifier = verifier.build().map_err(|e| TlsError::BadCa {
                path: ca.display().to_string(),
                message: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The webpki roots plus the system's, read once per process.
fn public_roots() -> &'static rustls::RootCertStore {
    static ROOTS: std::sync::OnceLock<rustls::RootCertStore> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        // A missing or unreadable system store is not fatal: the webpki roots
        // and the configured CA still apply.
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        roots
    })
}

/// Client side for an https upstream: the webpki roots and the system's, plus
/// an optional CA file of the operator's; with `pins`, the upstream's key must
/// also be one of them (`crate::pins`).
pub fn client_config(
    ca_file: Option<&Path>,
    pins: &[crate::pins::SpkiPin],
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = public_roots().clone();
    if let Some(path) = ca_file {
        for cert in load_certs(path)? {
            roots.add(cert).map_err(|e| TlsError::BadCa {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?;
    if pins.is_empty() {
        return Ok(Arc::new(
            builder.with_root_certificates(roots).with_no_client_auth(),
        ));
    }
    let inner =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| TlsError::BadCa {
                path: ca_file.map(|p| p.display().to_string()).unwrap_or_default(),
                message: e.to_string(),
            })?;
    let verifier = crate::pins::PinnedVerifier {
        inner,
        pins: pins.to_vec(),
    };
    Ok(Arc::new(
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Each way a PEM file can be unusable is its own error, naming the file.
    #[test]
    fn pem_files_that_cannot_be_used() {
        let dir = tempfile::tempdir().unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert_pem, key_pem) = (cert.cert.pem(), cert.key_pair.serialize_pem());
        let good_cert = file(dir.path(), "cert.pem", &cert_pem);
        let good_key = file(dir.path(), "key.pem", &key_pem);
        assert_eq!(load_certs(&good_cert).unwrap().len(), 1);
        load_key(&good_key).unwrap();
        // A certificate file read for a key, and the other way round.
        assert!(matches!(load_key(&good_cert), Err(TlsError::NoKey { .. })));
        assert!(matches!(
            load_certs(&good_key),
            Err(TlsError::NoCertificate { .. })
        ));
        // Missing, unterminated, not base64: a file the gateway cannot read, with its path.
        let unterminated = cert_pem.replace("-----END CERTIFICATE-----", "");
        let bad_base64 = cert_pem.replacen("MII", "M!I", 1);
        for (name, text) in [("cut.pem", unterminated.as_str()), ("b64.pem", &bad_base64)] {
            let p = file(dir.path(), name, text);
            match load_certs(&p) {
                Err(TlsError::Read { path, .. }) => assert!(path.ends_with(name), "{path}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        let missing = dir.path().join("missing.pem");
        assert!(matches!(load_certs(&missing), Err(TlsError::Read { .. })));
        assert!(matches!(load_key(&missing), Err(TlsError::Read { .. })));
    }
}
