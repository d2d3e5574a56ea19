//! `epistore serve`: a read-only Arrow Flight SQL endpoint over a store, so notebooks
//! and BI tools get Arrow record batches of any table or view over the network (ADBC
//! Flight SQL driver, the Flight SQL JDBC/ODBC drivers, `arrow_flight` clients).
//!
//! - Statements, prepared statements (`?` or `$1` parameters, bound by DoPut, one
//!   parameter set per execution) and the catalog calls a browsing client makes first
//!   (GetSqlInfo, GetCatalogs, GetDbSchemas, GetTables with patterns, types and
//!   schemas, GetTableTypes; primary, exported and imported keys: none).
//! - Read-only: statements are planned with DDL, DML and session statements refused
//!   (no CREATE, INSERT, COPY, SET), and sessions have no URL tables or file-reading
//!   table functions, so a query cannot read the server's files. Every DoPut that would
//!   write (updates, bulk ingest) is refused.
//! - Authentication: with a token, every call must carry `authorization: Bearer TOKEN`
//!   (or first exchange `Basic any-user:TOKEN` in a Handshake for it). A server bound
//!   beyond loopback refuses to start without a token.
//! - Limits: one memory pool for the whole server (what `--memory-limit-mib` says is what
//!   all queries together may hold), at most `--max-queries` streaming at once (the
//!   others wait within their deadline), a wall-clock deadline per query covering
//!   planning and streaming, and a cap on prepared statements open at once.
//! - Snapshots: each query reads the store's latest committed snapshot; the session
//!   (tables, views) is rebuilt only when an ingest has committed since the last one.
//!
//! A statement's ticket carries its SQL, so the server keeps no per-query state between
//! GetFlightInfo and DoGet; a prepared statement's carries its handle. Statement
//! tickets are signed (keyed blake3, a key drawn at start-up): a client cannot forge
//! one, so the only SQL a DoGet runs is SQL this server planned and checked.

mod catalog;
pub mod connections;
mod prepared;
pub mod ui;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::server::FlightSqlService;
use arrow_flight::sql::server::PeekableFlightDataStream;
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult,
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetExportedKeys, CommandGetImportedKeys, CommandGetPrimaryKeys,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandPreparedStatementQuery,
    CommandPreparedStatementUpdate, CommandStatementIngest, CommandStatementQuery, CommandStatementSubstraitPlan,
    CommandStatementUpdate, DoPutPreparedStatementResult, ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{Action, IpcMessage, SchemaAsIpc};
use arrow_flight::{FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, Ticket};
use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine as _;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::ipc::writer::IpcWriteOptions;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::dataframe::DataFrame;
use datafusion::execution::memory_pool::{FairSpillPool, MemoryConsumer, MemoryPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;
use epistore_sql::Engine;
use epistore_store::Store;
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tokio::sync::{Mutex, Semaphore};
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
    /// Memory all queries together may hold (bytes): one pool for the server, so the
    /// number set is what the machine spends; operators that can spill, spill, and
    /// others fail.
    pub memory_limit: usize,
    /// Queries streaming at once; the others wait their turn (within their deadline).
    pub max_queries: usize,
    /// Wall-clock limit of one query, planning and streaming included.
    pub query_timeout: Duration,
}

/// The live service: a store and the session for its latest snapshot.
pub struct EpistoreFlightSql {
    store: Arc<Store>,
    settings: Settings,
    session: Mutex<Option<Arc<Engine>>>,
    prepared: prepared::Registry,
    /// The server-wide memory budget every query draws from.
    pool: Arc<dyn MemoryPool>,
    /// One permit per query streaming.
    queries: Arc<Semaphore>,
    tickets: TicketKey,
}

/// Signs statement tickets: `mac ++ sql`, the mac keyed blake3 over the SQL.
struct TicketKey([u8; 32]);

impl TicketKey {
    fn new() -> TicketKey {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the operating system's random source");
        TicketKey(key)
    }

    fn sign(&self, sql: &str) -> Vec<u8> {
        let mut ticket = blake3::keyed_hash(&self.0, sql.as_bytes()).as_bytes().to_vec();
        ticket.extend_from_slice(sql.as_bytes());
        ticket
    }

    /// The SQL of a ticket this server signed. The comparison is blake3's own
    /// constant-time equality.
    fn open(&self, ticket: &[u8]) -> std::result::Result<String, Status> {
        let forged =
            || Status::invalid_argument("the ticket was not issued by this server (get one from GetFlightInfo)");
        if ticket.len() < 32 {
            return Err(forged());
        }
        let (mac, sql) = ticket.split_at(32);
        let mac: [u8; 32] = mac.try_into().expect("32 bytes");
        if blake3::keyed_hash(&self.0, sql) != blake3::Hash::from_bytes(mac) {
            return Err(forged());
        }
        String::from_utf8(sql.to_vec()).map_err(|_| forged())
    }
}

impl EpistoreFlightSql {
    pub fn new(store: Store, settings: Settings) -> Self {
        EpistoreFlightSql {
            store: Arc::new(store),
            pool: Arc::new(FairSpillPool::new(settings.memory_limit)),
            queries: Arc::new(Semaphore::new(settings.max_queries.max(1))),
            settings,
            session: Mutex::new(None),
            prepared: prepared::Registry::default(),
            tickets: TicketKey::new(),
        }
    }

    /// The session for the latest committed snapshot (rebuilt after an ingest or an
    /// annotation).
    async fn engine(&self) -> std::result::Result<Arc<Engine>, Status> {
        let seq = self
            .store
            .snapshot()
            .and_then(|s| s.generation())
            .map_err(|e| Status::internal(format!("reading the store: {e}")))?;
        let mut session = self.session.lock().await;
        if let Some(engine) = session.as_ref().filter(|e| e.generation == seq) {
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

    /// Plans `sql` read-only, with `parameters` bound to its `$n` placeholders (none:
    /// left unbound, enough for its schema), in a session of its own.
    async fn dataframe(
        &self,
        sql: &str,
        parameters: Vec<ScalarValue>,
        deadline: tokio::time::Instant,
    ) -> std::result::Result<DataFrame, Status> {
        let engine = self.engine().await?;
        // The session's tables and views, the server's memory pool.
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(self.pool.clone())
            .build_arc()
            .map_err(|e| Status::internal(e.to_string()))?;
        let state = SessionStateBuilder::new_from_existing(engine.context().state()).with_runtime_env(runtime).build();
        let ctx = SessionContext::new_with_state(state);
        // Planned on a thread of its own, so that the deadline holds while it runs.
        let df = epistore_sql::statement::plan_read_only_until(&ctx, sql, deadline).await.map_err(|e| match e {
            epistore_sql::Error::Deadline(what) => Status::deadline_exceeded(what),
            e => Status::invalid_argument(e.to_string()),
        })?;
        if parameters.is_empty() {
            return Ok(df);
        }
        df.with_param_values(parameters).map_err(|e| Status::invalid_argument(e.to_string()))
    }

    /// Plans `sql` read-only; returns the stream and the schema every call announces.
    ///
    /// That is the logical plan's schema, the one a prepared statement announces before
    /// it can run: the physical plan may know more (a constant is never null) and its
    /// batches say so, which ADBC refuses as "endpoint 0 returned inconsistent schema"
    /// (`SELECT upper('x')` did). So batches are sent under the announced schema.
    async fn plan(
        &self,
        sql: &str,
        parameters: Vec<ScalarValue>,
        deadline: tokio::time::Instant,
    ) -> std::result::Result<(SendableRecordBatchStream, SchemaRef), Status> {
        let df = self.dataframe(sql, parameters, deadline).await?;
        let announced = Arc::new(df.schema().as_arrow().clone());
        let stream = tokio::time::timeout_at(deadline, df.execute_stream())
            .await
            .map_err(|_| Status::deadline_exceeded("query planning exceeded the time limit"))?
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        Ok((stream, announced))
    }

    /// The deadline of a query that starts now.
    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.settings.query_timeout
    }

    /// The result of `sql` as a DoGet stream: planning and every batch within the
    /// query deadline; past it the stream ends in an error.
    async fn stream(
        &self,
        sql: &str,
        parameters: Vec<ScalarValue>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let deadline = self.deadline();
        // Waiting for a turn counts against the query's deadline; the permit is held
        // until the stream ends or the client goes away.
        let permit = tokio::time::timeout_at(deadline, self.queries.clone().acquire_owned())
            .await
            .map_err(|_| Status::deadline_exceeded("waited past the time limit for a free query slot"))?
            .map_err(|_| Status::unavailable("the server is shutting down"))?;
        let (stream, schema) = self.plan(sql, parameters, deadline).await?;
        let announced = schema.clone();
        // A batch leaves the operators' accounting once it is produced, and the encoder
        // then holds it and its encoded copy until the client has read them: both are
        // charged to the server's pool until the encoder asks for the next batch (the
        // red team's ten 1.19 GB results took a 2 GiB server to 6.59 GB).
        let reservation = MemoryConsumer::new("query result (batch and its encoding)").register(&self.pool);
        let limit = self.settings.memory_limit;
        let state = (stream, permit, reservation, false);
        let limited = futures::stream::unfold(state, move |(mut stream, permit, reservation, done)| {
            let announced = announced.clone();
            async move {
                if done {
                    return None;
                }
                reservation.free();
                let stopped = |status: Status| Err(FlightError::Tonic(Box::new(status)));
                match tokio::time::timeout_at(deadline, stream.next()).await {
                    Ok(Some(Ok(batch))) => {
                        // Never fails where the physical plan only narrows nullability.
                        let batch = match batch.clone().with_schema(announced.clone()) {
                            Ok(relabelled) => relabelled,
                            Err(_) => batch,
                        };
                        let held = 2 * batch.get_array_memory_size();
                        match reservation.try_grow(held) {
                            Ok(()) => Some((Ok(batch), (stream, permit, reservation, false))),
                            Err(_) => {
                                drop(batch);
                                Some((stopped(result_too_big(held, limit)), (stream, permit, reservation, true)))
                            }
                        }
                    }
                    Ok(Some(Err(e))) => {
                        Some((Err(FlightError::ExternalError(Box::new(e))), (stream, permit, reservation, true)))
                    }
                    Ok(None) => None,
                    Err(_) => Some((
                        stopped(Status::deadline_exceeded("query exceeded the time limit")),
                        (stream, permit, reservation, true),
                    )),
                }
            }
        });
        let encoded = FlightDataEncoderBuilder::new().with_schema(schema).build(limited).map_err(Status::from);
        Ok(Response::new(Box::pin(encoded)))
    }

    /// The session's tables and views, as the catalog calls list them.
    async fn listed(&self) -> std::result::Result<Vec<catalog::Listed>, Status> {
        let engine = self.engine().await?;
        catalog::tables(engine.context()).await.map_err(|e| Status::internal(e.to_string()))
    }
}

type DoGetStream = <EpistoreFlightSql as FlightService>::DoGetStream;

/// The refusal of a result batch the pool cannot hold beside the running queries.
fn result_too_big(held: usize, limit: usize) -> Status {
    let mib = |bytes: usize| bytes.div_ceil(1 << 20);
    Status::resource_exhausted(format!(
        "a result batch needing {} MiB with its encoding does not fit in the server's memory limit \
         ({} MiB, shared by the queries running now): select fewer rows or smaller columns, or \
         start the server with a larger --memory-limit-mib",
        mib(held),
        mib(limit)
    ))
}

/// The FlightInfo of a catalog call: its schema, and a ticket that is the command
/// itself (the answer is computed at DoGet).
fn metadata_info(
    command: impl ProstMessageExt,
    schema: &Schema,
    descriptor: FlightDescriptor,
) -> std::result::Result<Response<FlightInfo>, Status> {
    let ticket = Ticket::new(command.as_any().encode_to_vec());
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(e.to_string()))?
        .with_endpoint(FlightEndpoint::new().with_ticket(ticket))
        .with_descriptor(descriptor);
    Ok(Response::new(info))
}

/// One batch as a DoGet stream.
fn one_batch(batch: std::result::Result<RecordBatch, FlightError>) -> Response<DoGetStream> {
    let schema = batch.as_ref().map(|b| b.schema()).ok();
    let mut builder = FlightDataEncoderBuilder::new();
    if let Some(schema) = schema {
        builder = builder.with_schema(schema);
    }
    Response::new(Box::pin(builder.build(futures::stream::once(async { batch })).map_err(Status::from)))
}

/// A schema as the IPC message Flight SQL carries in prepared-statement results.
fn schema_bytes(schema: &Schema) -> std::result::Result<prost::bytes::Bytes, Status> {
    let IpcMessage(bytes) = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e: datafusion::arrow::error::ArrowError| Status::internal(e.to_string()))?;
    Ok(bytes)
}

/// The parameters of a planned statement, `$1`, `$2`, ... in order, typed where the
/// planner could infer a type (otherwise Null: any value is accepted).
fn parameter_schema(df: &DataFrame) -> std::result::Result<SchemaRef, Status> {
    let types = df.logical_plan().get_parameter_types().map_err(|e| Status::invalid_argument(e.to_string()))?;
    let mut names: Vec<(usize, String, Option<DataType>)> = types
        .into_iter()
        .map(|(name, ty)| (name.trim_start_matches('$').parse().unwrap_or(usize::MAX), name, ty))
        .collect();
    names.sort();
    Ok(Arc::new(Schema::new(
        names.into_iter().map(|(_, name, ty)| Field::new(name, ty.unwrap_or(DataType::Null), true)).collect::<Vec<_>>(),
    )))
}

/// What every call that would write hears.
fn read_only(what: &str) -> Status {
    Status::permission_denied(format!("{what} refused: this server is read-only (epistore serve answers queries only)"))
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
        let (stream, schema) = self.plan(&query.query, vec![], self.deadline()).await?;
        drop(stream);
        let ticket = TicketStatementQuery { statement_handle: self.tickets.sign(&query.query).into() };
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
        let sql = self.tickets.open(&ticket.statement_handle)?;
        self.stream(&sql, vec![]).await
    }

    // --- prepared statements ---

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<Action>,
    ) -> std::result::Result<ActionCreatePreparedStatementResult, Status> {
        self.check_token(&request)?;
        let df = self.dataframe(&query.query, vec![], self.deadline()).await?;
        let dataset_schema = schema_bytes(df.schema().as_arrow())?;
        let parameter_schema = schema_bytes(parameter_schema(&df)?.as_ref())?;
        let handle = self.prepared.create(query.query).await?;
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into(),
            dataset_schema,
            parameter_schema,
        })
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<DoPutPreparedStatementResult, Status> {
        self.check_token(&request)?;
        let stream = FlightRecordBatchStream::new_from_flight_data(request.into_inner().map_err(FlightError::from));
        let batches: Vec<RecordBatch> =
            stream.try_collect().await.map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.prepared.bind(&query.prepared_statement_handle, &batches).await?;
        Ok(DoPutPreparedStatementResult { prepared_statement_handle: Some(query.prepared_statement_handle) })
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        let prepared = self.prepared.get(&query.prepared_statement_handle).await?;
        let df = self.dataframe(&prepared.sql, prepared.parameters, self.deadline()).await?;
        let schema = df.schema().as_arrow().clone();
        let ticket = Ticket::new(query.as_any().encode_to_vec());
        let info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(|e| Status::internal(e.to_string()))?
            .with_endpoint(FlightEndpoint::new().with_ticket(ticket))
            .with_descriptor(request.into_inner())
            .with_ordered(true);
        Ok(Response::new(info))
    }

    async fn do_get_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        let prepared = self.prepared.get(&query.prepared_statement_handle).await?;
        self.stream(&prepared.sql, prepared.parameters).await
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        request: Request<Action>,
    ) -> std::result::Result<(), Status> {
        self.check_token(&request)?;
        self.prepared.close(&query.prepared_statement_handle).await;
        Ok(())
    }

    // --- the catalog ---

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        let schema = query.clone().into_builder(&catalog::SQL_INFO).schema();
        metadata_info(query, &schema, request.into_inner())
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        Ok(one_batch(query.into_builder(&catalog::SQL_INFO).build()))
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        let schema = query.into_builder().schema();
        metadata_info(query, &schema, request.into_inner())
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        let engine = self.engine().await?;
        let mut builder = query.into_builder();
        let mut names: Vec<String> = catalog::schemas(engine.context()).into_iter().map(|(c, _)| c).collect();
        names.dedup();
        for name in names {
            builder.append(name);
        }
        Ok(one_batch(builder.build()))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        let schema = query.clone().into_builder().schema();
        metadata_info(query, &schema, request.into_inner())
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        let engine = self.engine().await?;
        let mut builder = query.into_builder();
        for (catalog_name, schema_name) in catalog::schemas(engine.context()) {
            builder.append(catalog_name, schema_name);
        }
        Ok(one_batch(builder.build()))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        let schema = query.clone().into_builder().schema();
        metadata_info(query, &schema, request.into_inner())
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        let mut builder = query.into_builder();
        for t in self.listed().await? {
            builder.append(&t.catalog, &t.schema, &t.table, t.kind, &t.arrow_schema).map_err(Status::from)?;
        }
        Ok(one_batch(builder.build()))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        let schema = query.into_builder().schema();
        metadata_info(query, &schema, request.into_inner())
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        let mut builder = query.into_builder();
        for kind in catalog::TABLE_TYPES {
            builder.append(kind);
        }
        Ok(one_batch(builder.build()))
    }

    // Keys: the store's tables have none declared; each answers an empty list.

    async fn get_flight_info_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        metadata_info(query, &primary_keys_schema(), request.into_inner())
    }

    async fn do_get_primary_keys(
        &self,
        _query: CommandGetPrimaryKeys,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        Ok(one_batch(Ok(RecordBatch::new_empty(Arc::new(primary_keys_schema())))))
    }

    async fn get_flight_info_exported_keys(
        &self,
        query: CommandGetExportedKeys,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        metadata_info(query, &foreign_keys_schema(), request.into_inner())
    }

    async fn do_get_exported_keys(
        &self,
        _query: CommandGetExportedKeys,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        Ok(one_batch(Ok(RecordBatch::new_empty(Arc::new(foreign_keys_schema())))))
    }

    async fn get_flight_info_imported_keys(
        &self,
        query: CommandGetImportedKeys,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check_token(&request)?;
        metadata_info(query, &foreign_keys_schema(), request.into_inner())
    }

    async fn do_get_imported_keys(
        &self,
        _query: CommandGetImportedKeys,
        request: Request<Ticket>,
    ) -> std::result::Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.check_token(&request)?;
        Ok(one_batch(Ok(RecordBatch::new_empty(Arc::new(foreign_keys_schema())))))
    }

    // --- writes: refused ---

    async fn do_put_statement_update(
        &self,
        _query: CommandStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        Err(read_only("an update statement"))
    }

    async fn do_put_statement_ingest(
        &self,
        _query: CommandStatementIngest,
        _request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        Err(read_only("bulk ingestion"))
    }

    async fn do_put_prepared_statement_update(
        &self,
        _query: CommandPreparedStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        Err(read_only("a prepared update"))
    }

    async fn do_put_substrait_plan(
        &self,
        _query: CommandStatementSubstraitPlan,
        _request: Request<PeekableFlightDataStream>,
    ) -> std::result::Result<i64, Status> {
        Err(read_only("a Substrait plan"))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

/// Refuses an address beyond loopback without a token: what `serve` and `ui` both
/// check (the command line before it opens the store, the servers again).
pub fn check_exposure(addr: SocketAddr, token: Option<&str>) -> Result<()> {
    if token.is_none() && !addr.ip().is_loopback() {
        return Err(Error::TokenRequired(addr));
    }
    Ok(())
}

/// Binds `addr` after [`check_exposure`]; returns the listener and the address bound
/// (port 0 picks one).
pub(crate) async fn bind(addr: SocketAddr, token: Option<&str>) -> Result<(tokio::net::TcpListener, SocketAddr)> {
    check_exposure(addr, token)?;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| Error::Bind { addr, source })?;
    let local = listener.local_addr().map_err(|source| Error::Bind { addr, source })?;
    Ok((listener, local))
}

/// Serves until `shutdown` completes; `ready` gets the bound address (port 0 picks one).
pub async fn serve(
    store: Store,
    settings: Settings,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    let (listener, local) = bind(settings.addr, settings.token.as_deref()).await?;
    let service = EpistoreFlightSql::new(store, settings);
    // Build the first session now, so a broken store fails at start, not at first query.
    service.engine().await.map_err(|s| epistore_sql::Error::Usage(s.message().to_string()))?;
    ready(local);
    let incoming = connections::Acceptor::new(listener, connections::MAX_CONNECTIONS).into_stream();
    tonic::transport::Server::builder()
        // A connection that answers no keep-alive ping is closed; one with no request
        // still holds a slot, so the slots stay below the descriptor limit.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .add_service(FlightServiceServer::new(service))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    Ok(())
}

/// GetPrimaryKeys' result schema (Flight SQL).
fn primary_keys_schema() -> Schema {
    Schema::new(vec![
        Field::new("catalog_name", DataType::Utf8, true),
        Field::new("db_schema_name", DataType::Utf8, true),
        Field::new("table_name", DataType::Utf8, false),
        Field::new("column_name", DataType::Utf8, false),
        Field::new("key_name", DataType::Utf8, true),
        Field::new("key_sequence", DataType::Int32, false),
    ])
}

/// GetExportedKeys' and GetImportedKeys' result schema (Flight SQL).
fn foreign_keys_schema() -> Schema {
    Schema::new(vec![
        Field::new("pk_catalog_name", DataType::Utf8, true),
        Field::new("pk_db_schema_name", DataType::Utf8, true),
        Field::new("pk_table_name", DataType::Utf8, false),
        Field::new("pk_column_name", DataType::Utf8, false),
        Field::new("fk_catalog_name", DataType::Utf8, true),
        Field::new("fk_db_schema_name", DataType::Utf8, true),
        Field::new("fk_table_name", DataType::Utf8, false),
        Field::new("fk_column_name", DataType::Utf8, false),
        Field::new("key_sequence", DataType::Int32, false),
        Field::new("fk_key_name", DataType::Utf8, true),
        Field::new("pk_key_name", DataType::Utf8, true),
        Field::new("update_rule", DataType::UInt8, false),
        Field::new("delete_rule", DataType::UInt8, false),
    ])
}
