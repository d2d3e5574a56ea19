//! Python literals as JSON: OpenHands' SWE-bench evaluation logs print the harness's
//! report with `str(dict)` (`{'resolved': True, ...}`), not as JSON. Only what a `repr`
//! of dicts, lists, tuples, strings, numbers, booleans and `None` produces is read;
//! anything else is an error, so a line that is not a report is never half-read.

use serde_json::{Map, Number, Value};

/// The literal `text` holds, whole (trailing blanks allowed), or what was expected.
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    let mut p = Parser { s: text.as_bytes(), i: 0 };
    let v = p.value()?;
    p.blank();
    if p.i != p.s.len() {
        return Err(format!("unexpected text after the literal at character {}", p.i + 1));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn blank(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn expected(&self, what: &str) -> String {
        format!("expected {what} at character {}", self.i + 1)
    }

    fn value(&mut self) -> Result<Value, String> {
        self.blank();
        match self.peek() {
            Some(b'{') => self.dict(),
            Some(b'[') => self.list(b']'),
            Some(b'(') => self.list(b')'),
            Some(b'\'') | Some(b'"') => self.string().map(Value::String),
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(c) if c.is_ascii_alphabetic() => self.word(),
            _ => Err(self.expected("a value")),
        }
    }

    fn dict(&mut self) -> Result<Value, String> {
        self.i += 1;
        let mut map = Map::new();
        loop {
            self.blank();
            if self.peek() == Some(b'}') {
                self.i += 1;
                return Ok(Value::Object(map));
            }
            let key = match self.value()? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            self.blank();
            if self.peek() != Some(b':') {
                return Err(self.expected("`:`"));
            }
            self.i += 1;
            let v = self.value()?;
            map.insert(key, v);
            self.blank();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {}
                _ => return Err(self.expected("`,` or `}`")),
            }
        }
    }

    fn list(&mut self, close: u8) -> Result<Value, String> {
        self.i += 1;
        let mut items = Vec::new();
        loop {
            self.blank();
            if self.peek() == Some(close) {
                self.i += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.blank();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(c) if c == close => {}
                _ => return Err(self.expected(&format!("`,` or `{}`", close as char))),
            }
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = self.s[self.i];
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            if c == quote {
                return String::from_utf8(out).map_err(|_| "a string that is not UTF-8".to_string());
            }
            if c != b'\\' {
                out.push(c);
                continue;
            }
            let Some(e) = self.peek() else { break };
            self.i += 1;
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'0' => out.push(0),
                b'\\' | b'\'' | b'"' => out.push(e),
                b'x' | b'u' | b'U' => {
                    let n = match e {
                        b'x' => 2,
                        b'u' => 4,
                        _ => 8,
                    };
                    let hex = self.s.get(self.i..self.i + n).ok_or_else(|| self.expected("a hex escape"))?;
                    let code = std::str::from_utf8(hex)
                        .ok()
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .and_then(char::from_u32)
                        .ok_or_else(|| self.expected("a hex escape"))?;
                    self.i += n;
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(code.encode_utf8(&mut buf).as_bytes());
                }
                other => {
                    out.push(b'\\');
                    out.push(other);
                }
            }
        }
        Err("a string that does not end".to_string())
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E')) {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        if let Ok(n) = text.parse::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        text.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("expected a number at character {}", start + 1))
    }

    fn word(&mut self) -> Result<Value, String> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
            self.i += 1;
        }
        match &self.s[start..self.i] {
            b"True" => Ok(Value::Bool(true)),
            b"False" => Ok(Value::Bool(false)),
            b"None" => Ok(Value::Null),
            _ => Err(format!("expected True, False, None or a literal at character {}", start + 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use serde_json::json;

    #[test]
    fn reads_what_python_repr_writes() {
        let v = parse(r#"{'a': True, 'b': [1, -2.5, None], "c": 'it\'s', 'd': (), 'e': {}}"#).unwrap();
        assert_eq!(v, json!({"a": true, "b": [1, -2.5, null], "c": "it's", "d": [], "e": {}}));
    }

    #[test]
    fn refuses_what_is_not_a_literal() {
        assert!(parse("{'a': datetime(2024)}").is_err());
        assert!(parse("{'a': 1").is_err());
        assert!(parse("{'a': 1} trailing").is_err());
    }
}
