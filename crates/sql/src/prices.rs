//! The price table the derived costs of `episode_costs` use (docs/metrics.md §L): the
//! shipped one (`datasets/model_prices.json`, versioned and dated), or the file
//! `EPISTORE_PRICES` names, in the same shape. Registered as the table `model_prices`:
//! one row per model of the store with the prices its longest listed prefix gives (the
//! matching is done here, once per session, so the view `episode_costs` joins on the
//! model name alone and runs on any engine).

use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use serde_json::Value;

use crate::error::{Error, Result};

/// The shipped table.
pub const SHIPPED: &str = include_str!("../../../datasets/model_prices.json");
/// The variable naming a price table of one's own.
pub const ENV: &str = "EPISTORE_PRICES";

/// One model family's list prices.
#[derive(Clone, Debug, PartialEq)]
pub struct Price {
    /// Matched against the start of a model name (after any `provider/`), case
    /// insensitively; the longest matching prefix wins.
    pub prefix: String,
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
    /// Input tokens read from / written to a prompt cache, where priced apart (else
    /// they cost the input price).
    pub cache_read_usd_per_mtok: Option<f64>,
    pub cache_write_usd_per_mtok: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PriceTable {
    pub version: String,
    pub date: String,
    pub models: Vec<Price>,
}

impl PriceTable {
    /// The table in force: `EPISTORE_PRICES`'s file when set, else the shipped one.
    pub fn in_force() -> Result<PriceTable> {
        match std::env::var_os(ENV) {
            Some(path) => {
                let path = std::path::PathBuf::from(path);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| Error::Usage(format!("{ENV}={}: {e}", path.display())))?;
                PriceTable::parse(&text, &path.display().to_string())
            }
            None => PriceTable::parse(SHIPPED, "datasets/model_prices.json"),
        }
    }

    /// Reads a price table, or says which field of `name` is wrong.
    pub fn parse(text: &str, name: &str) -> Result<PriceTable> {
        let bad = |field: &str, why: &str| Error::Usage(format!("{name}: `{field}` {why}"));
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Error::Usage(format!("{name}: line {}: not JSON ({e})", e.line())))?;
        let text_field = |field: &str| -> Result<String> {
            value.get(field).and_then(Value::as_str).map(str::to_string).ok_or_else(|| bad(field, "must be a string"))
        };
        let (version, date) = (text_field("version")?, text_field("date")?);
        let models = value.get("models").and_then(Value::as_array).ok_or_else(|| bad("models", "must be a list"))?;
        let mut out = Vec::with_capacity(models.len());
        for (i, m) in models.iter().enumerate() {
            let at = |f: &str| format!("models[{i}].{f}");
            let prefix = m
                .get("prefix")
                .and_then(Value::as_str)
                .filter(|p| !p.trim().is_empty())
                .ok_or_else(|| bad(&at("prefix"), "must be a non-empty string"))?;
            let optional = |f: &str| -> Result<Option<f64>> {
                match m.get(f) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => v
                        .as_f64()
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .map(Some)
                        .ok_or_else(|| bad(&at(f), "must be a number of USD per million tokens, at least 0")),
                }
            };
            let price = |f: &str| -> Result<f64> {
                optional(f)?.ok_or_else(|| bad(&at(f), "must be a number of USD per million tokens, at least 0"))
            };
            out.push(Price {
                prefix: prefix.to_string(),
                input_usd_per_mtok: price("input")?,
                output_usd_per_mtok: price("output")?,
                cache_read_usd_per_mtok: optional("cache_read")?,
                cache_write_usd_per_mtok: optional("cache_write")?,
            });
        }
        Ok(PriceTable { version, date, models: out })
    }

    /// The price of `model`: the entry whose prefix is the longest start of the model's
    /// name, lowercased, after any `provider/` part; None when no entry matches.
    pub fn price_of(&self, model: &str) -> Option<&Price> {
        let lower = model.to_lowercase();
        let base = lower.rsplit('/').next().unwrap_or(&lower);
        self.models.iter().filter(|p| base.starts_with(&p.prefix.to_lowercase())).max_by_key(|p| p.prefix.len())
    }

    /// The rows of `model_prices`: each of `models` (the store's) that the table prices,
    /// and each listed prefix as a model name of its own (so the table lists the whole
    /// price file too, and is never empty: an empty exported table stalls some engines).
    pub fn batch(&self, models: &[String]) -> Result<RecordBatch> {
        let mut names: Vec<&str> = models.iter().map(String::as_str).collect();
        names.extend(self.models.iter().map(|p| p.prefix.as_str()));
        names.sort_unstable();
        names.dedup();
        let priced: Vec<(&str, &Price)> = names.into_iter().filter_map(|m| self.price_of(m).map(|p| (m, p))).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("model", DataType::Utf8, false),
            Field::new("prefix", DataType::Utf8, false),
            Field::new("input_usd_per_mtok", DataType::Float64, false),
            Field::new("output_usd_per_mtok", DataType::Float64, false),
            Field::new("cache_read_usd_per_mtok", DataType::Float64, true),
            Field::new("cache_write_usd_per_mtok", DataType::Float64, true),
            Field::new("version", DataType::Utf8, false),
            Field::new("date", DataType::Utf8, false),
        ]));
        let m: Vec<&Price> = priced.iter().map(|(_, p)| *p).collect();
        Ok(RecordBatch::try_new(
            schema,
            vec![
                Arc::new(priced.iter().map(|(model, _)| Some(*model)).collect::<StringArray>()),
                Arc::new(m.iter().map(|p| Some(p.prefix.as_str())).collect::<StringArray>()),
                Arc::new(m.iter().map(|p| Some(p.input_usd_per_mtok)).collect::<Float64Array>()),
                Arc::new(m.iter().map(|p| Some(p.output_usd_per_mtok)).collect::<Float64Array>()),
                Arc::new(m.iter().map(|p| p.cache_read_usd_per_mtok).collect::<Float64Array>()),
                Arc::new(m.iter().map(|p| p.cache_write_usd_per_mtok).collect::<Float64Array>()),
                Arc::new(m.iter().map(|_| Some(self.version.as_str())).collect::<StringArray>()),
                Arc::new(m.iter().map(|_| Some(self.date.as_str())).collect::<StringArray>()),
            ],
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_reads_and_bad_tables_name_their_field() {
        let shipped = PriceTable::parse(SHIPPED, "shipped").unwrap();
        assert!(shipped.models.len() > 20 && !shipped.version.is_empty());
        let mut prefixes: Vec<&str> = shipped.models.iter().map(|p| p.prefix.as_str()).collect();
        prefixes.sort();
        prefixes.dedup();
        assert_eq!(prefixes.len(), shipped.models.len(), "a prefix listed twice");
        let err = |text: &str| PriceTable::parse(text, "p.json").unwrap_err().to_string();
        assert!(err("{").starts_with("p.json: line 1: not JSON"), "{}", err("{"));
        assert_eq!(err(r#"{"date": "d", "models": []}"#), "p.json: `version` must be a string");
        let bad = r#"{"version": "v", "date": "d", "models": [{"prefix": "m", "input": 1, "output": -2}]}"#;
        assert_eq!(err(bad), "p.json: `models[0].output` must be a number of USD per million tokens, at least 0");
    }

    #[test]
    fn a_model_is_priced_by_its_longest_listed_prefix() {
        let t = PriceTable::parse(SHIPPED, "shipped").unwrap();
        let prefix = |m: &str| t.price_of(m).map(|p| p.prefix.as_str());
        assert_eq!(prefix("gpt-4o-mini-2024-07-18"), Some("gpt-4o-mini"));
        assert_eq!(prefix("gpt-4o-2024-08-06"), Some("gpt-4o"));
        assert_eq!(prefix("openai/gpt-5-mini"), Some("gpt-5-mini"));
        assert_eq!(prefix("Claude-Sonnet-4-5-20250929"), Some("claude-sonnet-4-5"));
        assert_eq!(prefix("o3-pro-2025-06-10"), Some("o3-pro"));
        assert_eq!(prefix("my-local-model"), None);
        let batch = t.batch(&["gpt-4o".into(), "gpt-4o-2024-08-06".into(), "my-local-model".into()]).unwrap();
        assert_eq!(batch.num_rows(), t.models.len() + 1, "every prefix once, the dated model, no unpriced one");
    }
}
