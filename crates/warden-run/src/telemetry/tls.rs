//! TLS to an `https://` collector: rustls with ring, the
//! system's certificates and those of `OTEL_EXPORTER_OTLP_CERTIFICATE`,
//! and the client's own certificate and key for mutual TLS
//! (`OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`, `..._CLIENT_KEY`). The files
//! are named in the configuration and read when an exporter is made, so
//! a bad one stops warden before anything runs, and a node's warden (a
//! cluster job) reads them again where it runs.

use std::path::Path;
use std::sync::Arc;

use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig, TlsProvider};

use super::{TelemetryError, TlsFiles};

/// Their contents, read and checked.
pub(crate) struct Loaded {
    ca: Vec<Certificate<'static>>,
    ca_pem: Option<Vec<u8>>,
    client: Option<Client>,
}

struct Client {
    chain: Vec<Certificate<'static>>,
    key: PrivateKey<'static>,
    chain_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, TelemetryError> {
    // Certificates are small; a bound keeps a FIFO or a huge file from
    // holding warden (it is read before anything runs).
    crate::regular_file::read(path, 1 << 20)
        .map_err(|e| TelemetryError::Tls(format!("{what} {}: {e}", path.display())))
}

fn certificates(
    pem: &[u8],
    path: &Path,
    what: &str,
) -> Result<Vec<Certificate<'static>>, TelemetryError> {
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        match item {
            Ok(PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => {
                return Err(TelemetryError::Tls(format!(
                    "{what} {}: {e}",
                    path.display()
                )));
            }
        }
    }
    if certs.is_empty() {
        return Err(TelemetryError::Tls(format!(
            "{what} {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(certs)
}

impl TlsFiles {
    /// Reads and checks the files.
    pub(crate) fn load(&self) -> Result<Loaded, TelemetryError> {
        let (ca, ca_pem) = match &self.ca {
            Some(path) => {
                let pem = read(path, "the CA certificate file")?;
                let certs = certificates(&pem, path, "the CA certificate file")?;
                // Each one as rustls will take it: a block whose contents
                // are no certificate would be dropped without a word.
                let (_, unusable) = rustls::RootCertStore::empty()
                    .add_parsable_certificates(certs.iter().map(|c| der_of(c)));
                if unusable > 0 {
                    return Err(TelemetryError::Tls(format!(
                        "the CA certificate file {}: {unusable} of its {} certificate(s) cannot be used (not X.509)",
                        path.display(),
                        certs.len()
                    )));
                }
                (certs, Some(pem))
            }
            None => (Vec::new(), None),
        };
        let client = match (&self.client_certificate, &self.client_key) {
            (None, None) => None,
            (Some(cert), Some(key)) => {
                let chain_pem = read(cert, "the client certificate")?;
                let chain = certificates(&chain_pem, cert, "the client certificate")?;
                let key_pem = read(key, "the client key")?;
                let parsed = PrivateKey::from_pem(&key_pem).map_err(|e| {
                    TelemetryError::Tls(format!(
                        "the client key {}: {e} (a PEM private key: PKCS#8, PKCS#1 or SEC1)",
                        key.display()
                    ))
                })?;
                // As a connection would use them: a key of a kind ring
                // cannot use, or not the certificate's, is refused here,
                // not found by the export thread.
                check_pair(&chain_pem, &key_pem).map_err(|e| {
                    TelemetryError::Tls(format!(
                        "the client certificate {} and key {}: {e}",
                        cert.display(),
                        key.display()
                    ))
                })?;
                Some(Client {
                    chain,
                    key: parsed,
                    chain_pem,
                    key_pem,
                })
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err(TelemetryError::Tls(
                    "a client certificate needs its key and a key its certificate: set both OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY".into(),
                ));
            }
        };
        Ok(Loaded { ca, ca_pem, client })
    }
}

fn der_of(c: &Certificate<'_>) -> rustls::pki_types::CertificateDer<'static> {
    rustls::pki_types::CertificateDer::from(c.der().to_vec())
}

/// Whether rustls with ring takes `chain` and `key` as a client's
/// identity: the key usable, and the certificate's.
fn check_pair(chain_pem: &[u8], key_pem: &[u8]) -> Result<(), String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| e.to_string())?;
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain, key)
        .map(drop)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => "the key is not the certificate's".to_string(),
            other => format!("{other} (ring takes RSA, ECDSA P-256/P-384 and Ed25519 keys)"),
        })
}

/// The system's certificates, read once per process (the spans' and the
/// metrics' clients both need them, and reading them takes milliseconds).
/// A store that cannot be read in part still gives the rest; none at all
/// is said when nothing else is trusted either.
fn system_roots() -> &'static [Certificate<'static>] {
    static ROOTS: std::sync::OnceLock<Vec<Certificate<'static>>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        rustls_native_certs::load_native_certs()
            .certs
            .iter()
            .map(|der| Certificate::from_der(der.as_ref()).to_owned())
            .collect()
    })
}

impl Loaded {
    /// The TLS of the HTTP exporter's client: rustls (ring), the system's
    /// certificates and the CA file's.
    pub(crate) fn ureq(self) -> Result<TlsConfig, TelemetryError> {
        let mut roots = system_roots().to_vec();
        roots.extend(self.ca);
        if roots.is_empty() {
            return Err(no_roots());
        }
        Ok(TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .root_certs(RootCerts::Specific(Arc::new(roots)))
            .client_cert(
                self.client
                    .map(|c| ClientCert::new_with_certs(&c.chain, c.key)),
            )
            .build())
    }

    /// The TLS of the gRPC exporter's channel, its handshake cut at
    /// `timeout` (the channel's own timeouts bound the TCP connect and
    /// the request, not the handshake between them).
    pub(crate) fn tonic(
        self,
        timeout: std::time::Duration,
    ) -> Result<tonic::transport::ClientTlsConfig, TelemetryError> {
        let mut tls = tonic::transport::ClientTlsConfig::new().timeout(timeout);
        // tonic refuses an empty system store even beside a CA file.
        if !system_roots().is_empty() {
            tls = tls.with_native_roots();
        } else if self.ca_pem.is_none() {
            return Err(no_roots());
        }
        if let Some(pem) = self.ca_pem {
            tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
        }
        if let Some(c) = self.client {
            tls = tls.identity(tonic::transport::Identity::from_pem(c.chain_pem, c.key_pem));
        }
        Ok(tls)
    }
}

fn no_roots() -> TelemetryError {
    TelemetryError::Tls(
        "no certificate to trust: the system has none (install ca-certificates) and OTEL_EXPORTER_OTLP_CERTIFICATE names no file".into(),
    )
}
