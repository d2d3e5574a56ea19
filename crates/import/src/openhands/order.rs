//! The order of the OpenHands event stream: events sorted by `id`, each observation
//! attached to the action it answers (`cause`). Two layouts are read: the flat list
//! every version since 0.9 writes, and the older evaluation `history` of
//! `[action, observation]` pairs.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::{Input, Refusal};

pub(super) type Obj = Map<String, Value>;

pub(super) enum Item<'a> {
    /// An action, with the observation that answers it when the log has one.
    Action(&'a Obj, Option<&'a Obj>),
    /// An observation no action of the stream caused (state changes, errors).
    Observation(&'a Obj),
}

pub(super) fn obj(v: &Value) -> Option<&Obj> {
    v.as_object()
}

pub(super) fn str_of<'a>(o: &'a Obj, key: &str) -> Option<&'a str> {
    o.get(key).and_then(Value::as_str)
}

pub(super) fn args(a: &Obj) -> &Obj {
    static EMPTY: std::sync::OnceLock<Obj> = std::sync::OnceLock::new();
    a.get("args").and_then(Value::as_object).unwrap_or_else(|| EMPTY.get_or_init(Obj::new))
}

pub(super) fn extras(o: &Obj) -> &Obj {
    static EMPTY: std::sync::OnceLock<Obj> = std::sync::OnceLock::new();
    o.get("extras").and_then(Value::as_object).unwrap_or_else(|| EMPTY.get_or_init(Obj::new))
}

/// The stream in order, each observation attached to the action that caused it.
pub(super) fn items<'a>(events: &'a [Value], input: &Input, place: &Option<String>) -> Result<Vec<Item<'a>>, Refusal> {
    let mut flat: Vec<&'a Obj> = Vec::new();
    let mut pairs: Vec<Item<'a>> = Vec::new();
    for e in events {
        match e {
            Value::Array(pair) => {
                // The old evaluation layout: `[action, observation]`.
                let a = pair.first().and_then(obj).filter(|a| a.contains_key("action"));
                let o = pair.get(1).and_then(obj).filter(|o| o.contains_key("observation"));
                match (a, o) {
                    (Some(a), o) => pairs.push(Item::Action(a, o)),
                    (None, Some(o)) => pairs.push(Item::Observation(o)),
                    (None, None) => {}
                }
            }
            Value::Object(o) => flat.push(o),
            _ => {}
        }
    }
    let known = |o: &&Obj| o.contains_key("action") || o.contains_key("observation");
    if pairs.is_empty() && !events.is_empty() && !flat.iter().any(known) {
        let reason = if flat.iter().any(|o| o.contains_key("kind")) {
            "OpenHands V1 (agent SDK) events (`kind`): not read by this importer"
        } else {
            "expected OpenHands events (objects with `action` or `observation`)"
        };
        return Err(input.refuse(place.clone(), reason));
    }
    if !pairs.is_empty() {
        pairs.extend(flat.into_iter().filter(known).map(|o| {
            if o.contains_key("action") {
                Item::Action(o, None)
            } else {
                Item::Observation(o)
            }
        }));
        return Ok(pairs);
    }
    let id = |o: &Obj| o.get("id").and_then(Value::as_i64);
    if flat.iter().all(|o| id(o).is_some()) {
        flat.sort_by_key(|o| id(o));
    }
    let actions: HashSet<i64> = flat.iter().filter(|o| o.contains_key("action")).filter_map(|o| id(o)).collect();
    // The first answer to an action is its observation; a `null` one gives way to a real one.
    let mut answer: HashMap<i64, usize> = HashMap::new();
    for (i, o) in flat.iter().enumerate() {
        let Some(cause) = o.get("cause").and_then(Value::as_i64) else {
            continue;
        };
        if !o.contains_key("observation") || !actions.contains(&cause) {
            continue;
        }
        let is_null = |j: usize| str_of(flat[j], "observation") == Some("null");
        match answer.get(&cause) {
            Some(&j) if !is_null(j) || is_null(i) => {}
            _ => {
                answer.insert(cause, i);
            }
        }
    }
    let attached: HashSet<usize> = answer.values().copied().collect();
    let mut out = Vec::new();
    for (i, o) in flat.iter().enumerate() {
        if o.contains_key("action") {
            let obs = id(o).and_then(|a| answer.get(&a)).map(|&j| flat[j]);
            out.push(Item::Action(o, obs));
        } else if o.contains_key("observation") && !attached.contains(&i) {
            out.push(Item::Observation(o));
        }
    }
    Ok(out)
}
