//! OTLP/HTTP with protobuf bodies (the OTLP specification's "OTLP/HTTP"):
//! `POST /v1/traces` and `POST /v1/metrics`, `content-type:
//! application/x-protobuf`, answered 200 with the encoded
//! `Export*ServiceResponse`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

use super::{Rejected, Store, Tls};

const PROTOBUF: &str = "application/x-protobuf";

pub(super) async fn serve(listener: tokio::net::TcpListener, store: Arc<Store>, tls: Option<Tls>) {
    let app = Router::new()
        .fallback(export)
        // axum's default limit (2 MB) would answer a large batch 413
        // before it is recorded; a test should see every export.
        .layer(DefaultBodyLimit::max(256 << 20))
        .with_state(store);
    let _ = match tls {
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config(tls)));
            axum::serve(TlsListener { listener, acceptor }, app).await
        }
        None => axum::serve(listener, app).await,
    };
}

/// The rustls side of [`Tls`], with the ring provider as warden's.
fn server_config(tls: Tls) -> rustls::ServerConfig {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(tls.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("the server's certificate");
    let key = PrivateKeyDer::from_pem_slice(tls.key.as_bytes()).expect("the server's key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let builder = match tls.client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots
                    .add(c.expect("the CA certificate"))
                    .expect("a CA root");
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .expect("the client verifier");
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    builder
        .with_single_cert(chain, key)
        .expect("the server's certificate and key")
}

/// A listener whose connections are TLS: a handshake that fails (a
/// client that does not trust the certificate, or has none to show) drops
/// that connection and the next is taken.
struct TlsListener {
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.listener.accept().await else {
                continue;
            };
            // Bounded: a client that connects and says nothing must not
            // stop the receiver taking the next one.
            let handshake = self.acceptor.accept(tcp);
            if let Ok(Ok(tls)) =
                tokio::time::timeout(std::time::Duration::from_secs(5), handshake).await
            {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

async fn export(
    State(store): State<Arc<Store>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let reject = |status: StatusCode, reason: &str| {
        store.reject(Rejected {
            method: method.to_string(),
            path: uri.to_string(),
            content_type: content_type.clone(),
            status: status.as_u16(),
            reason: reason.to_string(),
        });
        (status, reason.to_string()).into_response()
    };
    let path = uri.path();
    if path != "/v1/traces" && path != "/v1/metrics" {
        return reject(StatusCode::NOT_FOUND, "not an OTLP export path");
    }
    if method != Method::POST {
        return reject(StatusCode::METHOD_NOT_ALLOWED, "OTLP exports are POSTs");
    }
    // The media type, without parameters; OTLP/JSON (application/json)
    // is a different encoding this receiver does not take.
    let media = content_type.split(';').next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case(PROTOBUF) {
        return reject(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "only application/x-protobuf is taken",
        );
    }
    if let Some(encoding) = headers.get(header::CONTENT_ENCODING)
        && encoding.as_bytes() != b"identity"
    {
        return reject(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "compressed bodies are not taken",
        );
    }
    let headers = header_map(&headers);
    if path == "/v1/traces" {
        match ExportTraceServiceRequest::decode(body) {
            Ok(request) => {
                store.traces(request, headers);
                protobuf(ExportTraceServiceResponse::default().encode_to_vec())
            }
            Err(e) => reject(
                StatusCode::BAD_REQUEST,
                &format!("not an ExportTraceServiceRequest: {e}"),
            ),
        }
    } else {
        match ExportMetricsServiceRequest::decode(body) {
            Ok(request) => {
                store.metrics(request, headers);
                protobuf(ExportMetricsServiceResponse::default().encode_to_vec())
            }
            Err(e) => reject(
                StatusCode::BAD_REQUEST,
                &format!("not an ExportMetricsServiceRequest: {e}"),
            ),
        }
    }
}

fn protobuf(body: Vec<u8>) -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, PROTOBUF)], body).into_response()
}

fn header_map(headers: &HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}
