//! Typed field access on a JSON object that reports the exact place of a bad value.
//!
//! Every getter names the field by its dotted path (`model.name`) and the file and line
//! it came from, so a rejection tells the user where to look. `null` counts as absent
//! for optional fields; a required field that is `null` is missing.
//!
//! An [`Obj`] remembers which fields its getters read: those are the fields this build
//! knows, and [`Obj::unknown`] is every other one (kept as `extra`, docs/format.md §2). A parser
//! so names each field once, where it reads it; there is no second list of known
//! fields to keep in step.

use std::cell::{Cell, RefCell};

use serde_json::{Map, Value};

use crate::error::Problem;

/// Where in a package the object being read lives.
#[derive(Clone, Copy)]
pub(crate) struct Place<'a> {
    pub package: &'a str,
    pub file: &'a str,
    pub line: Option<usize>,
}

impl Place<'_> {
    pub fn problem(&self, field: Option<String>, message: impl Into<String>) -> Problem {
        Problem {
            package: self.package.to_string(),
            file: Some(self.file.to_string()),
            line: self.line,
            field,
            message: message.into(),
        }
    }
}

pub(crate) type FieldResult<T> = Result<T, Box<Problem>>;

pub(crate) struct Obj<'a> {
    map: &'a Map<String, Value>,
    pub place: Place<'a>,
    /// Dotted prefix of this object's fields (`model.`), empty at the top.
    pub prefix: String,
    /// The fields of `map` a getter has read (its own keys, so no copies).
    read: RefCell<Vec<&'a str>>,
    /// The unknown fields were taken: a field read after that would be both typed and
    /// kept in `extra`.
    taken: Cell<bool>,
}

impl<'a> Obj<'a> {
    /// Views `value` as an object, or fails naming `what` (a field path or "line").
    pub fn new(value: &'a Value, place: Place<'a>, prefix: &str) -> FieldResult<Obj<'a>> {
        match value {
            Value::Object(map) => Ok(Obj {
                map,
                place,
                prefix: prefix.to_string(),
                read: RefCell::new(Vec::with_capacity(map.len())),
                taken: Cell::new(false),
            }),
            other => Err(Box::new(place.problem(
                (!prefix.is_empty()).then(|| prefix.trim_end_matches('.').to_string()),
                format!("expected a JSON object, found {}", type_name(other)),
            ))),
        }
    }

    pub fn path(&self, name: &str) -> String {
        format!("{}{}", self.prefix, name)
    }

    pub fn fail<T>(&self, name: &str, message: impl Into<String>) -> FieldResult<T> {
        Err(Box::new(self.place.problem(Some(self.path(name)), message)))
    }

    /// The field as written (`null` included), counted as known: it stays out of
    /// [`Obj::unknown`]. Every getter reads through here.
    pub fn raw(&self, name: &str) -> Option<&'a Value> {
        debug_assert!(!self.taken.get(), "`{}` read after the unknown fields were taken", self.path(name));
        let (key, value) = self.map.get_key_value(name)?;
        let mut read = self.read.borrow_mut();
        if !read.contains(&key.as_str()) {
            read.push(key);
        }
        Some(value)
    }

    fn present(&self, name: &str) -> Option<&'a Value> {
        match self.raw(name) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    pub fn required<T>(&self, name: &str, got: FieldResult<Option<T>>) -> FieldResult<T> {
        match got? {
            Some(v) => Ok(v),
            None => self.fail(name, "required field is missing"),
        }
    }

    pub fn object(&self, name: &str) -> FieldResult<Option<Obj<'a>>> {
        self.nested(name, self.present(name))
    }

    /// A nested object read to be checked only: unlike every other getter this one
    /// leaves the field among the unknown ones, so it is kept, whole, in `extra`.
    pub fn object_kept_in_extra(&self, name: &str) -> FieldResult<Option<Obj<'a>>> {
        self.nested(name, self.map.get(name).filter(|v| !v.is_null()))
    }

    /// A string field read to be checked only: like [`Obj::object_kept_in_extra`] it
    /// stays among the unknown fields, kept in `extra`, where the derivation reads it
    /// (a field the store's typed records have no place for; docs/format.md §9.5).
    pub fn string_kept_in_extra(&self, name: &str) -> FieldResult<()> {
        match self.map.get(name) {
            None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
            Some(other) => self.fail(name, format!("expected a string, found {}", type_name(other))),
        }
    }

    /// An integer field (at least 0) read to be checked only, kept among the unknown
    /// fields like [`Obj::string_kept_in_extra`].
    pub fn count_kept_in_extra(&self, name: &str) -> FieldResult<()> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(()),
            Some(v) if v.as_u64().is_some() => Ok(()),
            Some(other) => self.fail(name, format!("expected a whole number >= 0, found {}", type_name(other))),
        }
    }

    fn nested(&self, name: &str, value: Option<&'a Value>) -> FieldResult<Option<Obj<'a>>> {
        match value {
            None => Ok(None),
            Some(v) => Obj::new(v, self.place, &format!("{}.", self.path(name))).map(Some),
        }
    }

    /// The whole object as JSON text.
    pub fn json_text(&self) -> String {
        Value::Object(self.map.clone()).to_string()
    }

    pub fn string(&self, name: &str) -> FieldResult<Option<String>> {
        match self.present(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => self.fail(name, format!("expected a string, found {}", type_name(other))),
        }
    }

    pub fn string_req(&self, name: &str) -> FieldResult<String> {
        self.required(name, self.string(name))
    }

    pub fn enumerated(&self, name: &str, allowed: &[&str]) -> FieldResult<Option<String>> {
        match self.string(name)? {
            None => Ok(None),
            Some(s) if allowed.contains(&s.as_str()) => Ok(Some(s)),
            Some(s) => self.fail(name, format!("`{s}` is not one of: {}", allowed.join(", "))),
        }
    }

    pub fn boolean(&self, name: &str) -> FieldResult<Option<bool>> {
        match self.present(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => self.fail(name, format!("expected true or false, found {}", type_name(other))),
        }
    }

    /// An integer in `min..=max` (a JSON number with no fractional part).
    pub fn integer(&self, name: &str, min: i64, max: i64) -> FieldResult<Option<i64>> {
        match self.present(name) {
            None => Ok(None),
            Some(v) => match as_integer(v) {
                Some(i) if (min..=max).contains(&i) => Ok(Some(i)),
                Some(i) if max == i64::MAX => self.fail(name, format!("{i} is below the minimum {min}")),
                Some(i) => self.fail(name, format!("{i} is outside {min}..={max}")),
                None => self.fail(name, format!("expected an integer, found {}", describe(v))),
            },
        }
    }

    pub fn seq(&self, name: &str) -> FieldResult<Option<u64>> {
        Ok(self.integer(name, 0, i64::MAX)?.map(|i| i as u64))
    }

    /// A finite number in `min..=max`.
    pub fn number(&self, name: &str, min: f64, max: f64) -> FieldResult<Option<f64>> {
        match self.present(name) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(x) if x.is_finite() && x >= min && x <= max => Ok(Some(x)),
                Some(x) if max == f64::MAX => self.fail(name, format!("{x} is below the minimum {min}")),
                Some(x) => self.fail(name, format!("{x} is outside {min}..={max}")),
                None => self.fail(name, "number is not representable"),
            },
            Some(other) => self.fail(name, format!("expected a number, found {}", type_name(other))),
        }
    }

    pub fn array(&self, name: &str) -> FieldResult<Option<&'a Vec<Value>>> {
        match self.present(name) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => self.fail(name, format!("expected an array, found {}", type_name(other))),
        }
    }

    pub fn string_array(&self, name: &str, allowed: Option<&[&str]>) -> FieldResult<Option<Vec<String>>> {
        let Some(items) = self.array(name)? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let field = format!("{name}[{i}]");
            match item {
                Value::String(s) => {
                    if let Some(allowed) = allowed {
                        if !allowed.contains(&s.as_str()) {
                            return self.fail(&field, format!("`{s}` is not one of: {}", allowed.join(", ")));
                        }
                    }
                    out.push(s.clone())
                }
                other => return self.fail(&field, format!("expected a string, found {}", type_name(other))),
            }
        }
        Ok(Some(out))
    }

    pub fn seq_array(&self, name: &str) -> FieldResult<Option<Vec<u64>>> {
        let Some(items) = self.array(name)? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match as_integer(item) {
                Some(s) if s >= 0 => out.push(s as u64),
                _ => {
                    return self.fail(
                        &format!("{name}[{i}]"),
                        format!("expected a seq (integer >= 0), found {}", describe(item)),
                    )
                }
            }
        }
        Ok(Some(out))
    }

    /// An RFC 3339 timestamp, kept as written.
    pub fn timestamp(&self, name: &str) -> FieldResult<Option<String>> {
        match self.string(name)? {
            None => Ok(None),
            Some(s) => match chrono::DateTime::parse_from_rfc3339(&s) {
                Ok(_) => Ok(Some(s)),
                Err(e) => self.fail(name, format!("`{s}` is not an RFC 3339 timestamp ({e})")),
            },
        }
    }

    /// The fields this build does not interpret, as JSON object text; `None` when all
    /// fields are known. See [`Obj::unknown`].
    pub fn extra(&self) -> Option<String> {
        extra_text(self.unknown())
    }

    /// The fields this build does not interpret, with their values, in the order
    /// written: every field no getter has read. Taken after the last read (reading a
    /// field afterwards is a bug, caught in debug builds).
    pub fn unknown(&self) -> Map<String, Value> {
        self.taken.set(true);
        let read = self.read.borrow();
        self.map.iter().filter(|(k, _)| !read.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// `extra` as stored: JSON object text, `None` when nothing is unknown.
pub(crate) fn extra_text(unknown: Map<String, Value>) -> Option<String> {
    (!unknown.is_empty()).then(|| Value::Object(unknown).to_string())
}

/// Keeps the unknown fields of a nested object under its parent's key in `extra`
/// (`{"model": {"context_window": 32768}}`), so that nothing the recorder wrote is lost.
pub(crate) fn nest_unknown(extra: &mut Map<String, Value>, key: &str, unknown: Map<String, Value>) {
    if !unknown.is_empty() {
        extra.insert(key.to_string(), Value::Object(unknown));
    }
}

/// Keeps the unknown fields of the objects of an array under the array's key in
/// `extra`, one object per item (`{}` for an item with none), so positions still match.
pub(crate) fn nest_unknown_items(extra: &mut Map<String, Value>, key: &str, items: Vec<Map<String, Value>>) {
    if items.iter().any(|m| !m.is_empty()) {
        extra.insert(key.to_string(), Value::Array(items.into_iter().map(Value::Object).collect()));
    }
}

fn as_integer(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            // 3.0 is an integer written as a float; 3.5 is not.
            n.as_f64().filter(|x| x.fract() == 0.0 && x.abs() < 9.0e15).map(|x| x as i64)
        }),
        _ => None,
    }
}

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        other => type_name(other).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at() -> Place<'static> {
        Place { package: "p", file: "f.json", line: None }
    }

    #[test]
    fn the_unknown_fields_are_the_ones_no_getter_read() {
        let value = json!({"a": 1, "b": null, "c": "x", "d": {"e": 2}, "f": true, "g": "not a number"});
        let o = Obj::new(&value, at(), "").unwrap();
        assert_eq!(o.integer("a", 0, 9).unwrap(), Some(1));
        assert_eq!(o.string("b").unwrap(), None, "null reads as absent, and is still a known field");
        assert!(o.object_kept_in_extra("d").unwrap().is_some());
        assert!(o.raw("f").is_some());
        assert!(o.number("g", 0.0, 1.0).is_err());
        assert_eq!(o.string("absent").unwrap(), None);
        assert_eq!(o.unknown(), json!({"c": "x", "d": {"e": 2}}).as_object().unwrap().clone());
    }

    #[test]
    fn a_nested_object_keeps_its_own_reads() {
        let value = json!({"m": {"name": "x", "size": 3}});
        let o = Obj::new(&value, at(), "").unwrap();
        let m = o.object("m").unwrap().unwrap();
        m.string("name").unwrap();
        assert_eq!(o.extra(), None);
        assert_eq!(m.extra().as_deref(), Some(r#"{"size":3}"#));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "`m.name` read after the unknown fields were taken")]
    fn reading_after_the_unknown_fields_were_taken_is_caught() {
        let value = json!({"name": "x"});
        let o = Obj::new(&value, at(), "m.").unwrap();
        o.unknown();
        let _ = o.string("name");
    }
}
