//! Prepared statements: a statement with `?` or `$1` parameters, planned once, then
//! executed with values a client binds (DoPut of one row). Held by the server under an
//! opaque random handle until the client closes it; the number open at once is capped,
//! so clients that never close cannot grow the server without bound.

use std::collections::HashMap;

use datafusion::arrow::array::RecordBatch;
use datafusion::scalar::ScalarValue;
use tokio::sync::Mutex;
use tonic::Status;

/// Prepared statements open at once, over all clients.
pub const MAX_OPEN: usize = 1024;
/// Bytes of SQL one prepared statement may hold.
pub const MAX_SQL_BYTES: usize = 1 << 20;

#[derive(Clone)]
pub struct Prepared {
    pub sql: String,
    /// The values bound last (none until a client binds).
    pub parameters: Vec<ScalarValue>,
}

#[derive(Default)]
pub struct Registry {
    open: Mutex<HashMap<Vec<u8>, Prepared>>,
}

impl Registry {
    /// Keeps `sql` under a new handle.
    pub async fn create(&self, sql: String) -> Result<Vec<u8>, Status> {
        if sql.len() > MAX_SQL_BYTES {
            return Err(Status::invalid_argument(format!(
                "a prepared statement may hold {MAX_SQL_BYTES} bytes of SQL"
            )));
        }
        let mut open = self.open.lock().await;
        if open.len() >= MAX_OPEN {
            return Err(Status::resource_exhausted(format!(
                "{MAX_OPEN} prepared statements are open: close some (ClosePreparedStatement)"
            )));
        }
        let handle = new_handle();
        open.insert(handle.clone(), Prepared { sql, parameters: vec![] });
        Ok(handle)
    }

    pub async fn get(&self, handle: &[u8]) -> Result<Prepared, Status> {
        self.open.lock().await.get(handle).cloned().ok_or_else(unknown)
    }

    /// Binds the values of one row of `batch` (a row per parameter set; one set only).
    pub async fn bind(&self, handle: &[u8], batches: &[RecordBatch]) -> Result<(), Status> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows > 1 {
            return Err(Status::invalid_argument(format!(
                "{rows} parameter rows bound: this server executes one parameter set at a time"
            )));
        }
        let parameters = match batches.iter().find(|b| b.num_rows() == 1) {
            Some(batch) => batch
                .columns()
                .iter()
                .map(|column| ScalarValue::try_from_array(column, 0))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Status::invalid_argument(format!("reading the bound parameters: {e}")))?,
            None => vec![],
        };
        let mut open = self.open.lock().await;
        open.get_mut(handle).ok_or_else(unknown)?.parameters = parameters;
        Ok(())
    }

    pub async fn close(&self, handle: &[u8]) {
        self.open.lock().await.remove(handle);
    }
}

fn unknown() -> Status {
    Status::not_found("no such prepared statement (closed, or from another server)")
}

/// 16 random bytes: a handle a client cannot guess.
fn new_handle() -> Vec<u8> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    bytes.to_vec()
}
