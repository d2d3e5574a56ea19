//! `epistore serve`: a read-only Arrow Flight SQL endpoint over a store, so notebooks
//! get Arrow record batches of any table or view over the network (ADBC Flight SQL
//! driver, `arrow_flight` clients). Statement queries only: catalog calls (GetTables,
//! ...) and prepared statements answer "unimplemented" (ADBC falls back to statements).
//!
//! - Read-only: statements are planned with DDL, DML and session statements refused
//!   (no CREATE, INSERT, COPY, SET), and sessions have no URL tables or file-reading
//!   table functions, so a query cannot read the server's files.
//! - Authentication: with a token, every call must carry `authorization: Bearer TOKEN`
//!   (or first exchange `Basic any-user:TOKEN` in a Handshake for it). A server bound
//!   beyond loopback refuses to start without a token.
//! - Limits: each query runs under a memory pool of its own and a wall-clock deadline
//!   covering planning and streaming.
//! - Snapshots: each query reads the store's latest committed snapshot; the session
//!   (tables, views) is rebuilt only when an ingest has committed since the last one.
//!
//! The ticket carries the SQL itself, so the server keeps no per-query state between
//! GetFlightInfo and DoGet.

pub mod ui;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::server::FlightSqlService;
use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt, SqlInfo, TicketStatementQuery};
use arrow_flight::{FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, Ticket};
use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine as _;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::prelude::SessionContext;
use epistore_sql::Engine;
use epistore_store::Store;
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tokio::sync::Mutex;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("refusing to serve on {0} without --token: only loopback addresses may go without one")]
    TokenRequired(SocketAddr),
    #[error("binding {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("{0}")]
    Transport(#[from] tonic::transport::Error),
    #[error(transparent)]
    Sql(#[from] epistore_sql::Error),
    #[error(transparent)]
    Store(#[from] epistore_store::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Settings of a server.
#[derive(Clone, Debug)]
pub struct Settings {
    pub addr: SocketAddr,
    pub token: Option<String>,
    /// Memory one query may hold (bytes); operators that can spill, spill, and others fail.
    pub memory_limit: usize,
    /// Wall-clock limit of one query, planning and streaming included.
    pub query_timeout: Duration,
}

/// The live service: a store and the session for its latest snapshot.
pub struct EpistoreFlightSql {
    store: Arc<Store>,
    settings: Settings,
    session: Mutex<Option<Arc<Engine>>>,
}

impl EpistoreFlightSql {
    pub fn new(store: Store, settings: Settings) -> Self {
        EpistoreFlightSql { store: Arc::new(store), settings, session: Mutex::new(None) }
    }

    /// The session for the latest committed snapshot (rebuilt after an ingest).
    async fn engine(&self) -> std::result::Result<Arc<Engine>, Status> {
        let seq = self
            .store
            .snapshot()
            .and_then(|s| s.ingest_seq())
            .map_err(|e| Status::internal(format!("reading the store: {e}")))?;
        let mut session = self.session.lock().await;
        if let Some(engine) = session.as_ref().filter(|e| e.snapshot_seq == seq) {
            return Ok(engine.clone());
        }
        let engine =
            Arc::new(Engine::open(&self.store).await.map_err(|e| Status::internal(format!("opening a session: {e}")))?);
        *session = Some(engine.clone());
        Ok(engine)
    }

    fn check_token<T>(&self, request: &Request<T>) -> std::result::Result<(), Status> {
        let Some(token) = &self.settings.token else {
            return Ok(());
        };
        let header = request
            .metadata()
            .get("authorization")
            .ok_or_else(|| Status::unauthenticated("this server needs a token: send `authorization: Bearer TOKEN`"))?
            .to_str()
            .map_err(|_| Status::unauthenticated("unreadable authorization header"))?;
        match header.strip_prefix("Bearer ") {
            Some(given) if same_secret(given, token) => Ok(()),
            _ => Err(Status::unauthenticated("wrong token")),
        }
    }

    /// Plans `sql` read-only; returns the stream and its schema.
    async fn plan(&self, sql: &str) -> std::result::Result<SendableRecordBatchStream, Status> {
        let engine = self.engine().await?;
        // A memory pool of its own for this query: the session's tables and views,
        // this query's limit.
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(FairSpillPool::new(self.settings.memory_limit)))
            .build_arc()
            .map_err(|e| Status::internal(e.to_string()))?;
        let state = SessionStateBuilder::new_from_existing(engine.context().state()).with_runtime_env(runtime).build();
        let ctx = SessionContext::new_with_state(state);
        let df = epistore_sql::statement::plan_read_only(&ctx, sql)
            .await
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        df.execute_stream().await.map_err(|e| Status::invalid_argument(e.to_string()))
    }
}

/// Compares secrets in time independent of where they differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

type HandshakeStream = Pin<Box<dyn Stream<Item = std::result::Result<HandshakeResponse, Status>> + Send>>;

#[tonic::async_trait]
impl FlightSqlService for EpistoreFlightSql {
    type FlightService = EpistoreFlightSql;

    /// `Basic user:TOKEN` in, `Bearer TOKEN` out (ADBC reads it from the response
    /// header). Any user name; the password is the token.
    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> std::result::Result<Response<HandshakeStream>, Status> {
        let token = self.settings.token.clone().unwrap_or_default();
        if self.settings.token.is_some() {
            let header = request
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| Status::unauthenticated("missing authorization header"))?;
            let password = header
                .strip_prefix("Basic ")
                // ADBC (Go) sends unpadded base64, other clients padded: accept both.
                .and_then(|b64| STANDARD_NO_PAD.decode(b64.trim_end_matches('=')).ok())
                .and_then(|raw| String::from_utf8(raw).ok())
                .and_then(|creds| creds.split_once(':').map(|(_, p)| p.to_string()))
                .ok_or_else(|| Status::unauthenticated("expected Basic credentials"))?;
            if !same_secret(&password, &token) {
                return Err(Status::unauthenticated("wrong token"));
            }
        }
        let out = futures::stream::iter(vec![Ok(HandshakeResponse {
            protocol_version: 0,
            payload: token.clone().into_bytes().into(),
        })]);
        let mut response: Response<HandshakeStream> = Response::new(Box::pin(out));
        if !token.is_empty() {
            let value = MetadataValue::try_from(format!("Bearer {token}"))
                .map_err(|_| Status::internal("token is not ASCII"))?;
            response.metadata_mut().insert("authorization", value);
        }
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        // Planning checks the statement (read-only, known tables) before a ticket is
        // handed out; execution waits for DoGet.
        let stream = tokio::time::timeout(self.settings.query_timeout, self.plan(&query.query))
            .await
            .map_err(|_| Status::deadline_exceeded("query planning exceeded the time limit"))??;
        let schema = stream.schema();
        drop(stream);
        let ticket = TicketStatementQuery { statement_handle: query.query.into_bytes().into() };
        let info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(|e| Status::internal(e.to_string()))?
            .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(ticket.as_any().encode_to_vec())))
            .with_descriptor(request.into_inner())
            .with_ordered(true);
        Ok(Response::new(info))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        let sql =
            String::from_utf8(ticket.statement_handle.to_vec()).map_err(|_| Status::invalid_argument("bad ticket"))?;
        let deadline = tokio::time::Instant::now() + self.settings.query_timeout;
        let stream = tokio::time::timeout_at(deadline, self.plan(&sql))
            .await
            .map_err(|_| Status::deadline_exceeded("query planning exceeded the time limit"))??;
        let schema = stream.schema();
        // Every batch must arrive before the deadline; past it the stream ends in an error.
        let limited = futures::stream::unfold((stream, false), move |(mut stream, done)| async move {
            if done {
                return None;
            }
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(Some(Ok(batch))) => Some((Ok(batch), (stream, false))),
                Ok(Some(Err(e))) => Some((Err(FlightError::ExternalError(Box::new(e))), (stream, true))),
                Ok(None) => None,
                Err(_) => Some((
                    Err(FlightError::Tonic(Box::new(Status::deadline_exceeded("query exceeded the time limit")))),
                    (stream, true),
                )),
            }
        });
        let encoded = FlightDataEncoderBuilder::new().with_schema(schema).build(limited).map_err(Status::from);
        Ok(Response::new(Box::pin(encoded)))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

/// Serves until `shutdown` completes; `ready` gets the bound address (port 0 picks one).
pub async fn serve(
    store: Store,
    settings: Settings,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    if settings.token.is_none() && !settings.addr.ip().is_loopback() {
        return Err(Error::TokenRequired(settings.addr));
    }
    let listener = tokio::net::TcpListener::bind(settings.addr)
        .await
        .map_err(|source| Error::Bind { addr: settings.addr, source })?;
    let local = listener.local_addr().map_err(|source| Error::Bind { addr: settings.addr, source })?;
    let service = EpistoreFlightSql::new(store, settings);
    // Build the first session now, so a broken store fails at start, not at first query.
    service.engine().await.map_err(|s| epistore_sql::Error::Usage(s.message().to_string()))?;
    ready(local);
    tonic::transport::Server::builder()
        .add_service(FlightServiceServer::new(service))
        .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener), shutdown)
        .await?;
    Ok(())
}
