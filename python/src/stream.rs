//! Results cross into Python through the Arrow C stream interface (the PyCapsule
//! protocol): an [`ArrowStream`] hands out one `arrow_array_stream` capsule holding an
//! `FFI_ArrowArrayStream`, whose batches are pulled from DataFusion only when the
//! consumer asks for the next one. Nothing is copied: the consumer (pyarrow, polars,
//! DuckDB, ...) reads the buffers DataFusion produced.

use std::ffi::CStr;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchReader};
use datafusion::execution::SendableRecordBatchStream;
use epistore_sql::Engine;
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use tokio::runtime::Runtime;

use crate::ffi::{export_schema, FfiStream};
use crate::{describe, Error};

/// Capsule names the Arrow PyCapsule interface fixes.
const STREAM_CAPSULE: &CStr = c"arrow_array_stream";
const SCHEMA_CAPSULE: &CStr = c"arrow_schema";

/// The message of the first error a stream met, for the Python side to raise as
/// `epistore.Error` (the consumer only sees it through the C interface's text).
type ErrorSlot = Arc<Mutex<Option<String>>>;

/// Where a stream's batches come from.
enum Source {
    /// A running DataFusion plan, polled on the database's runtime. The engine is kept
    /// so the session outlives the plan reading from it.
    Query { stream: SendableRecordBatchStream, runtime: Arc<Runtime>, _engine: Arc<Engine> },
    /// Batches computed already (metric intervals, leaderboard entries).
    Batches(std::vec::IntoIter<RecordBatch>),
}

/// A `RecordBatchReader` over a [`Source`]; what the FFI stream calls into.
struct Reader {
    schema: SchemaRef,
    source: Option<Source>,
    error: ErrorSlot,
}

/// Runs `f` with the GIL released when this thread holds it (pyarrow releases it itself
/// while reading a stream; other consumers may not), so Python threads run while
/// DataFusion computes.
fn without_gil<T: Send, F: FnOnce() -> T + Send>(f: F) -> T {
    extern "C" {
        // In every CPython this package supports (3.9+), outside the limited API's list
        // but exported all the same.
        fn PyGILState_Check() -> std::ffi::c_int;
    }
    // SAFETY: PyGILState_Check only reads the calling thread's state.
    if unsafe { PyGILState_Check() } == 1 {
        // SAFETY: this thread holds the GIL, as just checked.
        unsafe { Python::assume_attached() }.detach(f)
    } else {
        f()
    }
}

impl Iterator for Reader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = match self.source.as_mut()? {
            Source::Query { stream, runtime, .. } => {
                let runtime = &*runtime;
                without_gil(|| runtime.block_on(stream.next())).map(|r| {
                    // Worded as the command line words it (`epistore sql` prints `error: ` and this).
                    r.map_err(|e| describe(&anyhow::Error::new(epistore_sql::Error::DataFusion(e))))
                })
            }
            Source::Batches(batches) => batches.next().map(Ok),
        };
        match item {
            None => {
                self.finish();
                None
            }
            Some(Err(message)) => {
                self.error.lock().expect("error slot").get_or_insert(message.clone());
                self.finish();
                Some(Err(ArrowError::ExternalError(message.into())))
            }
            Some(Ok(batch)) => Some(Ok(batch)),
        }
    }
}

impl Reader {
    /// Drops the plan (inside the runtime, which some of its tasks need to stop).
    fn finish(&mut self) {
        if let Some(Source::Query { stream, runtime, _engine }) = self.source.take() {
            let _guard = runtime.enter();
            drop(stream);
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.finish();
    }
}

impl RecordBatchReader for Reader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// A query result not read yet: an object of the Arrow PyCapsule interface.
///
/// `__arrow_c_stream__()` hands the result over once, as an `arrow_array_stream`
/// capsule (pyarrow: `pyarrow.RecordBatchReader.from_stream(s)`; polars, DuckDB and
/// pandas accept the object itself). Batches are computed as the consumer reads them;
/// a capsule dropped unread releases the plan.
#[pyclass(module = "epistore._native", name = "ArrowStream", frozen)]
pub struct ArrowStream {
    schema: SchemaRef,
    reader: Mutex<Option<Reader>>,
    error: ErrorSlot,
}

impl ArrowStream {
    /// A stream over a running DataFusion plan.
    pub fn query(stream: SendableRecordBatchStream, runtime: Arc<Runtime>, engine: Arc<Engine>) -> ArrowStream {
        let schema = stream.schema();
        Self::new(schema, Source::Query { stream, runtime, _engine: engine })
    }

    /// A stream over batches already computed.
    pub fn batches(schema: SchemaRef, batches: Vec<RecordBatch>) -> ArrowStream {
        Self::new(schema, Source::Batches(batches.into_iter()))
    }

    fn new(schema: SchemaRef, source: Source) -> ArrowStream {
        let error = ErrorSlot::default();
        let reader = Reader { schema: schema.clone(), source: Some(source), error: error.clone() };
        ArrowStream { schema, reader: Mutex::new(Some(reader)), error }
    }
}

#[pymethods]
impl ArrowStream {
    /// The result as an `arrow_array_stream` PyCapsule (the Arrow C stream interface).
    /// Can be called once: the stream is handed over, not copied. `requested_schema` is
    /// accepted and ignored (the result keeps the types of the store's schema).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = self.reader.lock().expect("reader lock").take().ok_or_else(|| {
            Error::new_err("this result was already read: a result stream can be consumed once (run the query again)")
        })?;
        // The capsule owns the stream: a consumer moves it out (leaving a released
        // stream behind); dropping the capsule drops whatever is left, which releases an
        // unread stream and with it the plan.
        PyCapsule::new_with_value(py, FfiStream::new(Box::new(reader)), STREAM_CAPSULE)
    }

    /// The result's schema as an `arrow_schema` PyCapsule (does not consume the stream).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, &self.schema)
    }

    /// Whether the stream has been handed to a consumer.
    #[getter]
    fn consumed(&self) -> bool {
        self.reader.lock().expect("reader lock").is_none()
    }

    /// The error the stream stopped on, if any, as `epistore sql` would print it
    /// (without `error: `).
    fn error(&self) -> Option<String> {
        self.error.lock().expect("error slot").clone()
    }

    fn __repr__(&self) -> String {
        let columns: Vec<String> = self.schema.fields().iter().map(|f| f.name().clone()).collect();
        format!("<epistore ArrowStream [{}]{}>", columns.join(", "), if self.consumed() { " (consumed)" } else { "" })
    }
}

/// A schema: an object of the Arrow PyCapsule interface (`pyarrow.schema(s)`).
#[pyclass(module = "epistore._native", name = "ArrowSchema", frozen)]
pub struct ArrowSchema {
    pub schema: SchemaRef,
}

#[pymethods]
impl ArrowSchema {
    /// The schema as an `arrow_schema` PyCapsule.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, &self.schema)
    }
}

fn schema_capsule<'py>(py: Python<'py>, schema: &SchemaRef) -> PyResult<Bound<'py, PyCapsule>> {
    let ffi = export_schema(schema).map_err(|e| Error::new_err(e.to_string()))?;
    PyCapsule::new_with_value(py, ffi, SCHEMA_CAPSULE)
}
