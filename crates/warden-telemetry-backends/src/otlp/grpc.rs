//! OTLP/gRPC: the `TraceService` and `MetricsService` that
//! `opentelemetry-proto` generates, served by tonic. Another service (logs,
//! say) is answered `Unimplemented` by tonic itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::metadata::{KeyAndValueRef, MetadataMap};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

use super::{Store, Tls};

pub(super) async fn serve(listener: tokio::net::TcpListener, store: Arc<Store>, tls: Option<Tls>) {
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let mut config = ServerTlsConfig::new().identity(Identity::from_pem(tls.cert, tls.key));
        if let Some(ca) = tls.client_ca {
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        server = server.tls_config(config).expect("the receiver's TLS");
    }
    let _ = server
        .add_service(TraceServiceServer::new(Service(store.clone())))
        .add_service(MetricsServiceServer::new(Service(store)))
        // As a real collector does: without it, a small answer waits for
        // the client's delayed ACK (Nagle), ~40 ms an export.
        .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true)))
        .await;
}

struct Service(Arc<Store>);

#[tonic::async_trait]
impl TraceService for Service {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let headers = metadata(request.metadata());
        self.0.traces(request.into_inner(), headers);
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Service {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let headers = metadata(request.metadata());
        self.0.metrics(request.into_inner(), headers);
        Ok(Response::new(ExportMetricsServiceResponse::default()))
    }
}

/// The ASCII metadata; binary entries (`-bin`) are left out.
fn metadata(map: &MetadataMap) -> BTreeMap<String, String> {
    map.iter()
        .filter_map(|entry| match entry {
            KeyAndValueRef::Ascii(k, v) => Some((
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_encoded_bytes()).into_owned(),
            )),
            KeyAndValueRef::Binary(..) => None,
        })
        .collect()
}
