//! `+`, `-` and `*` on integers that fail on overflow instead of wrapping around.
//!
//! DataFusion plans integer arithmetic to a `BinaryExpr` that wraps (`add_wrapping`),
//! so `tokens_in * 2` past `i64::MAX` comes back negative, and `a - b` on unsigned
//! columns comes back near `u64::MAX`. `BinaryExpr` has a checked mode
//! (`fail_on_overflow`), but no configuration option of the planner sets it, and a
//! physical plan cannot be rewritten generically (there is no way to map the
//! expressions of an arbitrary `ExecutionPlan`). So the rewrite happens on the logical
//! plan: an analyzer rule, run after type coercion, replaces every `+`, `-`, `*` whose
//! operands have one integer type with a call to `checked_add`, `checked_subtract` or
//! `checked_multiply`, which run arrow's checked kernels. Output names are kept (the
//! column of `tokens_in * 2` is still called that). Other types (floats, decimals,
//! dates, intervals) are left to the built-in operators.
//!
//! As with [`crate::checked_sum`], only sessions this is installed on check, and only
//! plans they make; a plan sent to another process (Ballista) is planned there.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Datum};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{exec_datafusion_err, DFSchema, DataFusionError, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::analyzer::AnalyzerRule;
use datafusion::optimizer::utils::NamePreserver;
use datafusion::prelude::SessionContext;

/// The words every overflow error starts with.
pub(crate) const OVERFLOW: &str = "integer arithmetic overflowed";

/// Installs the rewrite on a session (before any view is planned, as for `sum`).
pub(crate) fn install(ctx: &SessionContext) {
    ctx.add_analyzer_rule(Arc::new(CheckedArithmetic));
}

/// The operators checked, each with the function it becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Add,
    Subtract,
    Multiply,
}

impl Op {
    fn of(operator: Operator) -> Option<Op> {
        match operator {
            Operator::Plus => Some(Op::Add),
            Operator::Minus => Some(Op::Subtract),
            Operator::Multiply => Some(Op::Multiply),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Op::Add => "checked_add",
            Op::Subtract => "checked_subtract",
            Op::Multiply => "checked_multiply",
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Subtract => "-",
            Op::Multiply => "*",
        }
    }

    fn apply(self, left: &dyn Datum, right: &dyn Datum) -> std::result::Result<ArrayRef, ArrowError> {
        match self {
            Op::Add => numeric::add(left, right),
            Op::Subtract => numeric::sub(left, right),
            Op::Multiply => numeric::mul(left, right),
        }
    }

    fn udf(self) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::from(Checked { op: self, signature: Signature::any(2, Volatility::Immutable) }))
    }
}

/// The analyzer rule (see the module's comment).
#[derive(Debug)]
struct CheckedArithmetic;

impl AnalyzerRule for CheckedArithmetic {
    fn name(&self) -> &str {
        "checked_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        Ok(plan.transform_up_with_subqueries(rewrite_plan)?.data)
    }
}

/// One plan node: its expressions, typed against its inputs' columns. Top down, so each
/// operator's operands are typed while they are still operators: typing a rewritten
/// operand (a function call) walks its arguments again, which made a 400-term `+`
/// chain take 5.6 s to plan (the fuzzer found it) instead of a tenth of that.
fn rewrite_plan(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let mut schema = merge_schema(&plan.inputs());
    if let LogicalPlan::TableScan(scan) = &plan {
        schema.merge(&DFSchema::try_from_qualified_schema(scan.table_name.clone(), &scan.source.schema())?);
    }
    let names = NamePreserver::new(&plan);
    let rewritten = plan.map_expressions(|expr| {
        let name = names.save(&expr);
        expr.transform_down(|e| rewrite_expr(e, &schema)).map(|t| t.update_data(|e| name.restore(e)))
    })?;
    if rewritten.transformed {
        rewritten.map_data(|plan| plan.recompute_schema())
    } else {
        Ok(rewritten)
    }
}

fn rewrite_expr(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &expr else {
        return Ok(Transformed::no(expr));
    };
    let Some(checked) = Op::of(*op) else {
        return Ok(Transformed::no(expr));
    };
    // An operand whose type cannot be told here (it should not happen after type
    // coercion) keeps the built-in operator.
    let (Ok(l), Ok(r)) = (left.get_type(schema), right.get_type(schema)) else {
        return Ok(Transformed::no(expr));
    };
    if l != r || !l.is_integer() {
        return Ok(Transformed::no(expr));
    }
    let Expr::BinaryExpr(BinaryExpr { left, right, .. }) = expr else { unreachable!("matched above") };
    Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(checked.udf(), vec![*left, *right]))))
}

/// One checked operator as a scalar function of two operands of one integer type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Checked {
    op: Op,
    signature: Signature,
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [l, r] if l == r && l.is_integer() => Ok(l.clone()),
            _ => Err(exec_datafusion_err!("{} takes two integers of one type, not {arg_types:?}", self.op.name())),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [left, right]: [ColumnarValue; 2] =
            args.args.try_into().map_err(|_| exec_datafusion_err!("{} takes two arguments", self.op.name()))?;
        let both_scalar = matches!((&left, &right), (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_)));
        let datum = |v: ColumnarValue| -> Result<Box<dyn Datum>> {
            Ok(match v {
                ColumnarValue::Array(a) => Box::new(a),
                ColumnarValue::Scalar(s) => Box::new(s.to_scalar()?),
            })
        };
        let (l, r) = (datum(left)?, datum(right)?);
        let result = self.op.apply(l.as_ref(), r.as_ref()).map_err(|e| match e {
            ArrowError::ArithmeticOverflow(what) => DataFusionError::Execution(format!(
                "{OVERFLOW} (`{}` on {}: {what}): cast an operand to DOUBLE or DECIMAL for a wider range",
                self.op.symbol(),
                l.get().0.data_type(),
            )),
            e => DataFusionError::ArrowError(Box::new(e), None),
        })?;
        if both_scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?))
        } else {
            Ok(ColumnarValue::Array(result))
        }
    }
}
