//! SWE-agent `.traj` files, 0.x and 1.x (docs/importers.md §2 to §6).
//!
//! A trajectory is one run. Its steps (`trajectory[]`: `action`, `observation`,
//! `execution_time` in 1.x) are the tool calls, in order; the run's configuration (0.x
//! `args.yaml`, 1.x `<id>.config.yaml` or the trajectory's own `replay_config`) names the
//! model; its prediction (`all_preds.jsonl` line, `<id>.pred`) is read with it when given.
//! The parts: [`config`] (configuration files), [`preds`] (predictions, shared with
//! mini-SWE-agent, whose `preds.json` has the same shape), `traj` (the steps, with the
//! history as the run's messages, docs/format.md §9) and `edits` (the diffs of the editor
//! commands).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::common::preds;
use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("swe-agent");

pub(crate) mod config;
mod edits;
mod traj;

#[cfg(test)]
mod tests;

pub(crate) fn plan(inputs: Vec<Arc<Input>>, plan: &mut Plan) {
    let format = crate::swe_agent::FORMAT;
    let mut trajs = Vec::new();
    let mut configs: Vec<Arc<Input>> = Vec::new();
    let mut predictions = Vec::new();
    for input in inputs {
        if config::is_config_name(&input.file_name()) {
            configs.push(input);
        } else if let Some(shape) = preds::shape_of(&input.path) {
            predictions.push((input, shape));
        } else {
            trajs.push(input);
        }
    }

    // One unit per trajectory, with the configuration that describes it (one file: the
    // closest), shared between the runs of a folder so it is hashed once.
    let given: Vec<PathBuf> = configs.iter().map(|c| c.path.clone()).collect();
    let mut by_path: HashMap<PathBuf, Arc<Input>> = configs.iter().map(|c| (c.path.clone(), c.clone())).collect();
    let mut looked: HashMap<PathBuf, bool> = HashMap::new();
    let mut used: HashSet<PathBuf> = HashSet::new();
    let mut args_in: HashMap<PathBuf, Vec<PathBuf>> = HashMap::new();
    for traj in trajs {
        let mut files = vec![traj.clone()];
        if let (Some(stem), Some(dir)) = (preds::traj_stem(&traj.file_name()), traj.path.parent()) {
            let args = args_in.entry(dir.to_path_buf()).or_insert_with(|| config::args_files(dir, &given));
            for cand in config::candidates(&traj.path, &stem, args) {
                let ok = by_path.contains_key(&cand)
                    || *looked.entry(cand.clone()).or_insert_with(|| cand.is_file() && looks_like_config(&cand));
                if ok {
                    let input =
                        by_path.entry(cand.clone()).or_insert_with(|| Arc::new(Input::new(cand.clone(), format)));
                    files.push(input.clone());
                    used.insert(cand);
                    break;
                }
            }
        }
        plan.units.push(Unit::new(format, files, Part::Whole));
    }

    for (input, shape) in predictions {
        join_predictions(format, input, shape, plan);
    }

    for c in configs {
        if used.contains(&c.path) {
            continue;
        }
        let dir = c.path.parent().map(|d| d.to_path_buf());
        let beside = plan
            .units
            .iter()
            .filter_map(preds::unit_instance)
            .any(|(_, d)| dir.as_deref().is_some_and(|dir| preds::near(dir, &d)));
        if beside {
            plan.cover(format, &c, "a run configuration; the runs beside it were read with a closer one");
        } else {
            plan.refuse(
                format,
                c.refuse(None, "a SWE-agent run configuration, not a trajectory: no trajectory beside it in this call"),
            );
        }
    }
}

/// A YAML file on disk that reads as a SWE-agent run configuration (agent and model).
fn looks_like_config(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    if f.take(256 * 1024).read_to_end(&mut head).is_err() {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    text.contains("agent") && (text.contains("model_name") || text.contains("per_instance_cost_limit"))
}

pub(crate) fn read(unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
    vec![traj::read(unit, ctx)]
}

/// Joins a predictions file to the trajectories of the call (see [`preds`]): a run's own
/// prediction (a line, a `.pred`) becomes part of its SWE-agent unit; a merged document is
/// covered; what matches no run is refused. Used by both SWE-agent formats' plans.
pub(crate) fn join_predictions(format: Format, input: Arc<Input>, shape: preds::Shape, plan: &mut Plan) {
    let indexed = match preds::index(&input, shape) {
        Ok(i) => i,
        Err(r) => {
            plan.refuse(format, r);
            return;
        }
    };
    let Some(dir) = input.path.parent().map(|d| d.to_path_buf()) else {
        return;
    };
    let mut by_instance: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, unit) in plan.units.iter().enumerate() {
        if matches!(unit.format, crate::swe_agent::FORMAT | crate::mini_swe_agent::FORMAT) {
            if let Some((id, d)) = preds::unit_instance(unit) {
                if preds::near(&dir, &d) {
                    by_instance.entry(id).or_default().push(i);
                }
            }
        }
    }
    let mut matched = Vec::with_capacity(indexed.predictions.len());
    let mut joined = false;
    for p in &indexed.predictions {
        let units = by_instance.get(&p.instance_id).cloned().unwrap_or_default();
        matched.push(!units.is_empty());
        if shape == preds::Shape::Document {
            continue;
        }
        for i in units {
            let unit = &mut plan.units[i];
            let has_prediction = unit.files.iter().skip(1).any(|f| !config::is_config_name(&f.file_name()));
            if unit.format == crate::swe_agent::FORMAT && !has_prediction {
                unit.files.push(input.clone());
                joined = true;
            }
        }
    }
    preds::report(format, &input, indexed, &matched, joined, plan);
}

/// The registry's SWE-agent reader.
pub(crate) struct SweAgent;

impl crate::Importer for SweAgent {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "SWE-agent trajectories (.traj, 0.x and 1.x) with their run configuration and predictions"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["run.traj", "all_preds.jsonl", "args.yaml"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        use crate::Confidence::{Certain, Name, Shape};
        if s.first.is_some() {
            // SWE-agent predictions: the run folder's `all_preds.jsonl`, read beside the
            // trajectories it belongs to, not a run of its own.
            // (A row that also holds the run's messages is a trajectory dataset's.)
            let run = ["trajectory", "messages", "history"].iter().any(|k| s.first_has(k));
            return (s.first_has("instance_id") && s.first_has("model_patch") && !run).then_some(Shape);
        }
        // A `.traj` is one JSON document, never JSON Lines (a corpus row too long for
        // the sniff also starts with `{`).
        if s.text.starts_with('{') && !s.name.ends_with(".jsonl") {
            if s.near("trajectory") && (s.near("history") || s.near("info") || s.near("environment")) {
                return Some(Shape);
            }
            if s.name.ends_with(".pred") && s.near("model_patch") {
                // SWE-agent 1.x's prediction beside a trajectory, read with it.
                return Some(Certain);
            }
        }
        // The run configuration (0.x `args.yaml`, 1.x `<id>.config.yaml`), read with the
        // trajectories beside it.
        let yaml = s.name.ends_with(".yaml") || s.name.ends_with(".yml");
        let config_name = s.name == "args.yaml" || s.name.ends_with(".args.yaml") || s.name.ends_with("config.yaml");
        let config_keys =
            s.text.contains("agent") && (s.text.contains("model_name") || s.text.contains("per_instance_cost_limit"));
        if yaml && config_name && config_keys {
            return Some(Certain);
        }
        // A trajectory whose first bytes are all one long step (1.x steps carry the
        // whole query) shows none of the keys above: its name tells.
        s.name.ends_with(".traj").then_some(Name)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        self::plan(inputs, plan)
    }
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
        self::read(unit, ctx)
    }
}
