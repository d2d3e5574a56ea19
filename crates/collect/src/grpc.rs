//! OTLP/gRPC: the protocol's three export services (tonic, from `opentelemetry-proto`),
//! for exporters that speak gRPC (Gemini CLI by default, the others when told to).
//! A request is taken exactly as one over HTTP: the same token, size limit, session
//! files and counts; gzip-compressed messages are accepted.

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use serde_json::Value;
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use crate::{Collector, Signal, Untaken};

/// The services over one collector.
#[derive(Clone)]
struct Services(Collector);

impl Services {
    /// The request's decoded message as OTLP JSON, once its token is checked.
    fn accept<T: serde::Serialize>(&self, request: &Request<T>) -> Result<Value, Status> {
        let stats = &self.0.inner.stats;
        stats.requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let authorization = request.metadata().get("authorization").and_then(|v| v.to_str().ok());
        if !self.0.token_ok(authorization) {
            stats.refused_requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(Status::unauthenticated("a missing or wrong bearer token"));
        }
        serde_json::to_value(request.get_ref()).map_err(|e| Status::internal(format!("cannot re-encode: {e}")))
    }
}

#[tonic::async_trait]
impl LogsService for Services {
    async fn export(
        &self,
        request: Request<ExportLogsServiceRequest>,
    ) -> Result<Response<ExportLogsServiceResponse>, Status> {
        let value = self.accept(&request)?;
        match self.0.take_logs(value).await {
            Ok(()) => Ok(Response::new(ExportLogsServiceResponse { partial_success: None })),
            // OTLP/gRPC: UNAVAILABLE is retryable, as 503 is over HTTP.
            Err(Untaken::Busy) => Err(Status::unavailable("the collector is committing sessions: retry shortly")),
            Err(Untaken::Failed(why)) => Err(Status::internal(why)),
        }
    }
}

#[tonic::async_trait]
impl TraceService for Services {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let value = self.accept(&request)?;
        self.0.count(Signal::Traces, &value);
        Ok(Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tonic::async_trait]
impl MetricsService for Services {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let value = self.accept(&request)?;
        self.0.count(Signal::Metrics, &value);
        Ok(Response::new(ExportMetricsServiceResponse { partial_success: None }))
    }
}

/// Serves the three services on `listener` until `stopped` completes.
pub(crate) async fn serve(
    collector: Collector,
    listener: tokio::net::TcpListener,
    stopped: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let max = collector.inner.config.max_body;
    let services = Services(collector);
    tonic::transport::Server::builder()
        .add_service(
            LogsServiceServer::new(services.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(max),
        )
        .add_service(
            TraceServiceServer::new(services.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(max),
        )
        .add_service(
            MetricsServiceServer::new(services)
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(max),
        )
        .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener), stopped)
        .await
}
