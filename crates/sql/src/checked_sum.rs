//! `sum` that fails on integer overflow instead of wrapping around.
//!
//! DataFusion's built-in `sum` adds 64-bit integers with wrapping arithmetic
//! (`add_wrapping` in `datafusion-functions-aggregate`'s `sum.rs`, and arrow's
//! `compute::sum`, which wraps too), so `sum(tokens_in)` past `i64::MAX` silently
//! comes back negative. No configuration option changes that. This module registers
//! a `sum` of its own, under the same name, so every SQL `sum(...)` (plain, GROUP BY,
//! DISTINCT, FILTER, and `sum(...) OVER (...)`) plans to it instead:
//!
//! ```ignore
//! ctx.register_udaf(checked_sum::checked_sum()); // before any view is created
//! ```
//!
//! It is the built-in [`Sum`] with the integer accumulators swapped: the signature,
//! coercions (Int8/16/32 widen to Int64, UInt8/16/32 to UInt64), return types, state
//! fields, documentation and statistics shortcut are the built-in's, and every other
//! type (Float64, decimals, durations, intervals) still runs the built-in's
//! accumulators. For Int64 and UInt64 results the running totals use checked
//! arithmetic, and leaving the 64-bit range is an execution error that says to cast
//! to DOUBLE or DECIMAL.
//!
//! Overflow is judged on the running total as rows are added (and on each partial
//! total as partitions are merged), so a total that leaves the range and would come
//! back into it with later negative values is an error too.
//!
//! Registering it matters only in the sessions it is registered on, and only for
//! plans made after: a `CREATE VIEW` keeps the `sum` it was planned with, and a plan
//! sent to another process (Ballista) is decoded with *that* process's `sum`.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::mem::{size_of, size_of_val};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, ArrowNativeTypeOp, AsArray, BooleanArray, PrimitiveArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::sum_checked;
use datafusion::arrow::datatypes::{ArrowPrimitiveType, DataType, FieldRef, Int64Type, UInt64Type};
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::common::{exec_datafusion_err, DataFusionError, ScalarValue};
use datafusion::error::Result;
use datafusion::functions_aggregate::sum::Sum;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, Expr, GroupsAccumulator, Operator,
    ReversedUDAF, SetMonotonicity, Signature, StatisticsArgs,
};
use datafusion::physical_expr::NullState;

/// The words every overflow error starts with (tests and callers may look for them).
pub(crate) const OVERFLOW: &str = "sum overflowed the 64-bit integer range";

/// `sum` with checked 64-bit integer arithmetic, named `sum` so that registering it
/// on a session replaces the built-in for SQL.
pub fn checked_sum() -> AggregateUDF {
    AggregateUDF::from(CheckedSum { inner: Sum::new() })
}

fn overflow(data_type: &DataType) -> DataFusionError {
    exec_datafusion_err!(
        "{OVERFLOW} ({data_type}); to sum past it, cast the argument to DOUBLE (approximate) \
         or DECIMAL (exact), e.g. sum(CAST(x AS DECIMAL(38, 0)))"
    )
}

/// Whether a `sum` with this return type gets the checked accumulators here (the
/// built-in wraps for exactly these). Smaller integer arguments are coerced to these
/// before the accumulator is made, so they are covered too.
fn is_checked(return_type: &DataType) -> bool {
    matches!(return_type, DataType::Int64 | DataType::UInt64)
}

/// The built-in [`Sum`], for everything but the integer accumulators.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedSum {
    inner: Sum,
}

/// Calls `$make::<T>($dt)` with `T` the arrow type of a checked return type.
macro_rules! checked_type {
    ($dt:expr, $make:ident) => {
        match $dt {
            DataType::Int64 => $make::<Int64Type>($dt),
            DataType::UInt64 => $make::<UInt64Type>($dt),
            other => unreachable!("checked sum for {other}"),
        }
    };
}

fn plain<T: Summed>(dt: &DataType) -> Box<dyn Accumulator> {
    Box::new(SumAccumulator::<T>::new(dt.clone()))
}

fn distinct<T: Summed>(dt: &DataType) -> Box<dyn Accumulator> {
    Box::new(DistinctSumAccumulator::<T>::new(dt.clone()))
}

fn sliding<T: Summed>(dt: &DataType) -> Box<dyn Accumulator> {
    Box::new(SlidingSumAccumulator::<T>::new(dt.clone()))
}

fn sliding_distinct<T: Summed>(dt: &DataType) -> Box<dyn Accumulator> {
    Box::new(SlidingDistinctSumAccumulator::<T>::new(dt.clone()))
}

fn groups<T: Summed>(dt: &DataType) -> Box<dyn GroupsAccumulator> {
    Box::new(SumGroupsAccumulator::<T>::new(dt.clone()))
}

impl AggregateUDFImpl for CheckedSum {
    fn name(&self) -> &str {
        // The name is what SQL looks up, what output columns are called
        // (`sum(t.x)`), and what `SingleDistinctToGroupBy` recognises
        // (`func.name() != "sum"`), so it must be the built-in's.
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

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let dt = args.return_type().clone();
        if !is_checked(&dt) {
            return self.inner.accumulator(args);
        }
        Ok(if args.is_distinct { checked_type!(&dt, distinct) } else { checked_type!(&dt, plain) })
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        // The accumulators here keep the built-in's state layout (the sum, or the
        // list of distinct values), so partial states mean the same to both.
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        let dt = args.return_type().clone();
        if !is_checked(&dt) {
            return self.inner.create_groups_accumulator(args);
        }
        Ok(checked_type!(&dt, groups))
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let dt = args.return_type().clone();
        if !is_checked(&dt) {
            return self.inner.create_sliding_accumulator(args);
        }
        // (The built-in supports sliding `sum(DISTINCT)` for Int64 only; this one
        // takes UInt64 too.)
        Ok(if args.is_distinct { checked_type!(&dt, sliding_distinct) } else { checked_type!(&dt, sliding) })
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    /// Not the built-in's rewrite. Given several `sum(x + c)` over one `x`, the
    /// built-in becomes `sum(x) + c * count(x)`, and that `+` and `*` are binary
    /// operators, which wrap in DataFusion 55 (`BinaryExpr` uses `add_wrapping`
    /// unless `fail_on_overflow`, which SQL never sets): a total just under the limit
    /// plus `c * count(x)` would come back negative with no error. Summing `x + c`
    /// row by row keeps the addition in the checked accumulator.
    fn simplify_expr_op_literal(
        &self,
        _agg_function: &AggregateFunction,
        _arg: &Expr,
        _op: Operator,
        _lit: &Expr,
        _arg_is_left: bool,
    ) -> Result<Option<Expr>> {
        Ok(None)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        self.inner.reverse_expr()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    /// The built-in's: a `sum` answered from exact column statistics (the
    /// `AggregateStatistics` rule). Those sums are added and multiplied with checked
    /// arithmetic (`Precision::add`/`multiply` in `datafusion-common`'s `stats.rs`),
    /// and an overflow there leaves the statistic absent, so the query is run through
    /// the accumulators here instead of being answered with a wrapped value.
    fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
        self.inner.value_from_stats(statistics_args)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        // Still true: an unsigned sum only grows, and now fails rather than wraps.
        self.inner.set_monotonicity(data_type)
    }
}

/// The arrow types summed here (Int64, UInt64); their values hash, for DISTINCT.
trait Summed: ArrowPrimitiveType<Native: Hash + Eq> + Send + Debug {}
impl Summed for Int64Type {}
impl Summed for UInt64Type {}

/// `total + value`, or the overflow error.
fn add<T: Summed>(total: T::Native, value: T::Native, dt: &DataType) -> Result<T::Native> {
    total.add_checked(value).map_err(|_| overflow(dt))
}

/// The sum of a batch's non-null values (None when there are none), checked.
fn batch_sum<T: Summed>(values: &ArrayRef, dt: &DataType) -> Result<Option<T::Native>> {
    sum_checked(values.as_primitive::<T>()).map_err(|_| overflow(dt))
}

/// `sum(x)` without GROUP BY (and for GROUP BY of DISTINCT, through DataFusion's
/// adapter), and `sum(x) OVER` frames that start at UNBOUNDED PRECEDING.
#[derive(Debug)]
struct SumAccumulator<T: Summed> {
    /// None until a non-null value arrives: the sum of no rows is NULL.
    sum: Option<T::Native>,
    data_type: DataType,
}

impl<T: Summed> SumAccumulator<T> {
    fn new(data_type: DataType) -> Self {
        Self { sum: None, data_type }
    }
}

impl<T: Summed> Accumulator for SumAccumulator<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if let Some(x) = batch_sum::<T>(&values[0], &self.data_type)? {
            self.sum = Some(add::<T>(self.sum.unwrap_or(T::Native::ZERO), x, &self.data_type)?);
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        // The state is the partial sum (NULL for a partition without values).
        self.update_batch(states)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        ScalarValue::new_primitive::<T>(self.sum, &self.data_type)
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }
}

/// `sum(x) OVER` frames that slide (their start moves), so rows also leave the total.
#[derive(Debug)]
struct SlidingSumAccumulator<T: Summed> {
    sum: T::Native,
    /// Non-null values in the frame: none means the sum is NULL.
    count: u64,
    data_type: DataType,
}

impl<T: Summed> SlidingSumAccumulator<T> {
    fn new(data_type: DataType) -> Self {
        Self { sum: T::Native::ZERO, count: 0, data_type }
    }

    fn non_null(values: &ArrayRef) -> u64 {
        (values.len() - values.null_count()) as u64
    }
}

impl<T: Summed> Accumulator for SlidingSumAccumulator<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if let Some(x) = batch_sum::<T>(&values[0], &self.data_type)? {
            self.sum = add::<T>(self.sum, x, &self.data_type)?;
        }
        self.count += Self::non_null(&values[0]);
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        // The rows leaving were added before, but the sum of those that stay can
        // still be out of range (say MAX and 1 stay when -1 leaves): checked too.
        if let Some(x) = batch_sum::<T>(&values[0], &self.data_type)? {
            self.sum = self.sum.sub_checked(x).map_err(|_| overflow(&self.data_type))?;
        }
        self.count -= Self::non_null(&values[0]);
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        // As the built-in's: states of (sum, count).
        if let Some(x) = batch_sum::<T>(&states[0], &self.data_type)? {
            self.sum = add::<T>(self.sum, x, &self.data_type)?;
        }
        if let Some(n) = sum_checked(states[1].as_primitive::<UInt64Type>())? {
            self.count += n;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?, self.count.into()])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        ScalarValue::new_primitive::<T>((self.count != 0).then_some(self.sum), &self.data_type)
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }
}

/// The state of a DISTINCT sum, as the built-in's: one list of the distinct values.
fn distinct_state<'a, T: Summed>(
    values: impl Iterator<Item = &'a T::Native>,
    data_type: &DataType,
) -> Vec<ScalarValue> {
    let array = PrimitiveArray::<T>::from_iter_values(values.copied()).with_data_type(data_type.clone());
    vec![SingleRowListArrayBuilder::new(Arc::new(array)).build_list_scalar()]
}

/// The values in the lists of DISTINCT states, each passed to `f`.
fn for_each_in_states<T: Summed>(states: &[ArrayRef], mut f: impl FnMut(T::Native) -> Result<()>) -> Result<()> {
    for list in states[0].as_list::<i32>().iter().flatten() {
        for value in list.as_primitive::<T>().iter().flatten() {
            f(value)?;
        }
    }
    Ok(())
}

/// `sum(DISTINCT x)`: the distinct values are kept and added up when asked.
#[derive(Debug)]
struct DistinctSumAccumulator<T: Summed> {
    values: HashSet<T::Native>,
    data_type: DataType,
}

impl<T: Summed> DistinctSumAccumulator<T> {
    fn new(data_type: DataType) -> Self {
        Self { values: HashSet::new(), data_type }
    }
}

impl<T: Summed> Accumulator for DistinctSumAccumulator<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.values.extend(values[0].as_primitive::<T>().iter().flatten());
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        for_each_in_states::<T>(states, |v| {
            self.values.insert(v);
            Ok(())
        })
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(distinct_state::<T>(self.values.iter(), &self.data_type))
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut sum = None;
        for &v in &self.values {
            sum = Some(add::<T>(sum.unwrap_or(T::Native::ZERO), v, &self.data_type)?);
        }
        ScalarValue::new_primitive::<T>(sum, &self.data_type)
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.values.capacity() * size_of::<T::Native>()
    }
}

/// `sum(DISTINCT x) OVER` a sliding frame: how many times each value is in the frame,
/// and the running sum of the values that are.
#[derive(Debug)]
struct SlidingDistinctSumAccumulator<T: Summed> {
    counts: HashMap<T::Native, usize>,
    sum: T::Native,
    data_type: DataType,
}

impl<T: Summed> SlidingDistinctSumAccumulator<T> {
    fn new(data_type: DataType) -> Self {
        Self { counts: HashMap::new(), sum: T::Native::ZERO, data_type }
    }

    fn insert(&mut self, value: T::Native) -> Result<()> {
        let count = self.counts.entry(value).or_insert(0);
        if *count == 0 {
            self.sum = add::<T>(self.sum, value, &self.data_type)?;
        }
        *count += 1;
        Ok(())
    }

    fn remove(&mut self, value: T::Native) -> Result<()> {
        if let Some(count) = self.counts.get_mut(&value) {
            *count -= 1;
            if *count == 0 {
                self.counts.remove(&value);
                self.sum = self.sum.sub_checked(value).map_err(|_| overflow(&self.data_type))?;
            }
        }
        Ok(())
    }
}

impl<T: Summed> Accumulator for SlidingDistinctSumAccumulator<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        values[0].as_primitive::<T>().iter().flatten().try_for_each(|v| self.insert(v))
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        values[0].as_primitive::<T>().iter().flatten().try_for_each(|v| self.remove(v))
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        for_each_in_states::<T>(states, |v| self.insert(v))
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(distinct_state::<T>(self.counts.keys(), &self.data_type))
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        ScalarValue::new_primitive::<T>((!self.counts.is_empty()).then_some(self.sum), &self.data_type)
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.counts.capacity() * size_of::<(T::Native, usize)>()
    }
}

/// `sum(x) ... GROUP BY`: one running sum per group, as the built-in's
/// `PrimitiveGroupsAccumulator`, whose per-value function cannot fail (so it cannot be
/// reused with a checked add); [`NullState`] keeps which groups saw a value, so a
/// group of only NULLs (or only filtered-out rows) sums to NULL.
#[derive(Debug)]
struct SumGroupsAccumulator<T: Summed> {
    sums: Vec<T::Native>,
    null_state: NullState,
    data_type: DataType,
}

impl<T: Summed> SumGroupsAccumulator<T> {
    fn new(data_type: DataType) -> Self {
        Self { sums: vec![], null_state: NullState::new(), data_type }
    }
}

impl<T: Summed> GroupsAccumulator for SumGroupsAccumulator<T> {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let values = values[0].as_primitive::<T>();
        self.sums.resize(total_num_groups, T::Native::ZERO);
        // NullState calls back once per non-null, unfiltered value and the callback
        // returns nothing, so an overflow is noted and reported after the batch.
        let mut overflowed = false;
        let sums = &mut self.sums;
        self.null_state.accumulate(group_indices, values, opt_filter, total_num_groups, |group, value| {
            let sum = &mut sums[group];
            match sum.add_checked(value) {
                Ok(s) => *sum = s,
                Err(_) => overflowed = true,
            }
        });
        if overflowed {
            return Err(overflow(&self.data_type));
        }
        Ok(())
    }

    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> Result<()> {
        // Partial states are partial sums (NULL where a partial saw no value).
        self.update_batch(values, group_indices, None, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let sums = emit_to.take_needed(&mut self.sums);
        let nulls = self.null_state.build(emit_to);
        Ok(Arc::new(PrimitiveArray::<T>::new(sums.into(), nulls).with_data_type(self.data_type.clone())))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.evaluate(emit_to)?])
    }

    /// Each row as its own group (when partial aggregation is skipped for many
    /// groups): the state is the value itself, NULL where the row is filtered out.
    /// Nothing is added here, so nothing can overflow.
    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        let values = values[0].as_primitive::<T>();
        let nulls = match opt_filter {
            None => values.nulls().cloned(),
            Some(filter) => {
                // Kept: rows where the filter is true (not false, not NULL).
                let keep = match filter.nulls() {
                    Some(filter_nulls) => filter_nulls.inner() & filter.values(),
                    None => filter.values().clone(),
                };
                NullBuffer::union(values.nulls(), Some(&NullBuffer::from(keep)))
            }
        };
        let state = PrimitiveArray::<T>::new(values.values().clone(), nulls).with_data_type(self.data_type.clone());
        Ok(vec![Arc::new(state)])
    }

    fn size(&self) -> usize {
        self.sums.capacity() * size_of::<T::Native>() + self.null_state.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use datafusion::arrow::array::{Decimal128Array, Float64Array, Int32Array, Int64Array, StringArray, UInt64Array};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    const MAX: i64 = i64::MAX;
    const MIN: i64 = i64::MIN;

    /// A session of two partitions (so aggregates run in partial and final phases),
    /// with or without the checked `sum`.
    fn session(checked: bool) -> SessionContext {
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
        if checked {
            ctx.register_udaf(checked_sum());
        }
        ctx
    }

    /// Registers `name(id BIGINT, v <type of the arrays>)`, one partition per array;
    /// `id` counts rows across partitions, for window ORDER BY.
    fn register(ctx: &SessionContext, name: &str, partitions: Vec<ArrayRef>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", partitions[0].data_type().clone(), true),
        ]));
        let mut next = 0;
        let batches = partitions
            .into_iter()
            .map(|v| {
                let ids = Int64Array::from_iter_values(next..next + v.len() as i64);
                next += v.len() as i64;
                vec![RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), v]).unwrap()]
            })
            .collect();
        ctx.register_table(name, Arc::new(MemTable::try_new(schema, batches).unwrap())).unwrap();
    }

    fn i64s(values: &[Option<i64>]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    fn u64s(values: &[Option<u64>]) -> ArrayRef {
        Arc::new(UInt64Array::from(values.to_vec()))
    }

    async fn run(ctx: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>> {
        ctx.sql(sql).await?.collect().await
    }

    /// The only value of a one-row, one-column result.
    async fn scalar(ctx: &SessionContext, sql: &str) -> ScalarValue {
        let batches = run(ctx, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        let batches: Vec<_> = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
        assert_eq!((batches.len(), batches[0].num_rows(), batches[0].num_columns()), (1, 1, 1), "{sql}");
        ScalarValue::try_from_array(batches[0].column(0), 0).unwrap()
    }

    async fn assert_overflows(ctx: &SessionContext, sql: &str) {
        match run(ctx, sql).await {
            Ok(batches) => panic!("{sql} did not fail:\n{}", pretty_format_batches(&batches).unwrap()),
            Err(e) => {
                let message = e.to_string();
                assert!(message.contains(OVERFLOW), "{sql}: {message}");
                assert!(message.contains("DECIMAL"), "{sql}: {message}");
            }
        }
    }

    #[tokio::test]
    async fn replaces_the_built_in_for_sql() {
        let ctx = session(true);
        let sum = ctx.state().aggregate_functions().get("sum").cloned().unwrap();
        assert!(sum.inner().is::<CheckedSum>());
        // Upper case and quoted lower case resolve to it too.
        register(&ctx, "t", vec![i64s(&[Some(MAX)]), i64s(&[Some(1)])]);
        assert_overflows(&ctx, "SELECT SUM(v) FROM t").await;
        assert_overflows(&ctx, "SELECT \"sum\"(v) FROM t").await;
    }

    /// The problem this module exists for; should DataFusion stop wrapping, this fails
    /// and the module can go.
    #[tokio::test]
    async fn the_built_in_wraps() {
        let ctx = session(false);
        register(&ctx, "t", vec![i64s(&[Some(MAX), Some(1)])]);
        assert_eq!(scalar(&ctx, "SELECT sum(v) FROM t").await, ScalarValue::Int64(Some(MIN)));
    }

    #[tokio::test]
    async fn overflow_is_an_error() {
        let ctx = session(true);
        // Within one batch, across partitions (the final phase merging partial sums),
        // below MIN, and past u64::MAX.
        register(&ctx, "one_batch", vec![i64s(&[Some(MAX), None, Some(1)])]);
        register(&ctx, "partitions", vec![i64s(&[Some(MAX - 1)]), i64s(&[Some(1), Some(1)])]);
        register(&ctx, "negative", vec![i64s(&[Some(MIN)]), i64s(&[Some(-1)])]);
        register(&ctx, "unsigned", vec![u64s(&[Some(u64::MAX)]), u64s(&[Some(1)])]);
        for table in ["one_batch", "partitions", "negative", "unsigned"] {
            assert_overflows(&ctx, &format!("SELECT sum(v) FROM {table}")).await;
            assert_overflows(&ctx, &format!("SELECT id % 1 AS k, sum(v) FROM {table} GROUP BY k")).await;
            assert_overflows(&ctx, &format!("SELECT sum(v) OVER (ORDER BY id) FROM {table}")).await;
            let frame = "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW";
            assert_overflows(&ctx, &format!("SELECT sum(v) OVER (ORDER BY id {frame}) FROM {table}")).await;
        }
        // Within range, up to the limits.
        register(&ctx, "limits", vec![i64s(&[Some(MAX - 1)]), i64s(&[Some(1)])]);
        assert_eq!(scalar(&ctx, "SELECT sum(v) FROM limits").await, ScalarValue::Int64(Some(MAX)));
        register(&ctx, "u_limits", vec![u64s(&[Some(u64::MAX - 1)]), u64s(&[Some(1)])]);
        assert_eq!(scalar(&ctx, "SELECT sum(v) FROM u_limits").await, ScalarValue::UInt64(Some(u64::MAX)));
        // The way out the message gives.
        assert_eq!(
            scalar(&ctx, "SELECT sum(CAST(v AS DECIMAL(38, 0))) FROM partitions").await,
            ScalarValue::Decimal128(Some(1 << 63), 38, 0)
        );
        assert_eq!(
            scalar(&ctx, "SELECT sum(CAST(v AS DOUBLE)) FROM partitions").await,
            ScalarValue::Float64(Some(9223372036854775808.0))
        );
    }

    #[tokio::test]
    async fn smaller_integers_widen_as_before() {
        // Int32 values are summed as Int64 (the built-in's coercion), so this fits.
        let ctx = session(true);
        let v: ArrayRef = Arc::new(Int32Array::from(vec![i32::MAX, i32::MAX, i32::MAX]));
        register(&ctx, "t", vec![v]);
        assert_eq!(scalar(&ctx, "SELECT sum(v) FROM t").await, ScalarValue::Int64(Some(3 * i32::MAX as i64)));
    }

    #[tokio::test]
    async fn empty_input_is_null() {
        let ctx = session(true);
        register(&ctx, "t", vec![i64s(&[Some(1), None]), i64s(&[None])]);
        register(&ctx, "u", vec![u64s(&[Some(1)])]);
        for sql in [
            "SELECT sum(v) FROM t WHERE false",
            "SELECT sum(v) FROM t WHERE v IS NULL",
            "SELECT sum(DISTINCT v) FROM t WHERE v IS NULL",
            "SELECT sum(v) FILTER (WHERE v > 5) FROM t",
        ] {
            assert_eq!(scalar(&ctx, sql).await, ScalarValue::Int64(None), "{sql}");
        }
        assert_eq!(scalar(&ctx, "SELECT sum(v) FROM u WHERE false").await, ScalarValue::UInt64(None));
    }

    #[tokio::test]
    async fn group_by() {
        let ctx = session(true);
        // By id % 3: {0: 1, 10, -5}, {1: 2, 3}, {2: NULL, NULL}, across two partitions.
        register(&ctx, "t", vec![i64s(&[Some(1), Some(2), None, Some(10)]), i64s(&[Some(3), None, Some(-5)])]);
        let batches = run(&ctx, "SELECT id % 3 AS k, sum(v) AS s FROM t GROUP BY k ORDER BY k").await.unwrap();
        let expected = "\
+---+---+
| k | s |
+---+---+
| 0 | 6 |
| 1 | 5 |
| 2 |   |
+---+---+";
        assert_eq!(pretty_format_batches(&batches).unwrap().to_string(), expected);

        // Group 0 is MAX + 1 (group 1 is fine): within one batch, and when the final
        // phase merges two partitions' partial sums.
        register(&ctx, "one_batch", vec![i64s(&[Some(MAX), Some(5), Some(1)])]);
        register(&ctx, "partitions", vec![i64s(&[Some(MAX), Some(5)]), i64s(&[Some(1), Some(6)])]);
        for table in ["one_batch", "partitions"] {
            assert_overflows(&ctx, &format!("SELECT id % 2 AS k, sum(v) FROM {table} GROUP BY k")).await;
        }
        // (The built-in answers MIN for that group.)
        let builtin = session(false);
        register(&builtin, "partitions", vec![i64s(&[Some(MAX), Some(5)]), i64s(&[Some(1), Some(6)])]);
        let wrapped =
            run(&builtin, "SELECT id % 2 AS k, sum(v) AS s FROM partitions GROUP BY k ORDER BY k").await.unwrap();
        assert_eq!(wrapped[0].column(1).as_primitive::<Int64Type>().value(0), MIN);
    }

    #[tokio::test]
    async fn distinct() {
        let ctx = session(true);
        // MAX twice is MAX once: fine; MAX and 1 is not.
        register(&ctx, "t", vec![i64s(&[Some(MAX), Some(MAX)]), i64s(&[Some(MAX), None])]);
        assert_eq!(scalar(&ctx, "SELECT sum(DISTINCT v) FROM t").await, ScalarValue::Int64(Some(MAX)));
        assert_overflows(&ctx, "SELECT sum(v) FROM t").await;
        register(&ctx, "o", vec![i64s(&[Some(MAX), Some(MAX)]), i64s(&[Some(1), Some(1)])]);
        assert_overflows(&ctx, "SELECT sum(DISTINCT v) FROM o").await;
        assert_overflows(&ctx, "SELECT id % 2 AS k, sum(DISTINCT v) FROM o GROUP BY k").await;
        // SingleDistinctToGroupBy (one DISTINCT argument, plus plain sums) rewrites to a
        // sum of sums: both are this one.
        assert_overflows(&ctx, "SELECT sum(DISTINCT v), sum(v) FROM t").await;
        register(&ctx, "u", vec![u64s(&[Some(u64::MAX)]), u64s(&[Some(1), Some(u64::MAX)])]);
        assert_overflows(&ctx, "SELECT sum(DISTINCT v) FROM u").await;
    }

    /// The values of the first column, in order.
    fn column(batches: &[RecordBatch]) -> Vec<Option<i64>> {
        batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().iter().collect::<Vec<_>>()).collect()
    }

    #[tokio::test]
    async fn windows() {
        let ctx = session(true);
        register(&ctx, "t", vec![i64s(&[Some(MAX), Some(-1), Some(1)]), i64s(&[Some(-MAX), None, Some(5)])]);
        // Sliding frames of two rows (rows leave the total): never out of range.
        let sliding = "SELECT sum(v) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t ORDER BY id";
        let got = column(&run(&ctx, sliding).await.unwrap());
        assert_eq!(got, [Some(MAX), Some(MAX - 1), Some(0), Some(1 - MAX), Some(-MAX), Some(5)]);
        // A running total: MAX, MAX - 1, MAX, 0, 0, 5.
        let got = column(&run(&ctx, "SELECT sum(v) OVER (ORDER BY id) FROM t ORDER BY id").await.unwrap());
        assert_eq!(got, [Some(MAX), Some(MAX - 1), Some(MAX), Some(0), Some(0), Some(5)]);

        // -1, MAX, 1: frames of three rows are fine; of two, the last is MAX + 1.
        register(&ctx, "o", vec![i64s(&[Some(-1), Some(MAX), Some(1)])]);
        let three = "SELECT sum(v) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM o ORDER BY id";
        assert_eq!(column(&run(&ctx, three).await.unwrap()), [Some(-1), Some(MAX - 1), Some(MAX)]);
        assert_overflows(&ctx, "SELECT sum(v) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM o")
            .await;
        assert_overflows(&ctx, "SELECT sum(v) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) FROM o")
            .await;

        // DISTINCT over a sliding frame: {MAX}, {MAX}, then {MAX, 1}.
        register(&ctx, "d", vec![i64s(&[Some(MAX), Some(MAX), Some(1)])]);
        let distinct = "SELECT sum(DISTINCT v) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM d";
        assert_overflows(&ctx, distinct).await;
        let got = column(&run(&ctx, &format!("{distinct} WHERE id < 2 ORDER BY id")).await.unwrap());
        assert_eq!(got, [Some(MAX), Some(MAX)]);
    }

    /// `sum(x + 1), sum(x + 2)` is not rewritten to `sum(x) + count(x) * ...`, where
    /// the outer `+` would wrap.
    #[tokio::test]
    async fn no_linear_rewrite() {
        let half = MAX / 2; // twice this is MAX - 1
        let ctx = session(true);
        register(&ctx, "t", vec![i64s(&[Some(half)]), i64s(&[Some(half)])]);
        assert_overflows(&ctx, "SELECT sum(v + 1), sum(v + 2) FROM t").await;
        let builtin = session(false);
        register(&builtin, "t", vec![i64s(&[Some(half)]), i64s(&[Some(half)])]);
        let batches = run(&builtin, "SELECT sum(v + 1), sum(v + 2) FROM t").await.unwrap();
        assert!(batches[0].column(0).as_primitive::<Int64Type>().value(0) < 0, "the built-in wraps here");
    }

    /// `sum` of a constant column can be answered from statistics (literal times row
    /// count), which are multiplied with checked arithmetic: past the range, the
    /// statistic is dropped and the accumulator runs (and fails).
    #[tokio::test]
    async fn statistics_do_not_wrap() {
        let ctx = session(true);
        register(&ctx, "t", vec![i64s(&[Some(1), Some(2)]), i64s(&[Some(3)])]);
        assert_eq!(scalar(&ctx, "SELECT sum(c) FROM (SELECT 7 AS c FROM t)").await, ScalarValue::Int64(Some(21)));
        assert_overflows(&ctx, &format!("SELECT sum(c) FROM (SELECT CAST({MAX} AS BIGINT) AS c FROM t)")).await;
    }

    /// Without overflow, every form of `sum` answers as the built-in does (values,
    /// types, nullability, column names).
    #[tokio::test]
    async fn same_answers_as_the_built_in() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("g", DataType::Utf8, false),
            Field::new("v", DataType::Int64, true),
            Field::new("s", DataType::Int32, true),
            Field::new("u", DataType::UInt64, true),
            Field::new("f", DataType::Float64, true),
            Field::new("d", DataType::Decimal128(10, 2), true),
        ]));
        let batch = |ids: Vec<i64>, g: Vec<&str>, v: Vec<Option<i64>>, s: Vec<Option<i32>>, u: Vec<Option<u64>>| {
            let f: Vec<Option<f64>> = v.iter().map(|x| x.map(|x| x as f64 / 4.0)).collect();
            let d = Decimal128Array::from(v.iter().map(|x| x.map(|x| x as i128 * 125)).collect::<Vec<_>>())
                .with_precision_and_scale(10, 2)
                .unwrap();
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(ids)),
                    Arc::new(StringArray::from(g)),
                    Arc::new(Int64Array::from(v)),
                    Arc::new(Int32Array::from(s)),
                    Arc::new(UInt64Array::from(u)),
                    Arc::new(Float64Array::from(f)),
                    Arc::new(d),
                ],
            )
            .unwrap()
        };
        let partitions = vec![
            vec![batch(
                vec![1, 2, 3, 4],
                vec!["a", "a", "b", "b"],
                vec![Some(1), None, Some(3), Some(3)],
                vec![Some(10), Some(20), None, Some(40)],
                vec![Some(1), Some(2), Some(3), Some(3)],
            )],
            vec![
                batch(
                    vec![5, 6],
                    vec!["a", "b"],
                    vec![Some(5), Some(-2)],
                    vec![Some(-7), Some(8)],
                    vec![None, Some(9)],
                ),
                batch(vec![7, 8], vec!["c", "c"], vec![None, None], vec![None, None], vec![None, None]),
            ],
        ];
        let contexts = [session(false), session(true)];
        for ctx in &contexts {
            ctx.register_table("t", Arc::new(MemTable::try_new(schema.clone(), partitions.clone()).unwrap())).unwrap();
        }
        let queries = [
            "SELECT sum(v), sum(s), sum(u), sum(f), sum(d), sum(id) FROM t",
            "SELECT g, sum(v), sum(s), sum(u), sum(f), sum(d) FROM t GROUP BY g ORDER BY g",
            "SELECT g, sum(DISTINCT v), sum(DISTINCT u), sum(DISTINCT s) FROM t GROUP BY g ORDER BY g",
            "SELECT sum(DISTINCT v), sum(DISTINCT u), sum(DISTINCT f) FROM t",
            "SELECT g, sum(DISTINCT v), sum(u), max(s) FROM t GROUP BY g ORDER BY g",
            "SELECT sum(DISTINCT v), sum(u) FROM t",
            "SELECT g, sum(v) FILTER (WHERE v > 1), sum(u) FILTER (WHERE id % 2 = 0) FROM t GROUP BY g ORDER BY g",
            "SELECT sum(v) FILTER (WHERE v > 1) FROM t",
            "SELECT sum(v + 1), sum(v + 2), sum(v) FROM t",
            "SELECT g, sum(v + 1), sum(v + 2) FROM t GROUP BY g ORDER BY g",
            "SELECT sum(v) FROM t WHERE false",
            "SELECT g, sum(v) FROM t WHERE id > 100 GROUP BY g",
            "SELECT id, sum(v) OVER (ORDER BY id), sum(u) OVER (ORDER BY id), sum(f) OVER (ORDER BY id) FROM t ORDER BY id",
            "SELECT id, sum(v) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING), \
             sum(u) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW), \
             sum(d) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t ORDER BY id",
            "SELECT id, sum(v) OVER (ORDER BY id RANGE BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t ORDER BY id",
            "SELECT id, sum(DISTINCT v) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t ORDER BY id",
            "SELECT id, sum(v) OVER (PARTITION BY g) FROM t ORDER BY id",
            "SELECT id, sum(v) OVER () FROM t ORDER BY id",
        ];
        for sql in queries {
            let mut answers = vec![];
            for ctx in &contexts {
                let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                let fields: Vec<String> = df
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| format!("{} {} {}", f.name(), f.data_type(), f.is_nullable()))
                    .collect();
                let batches = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                answers.push((fields, pretty_format_batches(&batches).unwrap().to_string()));
            }
            assert_eq!(answers[0], answers[1], "{sql}");
        }
    }

    /// The group accumulator on its own: nulls, filters, partial emission, the state
    /// of skipped partial aggregation, and overflow in update and merge.
    #[test]
    fn groups_accumulator() -> Result<()> {
        let mut acc = SumGroupsAccumulator::<Int64Type>::new(DataType::Int64);
        let values = i64s(&[Some(1), None, Some(2), Some(4), Some(8)]);
        let filter = BooleanArray::from(vec![Some(true), Some(true), Some(true), None, Some(false)]);
        acc.update_batch(std::slice::from_ref(&values), &[0, 1, 0, 2, 3], Some(&filter), 4)?;
        // Group 0: 1 + 2; group 1: only a NULL; 2: filtered (NULL filter); 3: filtered.
        let first = acc.evaluate(EmitTo::First(2))?;
        assert_eq!(first.as_primitive::<Int64Type>().iter().collect::<Vec<_>>(), [Some(3), None]);
        // What was groups 2 and 3 is now 0 and 1.
        acc.update_batch(&[i64s(&[Some(5)])], &[1], None, 2)?;
        let rest = acc.evaluate(EmitTo::All)?;
        assert_eq!(rest.as_primitive::<Int64Type>().iter().collect::<Vec<_>>(), [None, Some(5)]);

        let state = acc.convert_to_state(&[values], Some(&filter))?;
        assert_eq!(
            state[0].as_primitive::<Int64Type>().iter().collect::<Vec<_>>(),
            [Some(1), None, Some(2), None, None]
        );

        let mut acc = SumGroupsAccumulator::<Int64Type>::new(DataType::Int64);
        acc.update_batch(&[i64s(&[Some(MAX), Some(1)])], &[0, 1], None, 2)?;
        let err = acc.update_batch(&[i64s(&[Some(1)])], &[0], None, 2).unwrap_err();
        assert!(err.to_string().contains(OVERFLOW), "{err}");
        let err = acc.merge_batch(&[i64s(&[Some(1), Some(MAX)])], &[0, 1], 2).unwrap_err();
        assert!(err.to_string().contains(OVERFLOW), "{err}");
        Ok(())
    }

    #[test]
    fn sliding_accumulators_retract() -> Result<()> {
        let mut acc = SlidingSumAccumulator::<UInt64Type>::new(DataType::UInt64);
        acc.update_batch(&[u64s(&[Some(5), Some(u64::MAX - 5), None])])?;
        assert_eq!(acc.evaluate()?, ScalarValue::UInt64(Some(u64::MAX)));
        let err = acc.update_batch(&[u64s(&[Some(1)])]).unwrap_err();
        assert!(err.to_string().contains(OVERFLOW), "{err}");
        acc.retract_batch(&[u64s(&[Some(5)])])?;
        assert_eq!(acc.evaluate()?, ScalarValue::UInt64(Some(u64::MAX - 5)));
        acc.retract_batch(&[u64s(&[Some(u64::MAX - 5), None])])?;
        assert_eq!(acc.evaluate()?, ScalarValue::UInt64(None), "no values left in the frame");

        let mut acc = SlidingDistinctSumAccumulator::<Int64Type>::new(DataType::Int64);
        acc.update_batch(&[i64s(&[Some(MAX), Some(MAX), Some(-1)])])?;
        assert_eq!(acc.evaluate()?, ScalarValue::Int64(Some(MAX - 1)));
        acc.retract_batch(&[i64s(&[Some(MAX)])])?;
        assert_eq!(acc.evaluate()?, ScalarValue::Int64(Some(MAX - 1)), "one MAX is still in the frame");
        acc.update_batch(&[i64s(&[Some(1)])])?;
        assert_eq!(acc.evaluate()?, ScalarValue::Int64(Some(MAX)));
        // -1 leaving would leave MAX + 1.
        let err = acc.retract_batch(&[i64s(&[Some(-1)])]).unwrap_err();
        assert!(err.to_string().contains(OVERFLOW), "{err}");
        Ok(())
    }
}
