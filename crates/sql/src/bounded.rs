//! Functions that can build far more than they are given, bounded before they build.
//!
//! `repeat('x', 2000000000)` is 15 bytes of SQL and a 2 GB string; `range(0, 1e9)` an
//! 8 GB list. DataFusion builds such values in plain allocations that no memory pool
//! sees, so one statement could take a process past any limit (`serve`'s pool, the
//! machine) before anything could refuse it. Each function here is the built-in one
//! behind a check that computes, from its arguments alone, how many bytes one call
//! (one batch) would build, and refuses past [`MAX_BUILT_BYTES`], naming the function,
//! the size and the limit. The built-in does the work otherwise; names, signatures,
//! coercions and return types are its own.
//!
//! Covered: `repeat`, `lpad`, `rpad`, `replace` (exact: occurrences are counted),
//! `array_repeat`, and `range` / `generate_series` on integers. Functions whose output
//! is bounded by their inputs (`concat`, `substr`, ...) need no check; aggregates
//! (`string_agg`, `array_agg`) charge their state to the memory pool themselves.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{exec_datafusion_err, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use datafusion::prelude::SessionContext;

/// Bytes one call of a bounded function may build for one batch.
pub const MAX_BUILT_BYTES: u64 = 256 << 20;

/// Bytes one call of `range` / `generate_series` may build: lower, because DataFusion
/// folds a constant list into the plan, element by element (the SQL fuzzer's
/// `generate_series(1, 10020000)`, 80 MB, took 36 s to plan and run in its build).
/// 32 MiB is four million elements.
pub const MAX_RANGE_BYTES: u64 = 32 << 20;

/// Replaces the built-ins with their bounded versions on a session.
pub(crate) fn install(ctx: &SessionContext) {
    let functions = [
        (datafusion::functions::string::repeat(), Growth::Repeat),
        (datafusion::functions::unicode::lpad(), Growth::Pad),
        (datafusion::functions::unicode::rpad(), Growth::Pad),
        (datafusion::functions::string::replace(), Growth::Replace),
        (datafusion::functions_nested::repeat::array_repeat_udf(), Growth::ArrayRepeat),
        (datafusion::functions_nested::range::range_udf(), Growth::Range),
        (datafusion::functions_nested::range::gen_series_udf(), Growth::Range),
    ];
    for (inner, growth) in functions {
        ctx.register_udf(ScalarUDF::from(Bounded { inner, growth }));
    }
}

/// How a function's output grows with its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `repeat(text, n)`: the text's bytes times n.
    Repeat,
    /// `lpad(text, n [, fill])`, `rpad`: n characters of up to 4 bytes (the text's or
    /// the fill's).
    Pad,
    /// `replace(text, from, to)`: the text with each occurrence of `from` replaced.
    Replace,
    /// `array_repeat(element, n)`: n copies of the element.
    ArrayRepeat,
    /// `range(stop)`, `range(start, stop [, step])` on integers: 8 bytes per element.
    Range,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Bounded {
    inner: Arc<ScalarUDF>,
    growth: Growth,
}

impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let built = built_bytes(self.growth, &args.args, args.number_rows)?;
        let limit = if self.growth == Growth::Range { MAX_RANGE_BYTES } else { MAX_BUILT_BYTES };
        if built > limit {
            return Err(exec_datafusion_err!(
                "{} would build {} in one batch, more than the {} one call may build: \
                 ask for less (or for fewer rows at a time)",
                self.name(),
                mib(built),
                mib(limit)
            ));
        }
        self.inner.invoke_with_args(args)
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / f64::from(1 << 20))
}

/// What one call over `rows` rows would build, in bytes (saturating).
fn built_bytes(growth: Growth, args: &[ColumnarValue], rows: usize) -> Result<u64> {
    let arg = |i: usize| Arg::of(args.get(i));
    let mut total: u64 = 0;
    let rows = if args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) { 1 } else { rows };
    match growth {
        Growth::Repeat => {
            let (text, n) = (arg(0)?, arg(1)?);
            for row in 0..rows {
                let count = n.int(row).unwrap_or(0).max(0) as u64;
                total = total.saturating_add(text.bytes(row).saturating_mul(count));
            }
        }
        Growth::Pad => {
            let n = arg(1)?;
            for row in 0..rows {
                total = total.saturating_add((n.int(row).unwrap_or(0).max(0) as u64).saturating_mul(4));
            }
        }
        Growth::Replace => {
            let (text, from, to) = (arg(0)?, arg(1)?, arg(2)?);
            for row in 0..rows {
                let (Some(t), Some(f)) = (text.text(row), from.text(row)) else { continue };
                let to_bytes = to.bytes(row);
                // A replacement no longer than its pattern cannot grow the text: no need
                // to search it twice (here and in the built-in).
                if !f.is_empty() && to_bytes <= f.len() as u64 {
                    total = total.saturating_add(t.len() as u64);
                    continue;
                }
                // `str::replace` with an empty pattern inserts between every character.
                let hits = if f.is_empty() { t.chars().count() + 1 } else { t.matches(f).count() };
                total = total.saturating_add(t.len() as u64).saturating_add((hits as u64).saturating_mul(to_bytes));
            }
        }
        Growth::ArrayRepeat => {
            let (element, n) = (arg(0)?, arg(1)?);
            for row in 0..rows {
                let count = n.int(row).unwrap_or(0).max(0) as u64;
                total = total.saturating_add(element.bytes(row).max(8).saturating_mul(count));
            }
        }
        Growth::Range => {
            let ints: Vec<Arg> = (0..args.len()).map(arg).collect::<Result<_>>()?;
            if ints.iter().any(|a| !a.is_int()) {
                // Dates and timestamps with an interval step: not estimated here.
                return Ok(0);
            }
            for row in 0..rows {
                let values: Vec<Option<i64>> = ints.iter().map(|a| a.int(row)).collect();
                let (start, stop, step) = match values.as_slice() {
                    [stop] => (Some(0), *stop, Some(1)),
                    [start, stop] => (*start, *stop, Some(1)),
                    [start, stop, step, ..] => (*start, *stop, *step),
                    [] => continue,
                };
                let (Some(start), Some(stop), Some(step)) = (start, stop, step) else { continue };
                if step == 0 {
                    continue;
                }
                let span = (i128::from(stop) - i128::from(start)) / i128::from(step);
                let elements = u64::try_from(span.max(0) + 1).unwrap_or(u64::MAX);
                total = total.saturating_add(elements.saturating_mul(8));
            }
        }
    }
    Ok(total)
}

/// One argument, read row by row without materialising a scalar into an array.
enum Arg {
    /// An integer scalar, read once.
    Int(Option<i64>),
    Scalar(ScalarValue),
    Array(ArrayRef),
    Absent,
}

impl Arg {
    fn of(value: Option<&ColumnarValue>) -> Result<Arg> {
        Ok(match value {
            None => Arg::Absent,
            Some(ColumnarValue::Scalar(s)) if s.data_type().is_integer() => match s.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(v) => Arg::Int(v),
                _ => Arg::Int(None),
            },
            Some(ColumnarValue::Scalar(s)) => Arg::Scalar(s.clone()),
            Some(ColumnarValue::Array(a)) if a.data_type().is_integer() && a.data_type() != &DataType::Int64 => {
                Arg::Array(cast(a, &DataType::Int64)?)
            }
            Some(ColumnarValue::Array(a)) => Arg::Array(a.clone()),
        })
    }

    fn is_int(&self) -> bool {
        match self {
            Arg::Int(_) | Arg::Absent => true,
            Arg::Scalar(_) => false,
            Arg::Array(a) => a.data_type().is_integer(),
        }
    }

    fn int(&self, row: usize) -> Option<i64> {
        match self {
            Arg::Int(v) => *v,
            Arg::Array(a) if a.data_type() == &DataType::Int64 && a.is_valid(row) => {
                Some(a.as_primitive::<datafusion::arrow::datatypes::Int64Type>().value(row))
            }
            _ => None,
        }
    }

    fn text(&self, row: usize) -> Option<&str> {
        match self {
            Arg::Scalar(ScalarValue::Utf8(v) | ScalarValue::LargeUtf8(v) | ScalarValue::Utf8View(v)) => v.as_deref(),
            Arg::Array(a) if a.is_valid(row) => match a.data_type() {
                DataType::Utf8 => Some(a.as_string::<i32>().value(row)),
                DataType::LargeUtf8 => Some(a.as_string::<i64>().value(row)),
                DataType::Utf8View => Some(a.as_string_view().value(row)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The bytes of this row's value: a string's length, else its type's width.
    fn bytes(&self, row: usize) -> u64 {
        if let Some(text) = self.text(row) {
            return text.len() as u64;
        }
        let data_type = match self {
            Arg::Int(_) => DataType::Int64,
            Arg::Scalar(s) => s.data_type(),
            Arg::Array(a) => a.data_type().clone(),
            Arg::Absent => return 0,
        };
        data_type.primitive_width().map_or(16, |w| w as u64)
    }
}
