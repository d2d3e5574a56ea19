//! Rendering query results for terminals (table) and scripts (csv, json).

use datafusion::arrow::csv::WriterBuilder as CsvWriterBuilder;
use datafusion::arrow::json::{writer::JsonArray, WriterBuilder as JsonWriterBuilder};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::FormatOptions as TableFormat;
use datafusion::arrow::util::pretty::pretty_format_batches_with_options;

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
        // NULL is spelled out: a ratio with no denominator must not read as empty or 0.
        Format::Table => Ok(printable(
            &pretty_format_batches_with_options(batches, &TableFormat::default().with_null("NULL"))?.to_string(),
        )),
        Format::Csv => {
            let mut out = Vec::new();
            {
                let mut writer = CsvWriterBuilder::new().with_header(true).build(&mut out);
                for batch in batches {
                    writer.write(&flatten_nested(batch)?)?;
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

/// Text for a terminal: control characters other than newlines (an escape sequence in
/// a label could move the cursor, retitle the window or hide what follows) are shown as
/// `\x1b`-style escapes. Table output only: CSV and JSON carry the data as it is.
pub fn printable(text: &str) -> String {
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return text.to_string();
    }
    text.chars()
        .map(|c| match c {
            '\n' => "\n".to_string(),
            c if c.is_control() && (c as u32) < 0x100 => format!("\\x{:02x}", c as u32),
            c if c.is_control() => format!("\\u{{{:x}}}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

/// CSV has no lists or structs: nested columns become their display text
/// (`[src/a.js, src/b.js]`); NULL stays an empty field.
fn flatten_nested(batch: &RecordBatch) -> Result<RecordBatch> {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};

    if !batch.schema().fields().iter().any(|f| f.data_type().is_nested()) {
        return Ok(batch.clone());
    }
    let options = FormatOptions::default();
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if field.data_type().is_nested() {
            let formatter = ArrayFormatter::try_new(column.as_ref(), &options)?;
            let text: StringArray =
                (0..column.len()).map(|i| column.is_valid(i).then(|| formatter.value(i).to_string())).collect();
            fields.push(Field::new(field.name(), DataType::Utf8, true));
            columns.push(Arc::new(text));
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped_for_terminals() {
        assert_eq!(printable("fai\u{1b}[2Jled\r\n\u{7}ok \u{9b}"), "fai\\x1b[2Jled\\x0d\n\\x07ok \\x9b");
        assert_eq!(printable("plain\ntext"), "plain\ntext");
    }
}
