//! The OTLP/HTTP exporters' client: a blocking ureq agent behind the
//! SDK's `HttpClient` interface. The exporters run on threads of their
//! own (the span export thread, the metrics reader's), where a blocking
//! call is what is wanted; each request is cut at the export timeout.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

use super::TelemetryError;
use super::TlsFiles;

/// The most of a collector's answer that is read (an export's answer is
/// a few bytes; a partial-success message a few more).
const MAX_ANSWER: u64 = 4 << 20;

#[derive(Debug)]
pub(crate) struct Client {
    agent: ureq::Agent,
}

impl Client {
    /// A client for `http://` (`tls: None`) or `https://` collectors.
    pub(crate) fn new(
        timeout: std::time::Duration,
        tls: Option<&TlsFiles>,
    ) -> Result<Self, TelemetryError> {
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            // The status is the exporter's to read (it retries on some).
            .http_status_as_error(false)
            // Through the proxy of HTTP_PROXY/HTTPS_PROXY/ALL_PROXY, but
            // not for the hosts of NO_PROXY (ureq's default, said here).
            .proxy(ureq::Proxy::try_from_env());
        if let Some(files) = tls {
            config = config.tls_config(files.load()?.ureq()?);
        }
        Ok(Self {
            agent: config.build().into(),
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let request = Request::from_parts(parts, body.to_vec());
        let answer = self.agent.run(request)?;
        let (parts, mut body) = answer.into_parts();
        let bytes = body.with_config().limit(MAX_ANSWER).read_to_vec()?;
        Ok(Response::from_parts(parts, Bytes::from(bytes)))
    }
}
