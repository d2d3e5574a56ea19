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
        // Floats rounded to what they support (CSV and JSON keep full precision).
        Format::Table => {
            let rounded = batches.iter().map(round_floats).collect::<Result<Vec<_>>>()?;
            Ok(printable(
                &pretty_format_batches_with_options(&rounded, &TableFormat::default().with_null("NULL"))?.to_string(),
            ))
        }
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

/// Rows one field per line (`\x` in the shell, `sql --expanded`): for rows wider than
/// the terminal. Floats as a table shows them, NULL spelled out.
pub fn format_expanded(batches: &[RecordBatch]) -> Result<String> {
    use datafusion::arrow::array::Array;
    use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};

    let options = FormatOptions::default().with_null("NULL");
    let mut out = String::new();
    let mut record = 0;
    for batch in batches {
        let batch = round_floats(batch)?;
        let schema = batch.schema();
        let width = schema.fields().iter().map(|f| f.name().chars().count()).max().unwrap_or(0);
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for row in 0..batch.num_rows() {
            record += 1;
            out.push_str(&format!("-[ RECORD {record} ]-\n"));
            for ((field, formatter), column) in schema.fields().iter().zip(&formatters).zip(batch.columns()) {
                let value = if column.is_valid(row) { formatter.value(row).to_string() } else { "NULL".into() };
                out.push_str(&format!("{:width$} | {value}\n", field.name()));
            }
        }
    }
    if record == 0 {
        out.push_str("(0 rows)\n");
    }
    Ok(printable(&out))
}

/// A float as a table shows it: four significant digits, trailing zeros dropped
/// (`0.3333`, `12.35`, `1235`, `2`), scientific past that range (`1.235e-7`). A ratio
/// from hundreds of episodes supports no more; `metrics` printed 17 digits.
pub fn display_float(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x == 0.0 { "0".into() } else { x.to_string() };
    }
    let magnitude = x.abs().log10().floor() as i32;
    if !(-4..9).contains(&magnitude) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - magnitude).max(0) as usize;
    let text = format!("{x:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Float columns as their [`display_float`] text, for a table.
fn round_floats(batch: &RecordBatch) -> Result<RecordBatch> {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, AsArray, StringArray};
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Schema};

    let is_float = |t: &DataType| matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64);
    if !batch.schema().fields().iter().any(|f| is_float(f.data_type())) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if is_float(field.data_type()) {
            let wide = cast(column, &DataType::Float64)?;
            let text: StringArray = wide.as_primitive::<Float64Type>().iter().map(|v| v.map(display_float)).collect();
            fields.push(Field::new(field.name(), DataType::Utf8, field.is_nullable()));
            columns.push(Arc::new(text));
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
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
    use super::{display_float, printable};

    #[test]
    fn floats_show_four_significant_digits_in_tables() {
        let cases = [
            (1.0 / 3.0, "0.3333"),
            (0.5, "0.5"),
            (2.0, "2"),
            (12.345_67, "12.35"),
            (1234.56, "1235"),
            (-0.062_5, "-0.0625"),
            (0.000_123_456, "0.0001235"),
            (1.234_56e-7, "1.235e-7"),
            (3.2e10, "3.200e10"),
            (0.0, "0"),
            (f64::NAN, "NaN"),
        ];
        for (x, shown) in cases {
            assert_eq!(display_float(x), shown, "{x}");
        }
    }

    #[test]
    fn control_characters_are_escaped_for_terminals() {
        assert_eq!(printable("fai\u{1b}[2Jled\r\n\u{7}ok \u{9b}"), "fai\\x1b[2Jled\\x0d\n\\x07ok \\x9b");
        assert_eq!(printable("plain\ntext"), "plain\ntext");
    }
}
