//! Trajectory datasets (`trajectories`): the public corpora of agent trajectories
//! researchers analyse (SWE-smith, nebius SWE-agent and SWE-rebench-OpenHands, SWE-Gym,
//! mini-coder, ...) as JSON Lines, one trajectory per row: a list of chat messages
//! (OpenAI style, or a text harness's), an instance id, a patch, an outcome
//! (docs/importers.md §9.13). Which column is which: [`mapping`] (the corpora's usual
//! names, or a `--mapping` file).
//!
//! The plan makes one unit per line, remembering where its bytes are, so a corpus of
//! any size is read a row at a time, in parallel, in bounded memory. A Parquet corpus
//! is read the same way, a row at a time, through a reader handed in by the caller
//! ([`columnar`]: this crate stays free of Arrow).

mod columnar;
mod mapping;
mod row;

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::sync::Arc;

use serde_json::{Map, Value};

pub use columnar::{RowFiles, RowReader, Rows};
pub use mapping::Mapping;

use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit, Verdict};

#[cfg(test)]
mod tests;

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("trajectories");

/// The registry's trajectory-dataset reader.
pub(crate) struct Trajectories;

/// A row of a trajectory corpus: a list (or JSON string) of messages with roles, and an
/// id of the run or of its task.
fn row_shape(first: &Map<String, Value>) -> bool {
    let messages = mapping::MESSAGES.iter().find_map(|k| first.get(*k)).cloned().and_then(row::messages);
    let chat = messages.is_some_and(|m| {
        !m.is_empty() && m.iter().take(3).all(|x| x.get("role").or_else(|| x.get("from")).is_some_and(Value::is_string))
    });
    let id = ["instance_id", "traj_id", "trajectory_id", "run_id", "task_id"].iter().any(|k| first.contains_key(*k));
    chat && id
}

impl crate::Importer for Trajectories {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "trajectory datasets as JSON Lines (SWE-smith, nebius SWE-agent / SWE-rebench, SWE-Gym, ...): one \
         chat trajectory per row"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["trajectories.jsonl"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        // Any Parquet file is claimed by its name and magic; planning refuses one without
        // a messages column, naming the columns it has.
        if columnar::is_parquet(s.head, &s.name) {
            return Some(crate::Confidence::Name);
        }
        // A corpus row is long: the first line may not fit the sniff, so its keys are
        // looked for as text too.
        if let Some(first) = &s.first {
            return row_shape(first).then_some(crate::Confidence::Shape);
        }
        let line = s.text.lines().next().unwrap_or("");
        let chat = line.starts_with('{')
            && mapping::MESSAGES
                .iter()
                .any(|k| line.contains(&format!("\"{k}\": [{{\"")) || line.contains(&format!("\"{k}\":[{{\"")))
            && line.contains("\"role\"");
        let id = ["instance_id", "traj_id", "trajectory_id", "run_id"].iter().any(|k| s.near(k));
        (chat && id && s.name.ends_with(".jsonl")).then_some(crate::Confidence::Shape)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, options: &crate::Options, plan: &mut Plan) {
        // The mapping is read once, and travels with every row's unit.
        let mapping = match &options.mapping {
            Some(path) => match Mapping::read(path) {
                Ok(m) => Arc::new(m),
                Err(why) => {
                    for input in inputs {
                        plan.refuse(FORMAT, input.refuse(None, format!("the --mapping file: {why}")));
                    }
                    return;
                }
            },
            None => Arc::new(Mapping::default()),
        };
        for input in inputs {
            if columnar::is_parquet(&head(&input), &input.file_name().to_lowercase()) {
                plan_columnar(&input, &mapping, options, plan);
                continue;
            }
            match spans(&input) {
                Ok(spans) => {
                    for span in spans {
                        let planned = Planned { place: Place::Line(span), mapping: mapping.clone() };
                        plan.units.push(Unit::new(FORMAT, vec![input.clone()], Part::Line(span.line)).with(planned));
                    }
                }
                Err(r) => plan.refuse(FORMAT, r),
            }
        }
    }
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
        vec![read(unit, ctx)]
    }
}

/// What the plan found for a row: where it is, and the mapping.
struct Planned {
    place: Place,
    mapping: Arc<Mapping>,
}

/// Where a row is: a line of a JSON Lines file, or a row of an open columnar file.
#[derive(Clone)]
enum Place {
    Line(Span),
    Row { rows: Arc<dyn Rows>, index: usize },
}

/// A columnar row's place in refusals and in `provenance.source_files[].part`.
fn row_part(index: usize) -> String {
    format!("row {}", index + 1)
}

/// The first bytes of a file (for the Parquet magic).
fn head(input: &Input) -> Vec<u8> {
    let mut head = Vec::with_capacity(4);
    if let Ok(f) = std::fs::File::open(&input.path) {
        let _ = f.take(4).read_to_end(&mut head);
    }
    head
}

/// A Parquet corpus: one unit per row, all holding the one open file.
fn plan_columnar(input: &Arc<Input>, mapping: &Arc<Mapping>, options: &crate::Options, plan: &mut Plan) {
    let Some(reader) = &options.row_files else {
        let why = "a Parquet file: this build reads trajectory datasets as JSON Lines only (the epistore \
                   command and the Python package read Parquet)";
        return plan.refuse(FORMAT, input.refuse(None, why));
    };
    let rows = match reader.0.open(&input.path) {
        Ok(rows) => rows,
        Err(why) => return plan.refuse(FORMAT, input.refuse(None, why)),
    };
    let columns = rows.columns();
    if !mapping.has_messages_column(&columns) {
        let why = format!(
            "no messages column: expected `messages`, `trajectory`, `conversations` or `chat` (or the column a \
             --mapping file names); the file's columns are {}",
            columns.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        );
        return plan.refuse(FORMAT, input.refuse(None, why));
    }
    if rows.is_empty() {
        return plan.refuse(FORMAT, input.refuse(None, "no rows: expected trajectories, one per row"));
    }
    for index in 0..rows.len() {
        let planned = Planned { place: Place::Row { rows: rows.clone(), index }, mapping: mapping.clone() };
        plan.units.push(Unit::new(FORMAT, vec![input.clone()], Part::Object(row_part(index))).with(planned));
    }
}

/// Where a row's bytes are.
#[derive(Debug, Clone, Copy)]
struct Span {
    offset: u64,
    len: u64,
    line: usize,
}

/// One pass over the file: each non-blank line's span.
fn spans(input: &Input) -> Result<Vec<Span>, Refusal> {
    let file = std::fs::File::open(&input.path).map_err(|e| input.io(e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let (mut out, mut buf, mut offset, mut line) = (Vec::new(), Vec::new(), 0u64, 0usize);
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(|e| input.io(e))?;
        if n == 0 {
            break;
        }
        line += 1;
        let body = buf.trim_ascii_end().len() as u64;
        if buf.iter().any(|b| !b.is_ascii_whitespace()) {
            out.push(Span { offset, len: body, line });
        }
        offset += n as u64;
    }
    if out.is_empty() {
        return Err(input.refuse(None, "an empty file: expected trajectories, one JSON object per line"));
    }
    Ok(out)
}

fn read(unit: &Unit, ctx: &Context) -> Result<Recorder, Refusal> {
    let input = &unit.files[0];
    let (place, mapping) = match unit.planned::<Planned>() {
        Some(p) => (p.place.clone(), p.mapping.clone()),
        None => replan(unit, ctx)?,
    };
    // The row's bytes, its part and place, and its number in the file (for labels).
    let (bytes, part, at, number) = match place {
        Place::Line(span) => {
            let mut bytes = vec![0u8; span.len as usize];
            let mut file = std::fs::File::open(&input.path).map_err(|e| input.io(e))?;
            file.seek(SeekFrom::Start(span.offset))
                .and_then(|_| file.read_exact(&mut bytes))
                .map_err(|e| input.io(e))?;
            (bytes, Part::Line(span.line), format!("line {}", span.line), span.line)
        }
        Place::Row { rows, index } => {
            let at = row_part(index);
            let bytes = rows.row(index).map_err(|why| input.refuse(Some(at.clone()), why))?;
            (bytes, Part::Object(at.clone()), at, index + 1)
        }
    };
    record_row(input, bytes, part, (&at, number), &mapping)
}

/// A unit read without its plan's state (built by hand): its place found again.
fn replan(unit: &Unit, ctx: &Context) -> Result<(Place, Arc<Mapping>), Refusal> {
    let input = &unit.files[0];
    let mapping = match &ctx.options.mapping {
        Some(path) => Mapping::read(path).map_err(|why| input.refuse(None, why))?,
        None => Mapping::default(),
    };
    let place = match &unit.part {
        Part::Line(line) => Place::Line(
            *spans(input)?
                .iter()
                .find(|s| s.line == *line)
                .ok_or_else(|| Refusal::at_line(input.display(), *line, "no row here"))?,
        ),
        Part::Object(at) => {
            let index = at
                .strip_prefix("row ")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| input.refuse(Some(at.clone()), "not a row of a columnar file"))?;
            let reader = ctx.options.row_files.as_ref().ok_or_else(|| input.refuse(None, "no Parquet reader"))?;
            let rows = reader.0.open(&input.path).map_err(|why| input.refuse(None, why))?;
            Place::Row { rows, index: index - 1 }
        }
        _ => return Err(input.refuse(None, "a trajectory dataset is read one row at a time")),
    };
    Ok((place, Arc::new(mapping)))
}

/// One row, as JSON bytes, into its episode.
fn record_row(
    input: &Input,
    bytes: Vec<u8>,
    part: Part,
    (at, number): (&str, usize),
    mapping: &Mapping,
) -> Result<Recorder, Refusal> {
    let refuse = |why: String| Refusal::new(input.display(), Some(at.to_string()), why);
    let mut row = match epistore_package::json_from_slice::<Value>(&bytes) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err(refuse("expected a trajectory: a JSON object".into())),
        Err(e) => return Err(refuse(format!("malformed JSON: {e}"))),
    };
    let Some(msgs) = mapping.take_messages(&mut row).and_then(row::messages) else {
        return Err(refuse(
            "no messages: expected a list of chat messages under `messages`, `trajectory` or `conversations` \
             (or the column a --mapping file names)"
                .into(),
        ));
    };
    let instance = mapping.instance_id(&row);
    let label = mapping
        .run_id(&row)
        .or_else(|| instance.as_ref().map(|i| format!("{i}#{number}")))
        .unwrap_or_else(|| format!("{}#{number}", input.file_name()));
    let mut rec = Recorder::new(FORMAT, label);
    rec.source(&input.file_name(), &input.blake3()?, part, bytes)?;
    rec.harness_name(mapping.harness.clone());
    if let Some(i) = &instance {
        rec.task(i.clone());
        rec.instance_id = Some(i.clone());
    }
    if let Some(m) = mapping.model(&row) {
        rec.model(m);
    }
    row::record(&mut rec, &msgs, mapping);
    if let Some(p) = mapping.patch(&row) {
        rec.patch(&p);
    }
    if let Some((name, value)) = mapping.outcome(&row) {
        rec.verdict(Verdict { name: format!("dataset:{name}"), value, ts: None });
    }
    rec.note("a dataset row: no times, and no person in the run (later user messages are the harness's)");
    Ok(rec)
}
