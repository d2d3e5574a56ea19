//! People's judgements in SQL: the `annotations` table and `annotated(episode_id,
//! label)` (docs/sql-schema.md). Read whole from the store when a session opens: they
//! are few, and writing one changes no columnar segment.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, StringArray, TimestampMicrosecondArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::logical_expr::{create_udf, ColumnarValue, ScalarUDF, Volatility};
use epistore_package::hex;
use epistore_store::{Snapshot, StoredAnnotation};

use crate::error::Result;

/// The table's name.
pub const TABLE: &str = "annotations";

/// The active labels of each episode (hex id -> labels), as `annotated` answers.
pub type ActiveLabels = HashMap<String, HashSet<String>>;

pub(crate) fn schema() -> Arc<Schema> {
    let text = |name: &str| Field::new(name, DataType::Utf8, true);
    Arc::new(Schema::new(vec![
        Field::new("annotation_id", DataType::Utf8, false),
        Field::new("episode_id", DataType::Utf8, false),
        text("model"),
        text("harness_level"),
        text("task"),
        Field::new("kind", DataType::Utf8, false),
        Field::new("label", DataType::Utf8, false),
        text("note"),
        text("author"),
        Field::new("created", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        text("retracts"),
        text("retracted_by"),
        Field::new("active", DataType::Boolean, false),
    ]))
}

/// The annotations of `snapshot` as the table's one batch, and the active labels.
pub(crate) fn read(snapshot: &Snapshot) -> Result<(RecordBatch, ActiveLabels)> {
    let all = snapshot.annotations()?;
    // Cell keys of the episodes judged, from one scan of the cell index: decoding each
    // judged episode's record instead made a session with 10,000 annotations over
    // 2,000 episodes open in 0.40 s, not 0.20 s (debug build, benches/README.md).
    let judged: std::collections::HashSet<[u8; 32]> = all.iter().map(|a| a.annotation.episode).collect();
    let cells = snapshot.cells_of(&judged)?;
    let cell = |a: &StoredAnnotation, i: usize| cells.get(&a.annotation.episode).map(|(m, l, t)| [m, l, t][i].clone());
    let created = |a: &StoredAnnotation| {
        chrono::DateTime::parse_from_rfc3339(&a.annotation.created).ok().map(|t| t.timestamp_micros())
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(all.iter().map(|a| Some(hex(&a.id))).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| Some(hex(&a.annotation.episode))).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| cell(a, 0)).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| cell(a, 1)).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| cell(a, 2)).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| Some(a.annotation.kind.name())).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| Some(a.annotation.label.as_str())).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| a.annotation.note.as_deref()).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| a.annotation.author.as_deref()).collect::<StringArray>()),
        Arc::new(all.iter().map(created).collect::<TimestampMicrosecondArray>().with_timezone("UTC")),
        Arc::new(all.iter().map(|a| a.annotation.retracts.as_ref().map(hex)).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| a.retracted_by.as_ref().map(hex)).collect::<StringArray>()),
        Arc::new(all.iter().map(|a| Some(a.is_active())).collect::<BooleanArray>()),
    ];
    let mut labels = ActiveLabels::new();
    for a in all.iter().filter(|a| a.is_active()) {
        labels.entry(hex(&a.annotation.episode)).or_default().insert(a.annotation.label.clone());
    }
    Ok((RecordBatch::try_new(schema(), columns)?, labels))
}

/// `annotated(episode_id, label)`: whether the episode has this active label. NULL when
/// either argument is.
pub(crate) fn annotated(labels: Arc<ActiveLabels>) -> ScalarUDF {
    create_udf(
        "annotated",
        vec![DataType::Utf8, DataType::Utf8],
        DataType::Boolean,
        // The answer depends on the session's snapshot, not on the arguments alone,
        // but is fixed for the session.
        Volatility::Stable,
        Arc::new(move |args: &[ColumnarValue]| {
            let rows = args.iter().find_map(|a| match a {
                ColumnarValue::Array(a) => Some(a.len()),
                ColumnarValue::Scalar(_) => None,
            });
            let arrays: Vec<ArrayRef> =
                args.iter().map(|a| a.to_array(rows.unwrap_or(1))).collect::<datafusion::error::Result<_>>()?;
            let text = |a: &ArrayRef| -> datafusion::error::Result<StringArray> {
                Ok(cast(a, &DataType::Utf8)?.as_any().downcast_ref::<StringArray>().expect("cast to Utf8").clone())
            };
            let (ids, wanted) = (text(&arrays[0])?, text(&arrays[1])?);
            let out: BooleanArray = ids
                .iter()
                .zip(wanted.iter())
                .map(|pair| match pair {
                    (Some(id), Some(label)) => Some(labels.get(id).is_some_and(|set| set.contains(label))),
                    _ => None,
                })
                .collect();
            Ok(match rows {
                Some(_) => ColumnarValue::Array(Arc::new(out)),
                None => ColumnarValue::Scalar(datafusion::scalar::ScalarValue::try_from_array(&out, 0)?),
            })
        }),
    )
}
