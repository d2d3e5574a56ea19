//! `cluster_ci(numerator, denominator, cluster [, replicates, seed])`: the task-cluster
//! percentile bootstrap of a pooled ratio as a SQL aggregate, so an analyst gets an
//! interval for any ratio they write themselves:
//!
//! ```sql
//! SELECT model, cluster_ci(avs, episodes, "cluster") AS avs_rate FROM episode_facts GROUP BY model
//! ```
//!
//! It returns a struct {estimate, lo, hi, replicates_used, replicates_dropped, clusters,
//! seed}; `cluster_ci(...)['lo']` reads one field. Draws depend only on the seed and the
//! clusters (by name), so it agrees with `epistore metrics --ci` on the same rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Float64Array, Int64Array, ListArray, StringArray, StructArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::{exec_err, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, Signature, TypeSignature, Volatility};
use epistore_stats::{cluster_bootstrap, Bootstrap};

#[derive(Debug, PartialEq, Eq, Hash)]
struct ClusterCi {
    signature: Signature,
}

pub(crate) fn udaf() -> AggregateUDF {
    let three = vec![DataType::Float64, DataType::Float64, DataType::Utf8];
    let mut five = three.clone();
    five.extend([DataType::Int64, DataType::Int64]);
    AggregateUDF::from(ClusterCi {
        signature: Signature::one_of(
            vec![TypeSignature::Exact(three), TypeSignature::Exact(five)],
            Volatility::Immutable,
        ),
    })
}

fn result_fields() -> Fields {
    Fields::from(vec![
        Field::new("estimate", DataType::Float64, true),
        Field::new("lo", DataType::Float64, true),
        Field::new("hi", DataType::Float64, true),
        Field::new("replicates_used", DataType::Int64, false),
        Field::new("replicates_dropped", DataType::Int64, false),
        Field::new("clusters", DataType::Int64, false),
        Field::new("seed", DataType::Int64, false),
    ])
}

impl AggregateUDFImpl for ClusterCi {
    fn name(&self) -> &str {
        "cluster_ci"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Struct(result_fields()))
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(ClusterCiAccumulator { clusters: BTreeMap::new(), replicates: None, seed: None }))
    }

    fn state_fields(&self, _args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let list = |name: &str, t: DataType| {
            Arc::new(Field::new(name, DataType::List(Arc::new(Field::new("item", t, true))), true))
        };
        Ok(vec![
            list("clusters", DataType::Utf8),
            list("numerators", DataType::Float64),
            list("denominators", DataType::Float64),
            Arc::new(Field::new("replicates", DataType::Int64, true)),
            Arc::new(Field::new("seed", DataType::Int64, true)),
        ])
    }
}

#[derive(Debug)]
struct ClusterCiAccumulator {
    /// cluster -> (sum of numerators, sum of denominators)
    clusters: BTreeMap<String, (f64, f64)>,
    /// Given in the call (or in a partial state); `None` until a row says so, so that a
    /// partition without rows does not pass the defaults on as if they were chosen.
    replicates: Option<usize>,
    seed: Option<u64>,
}

fn as_f64(a: &ArrayRef) -> DfResult<Float64Array> {
    Ok(cast(a, &DataType::Float64)?.as_any().downcast_ref::<Float64Array>().expect("Float64").clone())
}

fn as_str(a: &ArrayRef) -> DfResult<StringArray> {
    Ok(cast(a, &DataType::Utf8)?.as_any().downcast_ref::<StringArray>().expect("Utf8").clone())
}

fn as_i64(a: &ArrayRef) -> DfResult<Int64Array> {
    Ok(cast(a, &DataType::Int64)?.as_any().downcast_ref::<Int64Array>().expect("Int64").clone())
}

impl ClusterCiAccumulator {
    fn settings(&self) -> Bootstrap {
        let default = Bootstrap::default();
        Bootstrap {
            replicates: self.replicates.unwrap_or(default.replicates),
            seed: self.seed.unwrap_or(default.seed),
            ..default
        }
    }

    fn add(&mut self, cluster: &str, num: f64, den: f64) {
        let entry = self.clusters.entry(cluster.to_string()).or_insert((0.0, 0.0));
        entry.0 += num;
        entry.1 += den;
    }

    /// The replicates and seed arguments are meant as constants: the first value seen wins.
    fn settings_from(&mut self, replicates: &ArrayRef, seed: &ArrayRef) -> DfResult<()> {
        let (replicates, seed) = (as_i64(replicates)?, as_i64(seed)?);
        if let (None, Some(b)) = (self.replicates, replicates.iter().flatten().next()) {
            if !(1..=epistore_stats::MAX_REPLICATES as i64).contains(&b) {
                return exec_err!(
                    "cluster_ci: replicates must be between 1 and {} (got {b})",
                    epistore_stats::MAX_REPLICATES
                );
            }
            self.replicates = Some(b as usize);
        }
        if let (None, Some(s)) = (self.seed, seed.iter().flatten().next()) {
            self.seed = Some(s as u64);
        }
        Ok(())
    }
}

impl Accumulator for ClusterCiAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let (num, den, cluster) = (as_f64(&values[0])?, as_f64(&values[1])?, as_str(&values[2])?);
        if values.len() == 5 {
            self.settings_from(&values[3], &values[4])?;
        }
        for i in 0..cluster.len() {
            // Like sum(): NULL counts add nothing. A row without a cluster cannot be
            // resampled, so it is refused rather than silently dropped.
            if cluster.is_null(i) {
                return exec_err!("cluster_ci: the cluster argument is NULL on a row");
            }
            let value = |a: &Float64Array| if a.is_null(i) { 0.0 } else { a.value(i) };
            self.add(cluster.value(i), value(&num), value(&den));
        }
        Ok(())
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let sums: Vec<Vec<f64>> = self.clusters.values().map(|&(n, d)| vec![n, d]).collect();
        let settings = self.settings();
        let interval = cluster_bootstrap(&sums, |t| (t[1] != 0.0).then(|| t[0] / t[1]), &settings)
            .map_err(|e| datafusion::error::DataFusionError::Execution(e.to_string()))?;
        let f = |v: Option<f64>| Arc::new(Float64Array::from(vec![v])) as ArrayRef;
        let i = |v: i64| Arc::new(Int64Array::from(vec![v])) as ArrayRef;
        let array = StructArray::try_new(
            result_fields(),
            vec![
                f(interval.estimate),
                f(interval.lo),
                f(interval.hi),
                i(interval.used as i64),
                i(interval.dropped as i64),
                i(sums.len() as i64),
                i(settings.seed as i64),
            ],
            None,
        )?;
        Ok(ScalarValue::Struct(Arc::new(array)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.clusters.keys().map(|k| k.len() + 64).sum::<usize>()
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let clusters: Vec<ScalarValue> = self.clusters.keys().map(|k| ScalarValue::from(k.as_str())).collect();
        let nums: Vec<ScalarValue> = self.clusters.values().map(|v| ScalarValue::from(v.0)).collect();
        let dens: Vec<ScalarValue> = self.clusters.values().map(|v| ScalarValue::from(v.1)).collect();
        Ok(vec![
            ScalarValue::List(ScalarValue::new_list_nullable(&clusters, &DataType::Utf8)),
            ScalarValue::List(ScalarValue::new_list_nullable(&nums, &DataType::Float64)),
            ScalarValue::List(ScalarValue::new_list_nullable(&dens, &DataType::Float64)),
            ScalarValue::Int64(self.replicates.map(|b| b as i64)),
            ScalarValue::Int64(self.seed.map(|s| s as i64)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let list = |a: &ArrayRef| a.as_any().downcast_ref::<ListArray>().expect("list state").clone();
        let (clusters, nums, dens) = (list(&states[0]), list(&states[1]), list(&states[2]));
        self.settings_from(&states[3], &states[4])?;
        for row in 0..clusters.len() {
            if clusters.is_null(row) {
                continue;
            }
            let (c, n, d) = (as_str(&clusters.value(row))?, as_f64(&nums.value(row))?, as_f64(&dens.value(row))?);
            for i in 0..c.len() {
                self.add(c.value(i), n.value(i), d.value(i));
            }
        }
        Ok(())
    }
}
