//! A certificate authority of a test's own, made with rcgen: a CA, a
//! server certificate for 127.0.0.1 and `localhost` that it signed, and a
//! client certificate for mutual TLS, written as PEM files into a
//! temporary directory (the paths `OTEL_EXPORTER_OTLP_CERTIFICATE` and
//! its kin take).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The CA's files and what it signed; the files go with it.
pub struct TestPki {
    dir: tempfile::TempDir,
    /// The server's certificate chain and key, PEM.
    pub server_cert: String,
    pub server_key: String,
    pub ca_cert: String,
}

impl TestPki {
    pub fn new() -> Self {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.distinguished_name
            .push(DnType::CommonName, "warden test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca, ca_key);

        let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().expect("key");
            let mut p = CertificateParams::new(names).expect("params");
            p.distinguished_name.push(DnType::CommonName, "warden test");
            p.extended_key_usages = vec![usage];
            let cert = p.signed_by(&key, &issuer).expect("signed certificate");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) =
            leaf(vec!["warden".into()], ExtendedKeyUsagePurpose::ClientAuth);
        let dir = tempfile::tempdir().expect("tempdir for the test PKI");
        for (name, pem) in [
            ("ca.pem", ca_cert.pem()),
            ("client.pem", client_cert),
            ("client-key.pem", client_key),
        ] {
            std::fs::write(dir.path().join(name), pem).expect("write PEM");
        }
        Self {
            dir,
            server_cert,
            server_key,
            ca_cert: ca_cert.pem(),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The CA's certificate: what a client must trust.
    pub fn ca_file(&self) -> PathBuf {
        self.file("ca.pem")
    }

    /// A client certificate the CA signed, and its key.
    pub fn client_files(&self) -> (PathBuf, PathBuf) {
        (self.file("client.pem"), self.file("client-key.pem"))
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}
