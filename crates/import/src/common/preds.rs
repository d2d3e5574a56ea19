//! Predictions: what runs submitted, by SWE-bench instance id. SWE-agent 0.x writes
//! `all_preds.jsonl` (one line per run), 1.x `<id>.pred` beside each trajectory and a
//! merged `preds.json`; mini-SWE-agent writes `preds.json` (the same shape, so the two
//! cannot be told apart). None of them is a run: a prediction only repeats a
//! trajectory's `info.submission` under the name the evaluation harness reads.
//!
//! How they join the runs of one call (documented in `docs/importers.md`):
//! - a run's own prediction (its `all_preds.jsonl` line, its `<id>.pred`) in the
//!   trajectory's folder or the folder above is read with it: copied as the run's part
//!   and used as the patch when the trajectory carries none;
//! - a merged document (`preds.json`, `results.json`) repeats what those files hold, so
//!   it is reported as covered when runs of the call have its instances;
//! - a prediction whose instance has no trajectory in the call is refused with that
//!   reason (one refusal for a file none of whose predictions matched).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Input, Part, Plan, Refusal, Unit};

/// The shapes a predictions file takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `all_preds.jsonl`: one prediction per line (a run's part is its line).
    Lines,
    /// `preds.json` / `results.json`: an object keyed by instance id (or a list).
    Document,
    /// `<id>.pred`: one prediction, the whole file.
    Single,
}

/// One prediction, where it is in its file.
#[derive(Debug, Clone)]
pub(crate) struct Prediction {
    pub instance_id: String,
    pub part: Part,
}

/// Predictions read from one file, with the lines or entries that could not be read.
pub(crate) struct Indexed {
    pub predictions: Vec<Prediction>,
    pub refused: Vec<Refusal>,
}

const EXPECTED: &str = "expected a prediction: an object with `instance_id` and `model_patch`";

/// The shape of a predictions file, from its name and first bytes; `None` when it is not one.
pub(crate) fn shape_of(path: &Path) -> Option<Shape> {
    let name = path.file_name()?.to_string_lossy().to_lowercase();
    if name.ends_with(".jsonl") {
        return Some(Shape::Lines);
    }
    if name.ends_with(".pred") {
        return Some(Shape::Single);
    }
    if name.ends_with(".traj") || name.ends_with(".traj.json") {
        return None;
    }
    let head = head(path, 64 * 1024)?;
    let text = String::from_utf8_lossy(&head);
    let t = text.trim_start();
    let looks = t.contains("\"model_patch\"") && t.contains("\"instance_id\"") && !t.contains("\"messages\"");
    if !looks || t.contains("\"trajectory\"") {
        return None;
    }
    match t.as_bytes().first() {
        Some(b'[') => Some(Shape::Document),
        Some(b'{') => {
            // One prediction (`{"instance_id": ..}`) or a document keyed by instance id.
            let single =
                epistore_package::json_from_str::<Value>(t).ok().is_some_and(|v| v.get("model_patch").is_some());
            Some(if single { Shape::Single } else { Shape::Document })
        }
        _ => None,
    }
}

fn head(path: &Path, n: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(path).ok()?.take(n).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// Reads the predictions of one file. A file that is not readable at all is one refusal.
pub(crate) fn index(input: &Input, shape: Shape) -> Result<Indexed, Refusal> {
    let text = input.text()?;
    let mut out = Indexed { predictions: Vec::new(), refused: Vec::new() };
    match shape {
        Shape::Lines => {
            for (i, line) in text.split('\n').enumerate() {
                let n = i + 1;
                if line.trim().is_empty() {
                    continue;
                }
                match epistore_package::json_from_str::<Value>(line) {
                    Ok(v) => match instance_of(&v) {
                        Some(id) => out.predictions.push(Prediction { instance_id: id, part: Part::Line(n) }),
                        None => out.refused.push(Refusal::at_line(input.display(), n, EXPECTED)),
                    },
                    Err(e) => out.refused.push(Refusal::at_line(
                        input.display(),
                        n,
                        format!("not a whole JSON object ({e}); {EXPECTED}"),
                    )),
                }
            }
        }
        Shape::Single => {
            let v = parse(input, &text)?;
            let id = instance_of(&v).ok_or_else(|| input.refuse(None, EXPECTED))?;
            out.predictions.push(Prediction { instance_id: id, part: Part::Whole });
        }
        Shape::Document => match parse(input, &text)? {
            Value::Object(map) => {
                for (key, v) in &map {
                    let id = instance_of(v).unwrap_or_else(|| key.clone());
                    if v.get("model_patch").is_none() {
                        out.refused.push(input.refuse(Some(key.clone()), EXPECTED));
                        continue;
                    }
                    out.predictions.push(Prediction { instance_id: id, part: Part::Object(key.clone()) });
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    match instance_of(v) {
                        Some(id) => {
                            out.predictions.push(Prediction { instance_id: id.clone(), part: Part::Object(id) })
                        }
                        None => out.refused.push(input.refuse(Some(format!("item {}", i + 1)), EXPECTED)),
                    }
                }
            }
            _ => return Err(input.refuse(None, "expected predictions: an object keyed by instance id")),
        },
    }
    Ok(out)
}

fn parse(input: &Input, text: &str) -> Result<Value, Refusal> {
    epistore_package::json_from_str(text)
        .map_err(|e| Refusal::at_line(input.display(), e.line().max(1), format!("not valid JSON ({e}); {EXPECTED}")))
}

fn instance_of(v: &Value) -> Option<String> {
    let id = v.get("instance_id")?.as_str()?;
    (!id.is_empty() && v.get("model_patch").is_some()).then(|| id.to_string())
}

/// A trajectory unit's instance id (its file name without `.traj` / `.traj.json`) and folder.
pub(crate) fn unit_instance(unit: &Unit) -> Option<(String, PathBuf)> {
    let traj = unit.files.first()?;
    Some((traj_stem(&traj.file_name())?, traj.path.parent()?.to_path_buf()))
}

/// The episode label of a trajectory file: its name without `.traj` / `.traj.json`.
pub(crate) fn traj_stem(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".traj.json").or_else(|| name.strip_suffix(".traj"))?;
    (!stem.is_empty()).then(|| stem.to_string())
}

/// Whether a predictions file in `dir` can belong to a trajectory in `traj_dir`: the same
/// folder (0.x, 1.x `.pred`) or the folder above (1.x and mini `<run>/<id>/<id>.traj`).
pub(crate) fn near(dir: &Path, traj_dir: &Path) -> bool {
    dir == traj_dir || traj_dir.parent() == Some(dir)
}

/// Reports a predictions file none of whose runs was given, or the predictions of a file
/// that match no run, as refused; a file some of whose predictions matched is covered
/// (`joined` false) or read with its runs (`joined` true).
pub(crate) fn report(
    format: crate::Format,
    input: &Input,
    indexed: Indexed,
    matched: &[bool],
    joined: bool,
    plan: &mut Plan,
) {
    if indexed.predictions.is_empty() && indexed.refused.is_empty() {
        plan.refuse(format, input.refuse(None, format!("no predictions in it; {EXPECTED}")));
        return;
    }
    for r in indexed.refused {
        plan.refuse(format, r);
    }
    let any = matched.iter().any(|m| *m);
    if !any {
        if !indexed.predictions.is_empty() {
            let n = indexed.predictions.len();
            plan.refuse(
                format,
                input.refuse(
                    None,
                    format!(
                        "predictions (instance_id, model_patch), not a trajectory: none of its {n} instance(s) \
                         has a trajectory in this call"
                    ),
                ),
            );
        }
        return;
    }
    for (p, m) in indexed.predictions.iter().zip(matched) {
        if !m {
            let place = match &p.part {
                Part::Line(n) => Some(format!("line {n}")),
                Part::Object(k) | Part::Member(k) => Some(k.clone()),
                Part::Whole => None,
            };
            plan.refuse(
                format,
                input.refuse(
                    place,
                    format!("a prediction, not a trajectory: no trajectory of instance {} in this call", p.instance_id),
                ),
            );
        }
    }
    if !joined {
        plan.cover(
            format,
            input,
            "predictions of runs given in this call: each run's trajectory carries its own submission",
        );
    }
}

/// The run's part of a predictions file it was joined to (its line of a JSON Lines file,
/// or the whole `.pred`), with the part and the `model_patch`, read at import time. The
/// line is found again by instance id (the unit's `part` is the trajectory's own).
pub(crate) fn read_part(input: &Input, instance_id: &str) -> Result<(Part, Vec<u8>, Option<String>), Refusal> {
    match shape_of(&input.path) {
        Some(Shape::Lines) => {
            let text = input.text()?;
            let quoted = serde_json::to_string(instance_id).unwrap_or_default();
            for (i, line) in text.split('\n').enumerate() {
                if !line.contains(&quoted) {
                    continue;
                }
                if let Ok(v) = epistore_package::json_from_str::<Value>(line) {
                    if instance_of(&v).as_deref() == Some(instance_id) {
                        return Ok((Part::Line(i + 1), line.as_bytes().to_vec(), patch_of(&v)));
                    }
                }
            }
            Err(input.refuse(None, format!("no prediction of instance {instance_id}")))
        }
        _ => {
            let bytes = input.read()?;
            let v: Value = epistore_package::json_from_slice(&bytes).map_err(|e| {
                Refusal::at_line(input.display(), e.line().max(1), format!("not valid JSON ({e}); {EXPECTED}"))
            })?;
            Ok((Part::Whole, bytes, patch_of(&v)))
        }
    }
}

fn patch_of(v: &Value) -> Option<String> {
    v.get("model_patch").and_then(Value::as_str).map(str::to_string)
}
