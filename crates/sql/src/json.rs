//! JSON in SQL: functions over the columns that hold JSON text (`messages.arguments`,
//! `manifest_extra`, `outcome_extra`, `tags`, every `extra`), so they are queried
//! without string hacks:
//!
//! ```sql
//! SELECT json_get_str(arguments, 'command') FROM messages WHERE tool = 'Bash';
//! SELECT json_get_int(manifest_extra, 'provenance', 'opaque_calls') FROM episodes;
//! ```
//!
//! The names and meanings are those of the `datafusion-functions-json` crate (which
//! this build cannot link: its `jiter` pins another pyo3 than the Python package's),
//! so queries carry over: `json_get_str`, `json_get_int`, `json_get_float`,
//! `json_get_bool`, `json_get_json` (the value as compact JSON text), `json_contains`
//! and `json_length`. After the JSON argument comes a path: object keys (text) and
//! array indexes (integers, negative from the end). Text that is not JSON, a path that
//! leads nowhere or a value of another type gives NULL, never an error.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use serde_json::Value;

/// What a function returns from the value its path leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Get {
    Str,
    Int,
    Float,
    Bool,
    Json,
    Contains,
    Length,
}

impl Get {
    const ALL: [Get; 7] = [Get::Str, Get::Int, Get::Float, Get::Bool, Get::Json, Get::Contains, Get::Length];

    fn name(self) -> &'static str {
        match self {
            Get::Str => "json_get_str",
            Get::Int => "json_get_int",
            Get::Float => "json_get_float",
            Get::Bool => "json_get_bool",
            Get::Json => "json_get_json",
            Get::Contains => "json_contains",
            Get::Length => "json_length",
        }
    }

    fn output(self) -> DataType {
        match self {
            Get::Str | Get::Json => DataType::Utf8,
            Get::Int | Get::Length => DataType::Int64,
            Get::Float => DataType::Float64,
            Get::Bool | Get::Contains => DataType::Boolean,
        }
    }
}

/// Every JSON function, for registering in a session.
pub(crate) fn functions() -> Vec<ScalarUDF> {
    Get::ALL.iter().map(|&get| ScalarUDF::new_from_impl(JsonFunction::new(get))).collect()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonFunction {
    get: Get,
    signature: Signature,
}

impl JsonFunction {
    fn new(get: Get) -> JsonFunction {
        JsonFunction { get, signature: Signature::variadic_any(Volatility::Immutable) }
    }
}

/// One argument of a path, for every row: integers are array indexes, anything else
/// is read as an object key (text), NULL leads nowhere.
enum PathArg {
    Index(Int64Array),
    Key(StringArray),
    Nowhere,
}

impl PathArg {
    fn of(array: &ArrayRef) -> DfResult<PathArg> {
        let t = array.data_type();
        Ok(if t.is_integer() {
            PathArg::Index(cast(array, &DataType::Int64)?.as_any().downcast_ref::<Int64Array>().expect("Int64").clone())
        } else if *t == DataType::Null {
            PathArg::Nowhere
        } else {
            PathArg::Key(cast(array, &DataType::Utf8)?.as_any().downcast_ref::<StringArray>().expect("Utf8").clone())
        })
    }
}

/// The value `path` leads to in row `row`, borrowing the keys from their arrays.
fn follow<'v>(mut value: &'v Value, path: &[PathArg], row: usize) -> Option<&'v Value> {
    for step in path {
        value = match (step, value) {
            (PathArg::Key(keys), Value::Object(map)) if !keys.is_null(row) => map.get(keys.value(row))?,
            (PathArg::Index(ints), Value::Array(items)) if !ints.is_null(row) => {
                let i = ints.value(row);
                let at = if i < 0 { items.len().checked_sub(i.unsigned_abs() as usize)? } else { i as usize };
                items.get(at)?
            }
            _ => return None,
        };
    }
    Some(value)
}

impl ScalarUDFImpl for JsonFunction {
    fn name(&self) -> &str {
        self.get.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        let least = if self.get == Get::Length { 1 } else { 2 };
        if args.len() < least {
            return plan_err!(
                "{}(json, path...) takes the JSON text and at least {} path step",
                self.name(),
                least - 1
            );
        }
        Ok(self.get.output())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        // Every argument as `rows` values: a JSON argument the planner folded to one
        // value (all NULL, say) applies to every row, as the path literals do.
        let arrays = args.args.iter().map(|a| a.to_array(rows)).collect::<DfResult<Vec<_>>>()?;
        let text = cast(&arrays[0], &DataType::Utf8)?;
        let text = text.as_any().downcast_ref::<StringArray>().expect("cast to Utf8");
        let path = arrays[1..].iter().map(PathArg::of).collect::<DfResult<Vec<_>>>()?;
        if text.len() != rows {
            return exec_err!("{}: {} rows of JSON for {rows} rows", self.name(), text.len());
        }
        let found = |i: usize, f: &mut dyn FnMut(Option<&Value>)| {
            if text.is_null(i) {
                return f(None);
            }
            match serde_json::from_str::<Value>(text.value(i)) {
                Ok(value) => f(follow(&value, &path, i)),
                Err(_) => f(None),
            }
        };
        let out: ArrayRef = match self.get {
            Get::Str | Get::Json => {
                let mut b = StringBuilder::with_capacity(rows, rows * 16);
                for i in 0..rows {
                    found(i, &mut |v| match (self.get, v) {
                        (Get::Str, Some(Value::String(s))) => b.append_value(s),
                        (Get::Json, Some(v)) => b.append_value(v.to_string()),
                        _ => b.append_null(),
                    });
                }
                Arc::new(b.finish())
            }
            Get::Int | Get::Length => {
                let mut out = Vec::with_capacity(rows);
                for i in 0..rows {
                    found(i, &mut |v| {
                        out.push(match (self.get, v) {
                            (Get::Int, Some(Value::Number(n))) => n.as_i64(),
                            (Get::Length, Some(Value::Array(a))) => Some(a.len() as i64),
                            (Get::Length, Some(Value::Object(m))) => Some(m.len() as i64),
                            _ => None,
                        })
                    });
                }
                Arc::new(Int64Array::from(out))
            }
            Get::Float => {
                let mut out = Vec::with_capacity(rows);
                for i in 0..rows {
                    found(i, &mut |v| out.push(v.and_then(Value::as_f64)));
                }
                Arc::new(Float64Array::from(out))
            }
            Get::Bool | Get::Contains => {
                let mut out = Vec::with_capacity(rows);
                for i in 0..rows {
                    let null_text = text.is_null(i);
                    found(i, &mut |v| {
                        out.push(match self.get {
                            Get::Bool => v.and_then(Value::as_bool),
                            _ => (!null_text).then_some(v.is_some()),
                        })
                    });
                }
                Arc::new(BooleanArray::from(out))
            }
        };
        Ok(ColumnarValue::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::SessionContext;

    use super::*;

    async fn one(sql: &str) -> String {
        let ctx = SessionContext::new();
        for f in functions() {
            ctx.register_udf(f);
        }
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
        text.lines().nth(3).unwrap().trim_matches(|c| c == '|' || c == ' ').to_string()
    }

    #[tokio::test]
    async fn paths_lead_to_typed_values_and_nowhere_is_null() {
        let doc = r#"'{"command": "pytest -x", "n": 3, "f": 1.5, "ok": true, "a": [1, {"k": "v"}], "o": {}}'"#;
        assert_eq!(one(&format!("SELECT json_get_str({doc}, 'command')")).await, "pytest -x");
        assert_eq!(one(&format!("SELECT json_get_int({doc}, 'n')")).await, "3");
        assert_eq!(one(&format!("SELECT json_get_float({doc}, 'f')")).await, "1.5");
        assert_eq!(one(&format!("SELECT json_get_bool({doc}, 'ok')")).await, "true");
        assert_eq!(one(&format!("SELECT json_get_str({doc}, 'a', 1, 'k')")).await, "v");
        assert_eq!(one(&format!("SELECT json_get_str({doc}, 'a', -1, 'k')")).await, "v");
        assert_eq!(one(&format!("SELECT json_get_json({doc}, 'a')")).await, r#"[1,{"k":"v"}]"#);
        assert_eq!(one(&format!("SELECT json_length({doc}, 'a')")).await, "2");
        assert_eq!(one(&format!("SELECT json_length({doc})")).await, "6");
        assert_eq!(one(&format!("SELECT json_contains({doc}, 'o')")).await, "true");
        assert_eq!(one(&format!("SELECT json_contains({doc}, 'missing')")).await, "false");
        // Nowhere, another type, not JSON: NULL.
        assert_eq!(one(&format!("SELECT json_get_str({doc}, 'n') IS NULL")).await, "true");
        assert_eq!(one(&format!("SELECT json_get_int({doc}, 'a', 7) IS NULL")).await, "true");
        assert_eq!(one("SELECT json_get_str('{not json', 'k') IS NULL").await, "true");
        assert_eq!(one("SELECT json_contains(NULL, 'k') IS NULL").await, "true");
    }
}
