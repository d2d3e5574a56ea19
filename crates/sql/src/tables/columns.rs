//! A column-set builder: each call adds a field and its array together, so a table's
//! schema and its data cannot drift apart, and an empty table has the same schema as a
//! full one.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, Int64Builder, ListBuilder, StringArray, StringBuilder,
    TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::Result;

pub(crate) fn timestamp_us(text: Option<&str>) -> Option<i64> {
    text.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()).map(|t| t.timestamp_micros())
}

pub(crate) struct Columns<'a, R> {
    rows: &'a [R],
    fields: Vec<Field>,
    arrays: Vec<ArrayRef>,
}

impl<'a, R> Columns<'a, R> {
    pub fn new(rows: &'a [R]) -> Self {
        Columns { rows, fields: Vec::new(), arrays: Vec::new() }
    }

    pub fn col(&mut self, name: &str, nullable: bool, array: ArrayRef) {
        self.fields.push(Field::new(name, array.data_type().clone(), nullable));
        self.arrays.push(array);
    }

    pub fn str(&mut self, name: &str, f: impl Fn(&'a R) -> Option<&'a str>) {
        let array: StringArray = self.rows.iter().map(f).collect();
        self.col(name, true, Arc::new(array));
    }

    pub fn int(&mut self, name: &str, f: impl Fn(&'a R) -> Option<i64>) {
        let array: Int64Array = self.rows.iter().map(f).collect();
        self.col(name, true, Arc::new(array));
    }

    pub fn float(&mut self, name: &str, f: impl Fn(&'a R) -> Option<f64>) {
        let array: Float64Array = self.rows.iter().map(f).collect();
        self.col(name, true, Arc::new(array));
    }

    pub fn bool(&mut self, name: &str, f: impl Fn(&'a R) -> Option<bool>) {
        let array: BooleanArray = self.rows.iter().map(f).collect();
        self.col(name, true, Arc::new(array));
    }

    pub fn time(&mut self, name: &str, f: impl Fn(&'a R) -> Option<&'a str>) {
        let array: TimestampMicrosecondArray = self.rows.iter().map(|r| timestamp_us(f(r))).collect();
        self.col(name, true, Arc::new(array.with_timezone("UTC")));
    }

    /// A list of strings; `None` is a NULL list (absent), `Some(empty)` an empty one.
    pub fn str_list(&mut self, name: &str, f: impl Fn(&'a R) -> Option<&'a [String]>) {
        let mut builder = ListBuilder::new(StringBuilder::new());
        for row in self.rows {
            match f(row) {
                Some(items) => {
                    for item in items {
                        builder.values().append_value(item);
                    }
                    builder.append(true);
                }
                None => builder.append(false),
            }
        }
        self.col(name, true, Arc::new(builder.finish()));
    }

    pub fn int_list(&mut self, name: &str, f: impl Fn(&'a R) -> &'a [u64]) {
        let mut builder = ListBuilder::new(Int64Builder::new());
        for row in self.rows {
            for item in f(row) {
                builder.values().append_value(*item as i64);
            }
            builder.append(true);
        }
        self.col(name, true, Arc::new(builder.finish()));
    }

    pub fn finish(self) -> Result<RecordBatch> {
        Ok(RecordBatch::try_new(Arc::new(Schema::new(self.fields)), self.arrays)?)
    }
}
