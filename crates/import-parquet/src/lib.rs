//! Parquet trajectory corpora for epistore's trajectory-dataset importer
//! (`epistore_import`'s `trajectories`, docs/importers.md §9.13).
//!
//! The public corpora (SWE-smith, nebius SWE-agent, SWE-Gym, ...) are published as
//! Parquet: one trajectory per row, tens of kilobytes to megabytes each, a few row
//! groups per file (sometimes one for the whole file). The importer asks for rows by
//! index, from several threads, mostly in order. Decoding Parquet from an arbitrary
//! row means decoding (or at least decompressing) every page before it in its row
//! group, so each request is served from a pool of open cursors, each positioned in
//! one row group: a request takes the cursor just behind its row (skipping the few
//! rows between), or opens one. Memory is a few batches per cursor, whatever the size
//! of the file or of its row groups; the work is about one decoding pass.
//!
//! Each row is handed over as compact JSON (Arrow's JSON writer: lists and structs as
//! arrays and objects, nulls left out), which is also the row's source copy.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::json::LineDelimitedWriter;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use datafusion::parquet::errors::ParquetError;
use epistore_import::{RowFiles, RowReader, Rows};

/// Rows decoded at a time by one cursor.
const BATCH_ROWS: usize = 16;
/// How far ahead of a cursor a request may be and still use it (skipping the rows
/// between) rather than open a new one.
const MAX_SKIP: usize = 4096;
/// Cursors kept open per file: enough for every reading thread and a few stragglers.
const MAX_CURSORS: usize = 8;

/// What can go wrong reading a Parquet corpus.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a readable Parquet file: {0}")]
    Parquet(#[from] ParquetError),
    #[error("cannot decode: {0}")]
    Arrow(#[from] ArrowError),
    #[error("row {row} is not in the file ({rows} rows)")]
    NoRow { row: usize, rows: usize },
    #[error("row group {group} ended before its row {row}")]
    Ended { group: usize, row: usize },
}

/// The Parquet reader the command line and the Python package hand to the importer.
pub struct Parquet;

impl Parquet {
    /// As [`epistore_import::Options::row_files`] takes it.
    pub fn reader() -> RowReader {
        RowReader(Arc::new(Parquet))
    }
}

impl RowFiles for Parquet {
    fn name(&self) -> &'static str {
        "Parquet"
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn Rows>, String> {
        ParquetRows::open(path).map(|r| Arc::new(r) as Arc<dyn Rows>).map_err(|e| e.to_string())
    }
}

/// An open Parquet file: its footer, where each row group starts, and the cursors.
pub struct ParquetRows {
    path: PathBuf,
    meta: ArrowReaderMetadata,
    /// The first row of each row group, then the number of rows.
    starts: Vec<usize>,
    pool: Mutex<Vec<Cursor>>,
}

/// A reader positioned in one row group: `next` is the file's row it yields next.
struct Cursor {
    group: usize,
    next: usize,
    reader: ParquetRecordBatchReader,
    batch: Option<RecordBatch>,
    offset: usize,
}

impl ParquetRows {
    pub fn open(path: &Path) -> Result<ParquetRows, Error> {
        let file = File::open(path)?;
        let meta = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())?;
        let mut starts = vec![0usize];
        for g in meta.metadata().row_groups() {
            let last = *starts.last().expect("starts has a first row");
            starts.push(last + usize::try_from(g.num_rows()).unwrap_or(0));
        }
        Ok(ParquetRows { path: path.to_path_buf(), meta, starts, pool: Mutex::new(Vec::new()) })
    }

    fn total(&self) -> usize {
        *self.starts.last().expect("starts has a first row")
    }

    /// Row `row` as a one-row batch.
    pub fn batch(&self, row: usize) -> Result<RecordBatch, Error> {
        if row >= self.total() {
            return Err(Error::NoRow { row: row + 1, rows: self.total() });
        }
        let group = self.starts.partition_point(|s| *s <= row) - 1;
        let mut cursor = match self.take_cursor(group, row) {
            Some(c) => c,
            None => self.open_cursor(group, row)?,
        };
        let batch = cursor.skip(row - cursor.next).and_then(|()| cursor.take());
        // A cursor at the end of its group has nothing more to give.
        if batch.is_ok() && cursor.next < self.starts[group + 1] {
            self.put_cursor(cursor);
        }
        batch
    }

    /// The pooled cursor of the group nearest behind `row`.
    fn take_cursor(&self, group: usize, row: usize) -> Option<Cursor> {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        let best = pool
            .iter()
            .enumerate()
            .filter(|(_, c)| c.group == group && c.next <= row && row - c.next <= MAX_SKIP)
            .min_by_key(|(_, c)| row - c.next)
            .map(|(i, _)| i)?;
        Some(pool.swap_remove(best))
    }

    fn put_cursor(&self, cursor: Cursor) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        pool.push(cursor);
        if pool.len() > MAX_CURSORS {
            // The cursor furthest behind is the least likely to be asked for again.
            if let Some(i) = pool.iter().enumerate().min_by_key(|(_, c)| (c.group, c.next)).map(|(i, _)| i) {
                pool.swap_remove(i);
            }
        }
    }

    /// A new cursor at `row` of `group`, the rows before it skipped by the reader.
    fn open_cursor(&self, group: usize, row: usize) -> Result<Cursor, Error> {
        let file = File::open(&self.path)?;
        let (start, end) = (self.starts[group], self.starts[group + 1]);
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.meta.clone())
            .with_row_groups(vec![group])
            .with_batch_size(BATCH_ROWS);
        if row > start {
            builder = builder.with_row_selection(RowSelection::from(vec![
                RowSelector::skip(row - start),
                RowSelector::select(end - row),
            ]));
        }
        Ok(Cursor { group, next: row, reader: builder.build()?, batch: None, offset: 0 })
    }
}

impl Cursor {
    /// Makes sure a decoded row is at hand.
    fn fill(&mut self) -> Result<&RecordBatch, Error> {
        let exhausted = self.batch.as_ref().is_none_or(|b| self.offset >= b.num_rows());
        if exhausted {
            let next = self.reader.next().transpose()?;
            self.batch = Some(next.ok_or(Error::Ended { group: self.group, row: self.next + 1 })?);
            self.offset = 0;
        }
        Ok(self.batch.as_ref().expect("filled above"))
    }

    fn skip(&mut self, mut rows: usize) -> Result<(), Error> {
        while rows > 0 {
            let left = self.fill()?.num_rows() - self.offset;
            let k = left.min(rows);
            self.offset += k;
            self.next += k;
            rows -= k;
        }
        Ok(())
    }

    fn take(&mut self) -> Result<RecordBatch, Error> {
        self.fill()?;
        let row = self.batch.as_ref().expect("filled above").slice(self.offset, 1);
        self.offset += 1;
        self.next += 1;
        Ok(row)
    }
}

impl Rows for ParquetRows {
    fn columns(&self) -> Vec<String> {
        self.meta.schema().fields().iter().map(|f| f.name().clone()).collect()
    }
    fn len(&self) -> usize {
        self.total()
    }
    fn row(&self, index: usize) -> Result<Vec<u8>, String> {
        let batch = self.batch(index).map_err(|e| e.to_string())?;
        to_json(&batch).map_err(|e| e.to_string())
    }
}

/// A one-row batch as a compact JSON object.
fn to_json(batch: &RecordBatch) -> Result<Vec<u8>, Error> {
    // (A one-row slice reports the memory of the whole batch it shares: no size hint from it.)
    let mut writer = LineDelimitedWriter::new(Vec::with_capacity(16 << 10));
    writer.write(batch)?;
    writer.finish()?;
    let mut bytes = writer.into_inner();
    while bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests;
