//! Rendering query results for terminals (table) and scripts (csv, json).

use datafusion::arrow::csv::WriterBuilder as CsvWriterBuilder;
use datafusion::arrow::json::{writer::JsonArray, WriterBuilder as JsonWriterBuilder};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;

use crate::error::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    /// An array of row objects; NULL stays `null`.
    Json,
}

pub fn format_batches(batches: &[RecordBatch], format: Format) -> Result<String> {
    match format {
        Format::Table => Ok(pretty_format_batches(batches)?.to_string()),
        Format::Csv => {
            let mut out = Vec::new();
            {
                let mut writer = CsvWriterBuilder::new().with_header(true).build(&mut out);
                for batch in batches {
                    writer.write(batch)?;
                }
            }
            if batches.is_empty() {
                out.clear();
            }
            Ok(String::from_utf8(out).expect("arrow writes UTF-8 CSV"))
        }
        Format::Json => {
            let mut out = Vec::new();
            {
                let mut writer = JsonWriterBuilder::new().with_explicit_nulls(true).build::<_, JsonArray>(&mut out);
                for batch in batches {
                    writer.write(batch)?;
                }
                writer.finish()?;
            }
            let text = String::from_utf8(out).expect("arrow writes UTF-8 JSON");
            // An empty result is an empty array, not an empty string.
            Ok(if text.trim().is_empty() { "[]".into() } else { text })
        }
    }
}
