//! Code locations (`path`, `path:line`, `path:start-end`), used by ground-truth fault
//! locations and by attribution predictions.

/// A parsed location: a path and an inclusive line range, or the whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location<'a> {
    pub path: &'a str,
    /// Inclusive; `None` is the whole file.
    pub lines: Option<(u64, u64)>,
}

impl<'a> Location<'a> {
    /// Splits at the last colon when what follows is a line or a `start-end` range;
    /// otherwise the whole text is a path (so `a:b.txt` stays a path).
    pub fn parse(text: &'a str) -> Location<'a> {
        let text = text.trim();
        if let Some((path, suffix)) = text.rsplit_once(':') {
            let lines = match suffix.split_once('-') {
                Some((a, b)) => a.trim().parse().ok().zip(b.trim().parse().ok()),
                None => suffix.trim().parse().ok().map(|l| (l, l)),
            };
            if let Some((start, end)) = lines {
                let (start, end) = if start <= end { (start, end) } else { (end, start) };
                return Location { path, lines: Some((start, end)) };
            }
        }
        Location { path: text, lines: None }
    }

    /// Same path, and the line ranges overlap (a whole file overlaps everything in it).
    pub fn overlaps(&self, other: &Location) -> bool {
        self.path == other.path
            && match (self.lines, other.lines) {
                (Some((a, b)), Some((c, d))) => a <= d && c <= b,
                _ => true,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(Location::parse("src/a.js"), Location { path: "src/a.js", lines: None });
        assert_eq!(Location::parse("src/a.js:12"), Location { path: "src/a.js", lines: Some((12, 12)) });
        assert_eq!(Location::parse("src/a.js:12-14"), Location { path: "src/a.js", lines: Some((12, 14)) });
        assert_eq!(Location::parse("odd:name.js"), Location { path: "odd:name.js", lines: None });
        assert_eq!(Location::parse("a:b:3"), Location { path: "a:b", lines: Some((3, 3)) });
    }

    #[test]
    fn overlap_is_inclusive_and_per_path() {
        let t = Location::parse("src/a.js:12-14");
        assert!(Location::parse("src/a.js:14").overlaps(&t));
        assert!(Location::parse("src/a.js:10-12").overlaps(&t));
        assert!(!Location::parse("src/a.js:15-20").overlaps(&t));
        assert!(!Location::parse("src/a.js:1-11").overlaps(&t));
        assert!(Location::parse("src/a.js").overlaps(&t));
        assert!(Location::parse("src/a.js:3").overlaps(&Location::parse("src/a.js")));
        assert!(!Location::parse("src/b.js:12").overlaps(&t));
    }
}
