//! Secrets in transcripts: a small table of the token and key shapes that show up in
//! coding-agent logs (a command exporting `GITHUB_TOKEN`, a `curl -H "Authorization:
//! Bearer ..."`, a private key printed by `cat`), found by [`scan`] and replaced by
//! [`redact`].
//!
//! What a finding covers is the secret itself, never the words around it
//! (`aws_secret_access_key = ` and `Authorization: Bearer ` stay), and its characters
//! are never quotes or lone backslashes: a match inside a JSON string stays inside it,
//! and its replacement `[REDACTED:<pattern>]` keeps the document valid JSON. (The one
//! pattern that spans lines, a private key block, takes JSON's `\n` escapes whole.)
//!
//! Avoiding false positives: every pattern needs its prefix or keyword, the secret must
//! end where its alphabet ends, and must not continue a word on its left (a JSON escape
//! such as `\n` just before it is not a word); the shapes that could be an identifier
//! must also look random (two of lower case, upper case and digits, and enough distinct
//! characters), and placeholders (`EXAMPLE`, `xxxxxxxx`) are no secrets; a private
//! key block needs a body.

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use regex::bytes::Regex;

/// A secret found: the pattern's name and the byte range the secret takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    pub pattern: &'static str,
    pub offset: usize,
    pub len: usize,
}

impl Finding {
    pub fn end(&self) -> usize {
        self.offset + self.len
    }
}

/// What a match must also satisfy to count.
#[derive(Clone, Copy)]
enum Check {
    /// Nothing beyond the regex (and the placeholder test).
    Shape,
    /// Looks random: two character classes and at least 10 distinct characters.
    Random,
    /// At least 8 distinct characters (AWS key ids are upper case and digits only).
    Distinct,
    /// A private key block with a body (at least 64 base64 characters after the header).
    KeyBody,
    /// A URL's password: anything but a placeholder (`${DB_PASSWORD}`, `<password>`,
    /// `****`, `password`), since passwords need not look random.
    Password,
}

struct Pattern {
    name: &'static str,
    /// Group 1, when there is one, is the secret; otherwise the whole match. A trailing
    /// boundary the regex consumes is outside the group.
    regex: &'static str,
    /// Literals (lower case, compared in any case) of which every match contains at
    /// least one: a text holding none of them is not searched with the regex. No literal
    /// of the table is inside another (see [`candidates`]).
    needs: &'static [&'static str],
    /// The secret must not continue a word on its left.
    left_bounded: bool,
    check: Check,
}

/// The table, most specific first: where two patterns find the same secret, the first wins.
const PATTERNS: &[Pattern] = &[
    Pattern {
        name: "private-key",
        needs: &["-----begin "],
        regex: concat!(
            r"(?-u)-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----",
            // The body: encryption headers, base64, whitespace, JSON's escaped line breaks
            // (taken whole, however often escaped); then the footer, when it is there.
            // A file read through an agent's tool has numbered lines (Claude Code's
            // `Read`: `    12→`, written raw or as `\u2192`;
            // `cat -n`: `    12\t`). First, so that the digits are not taken as base64.
            r"(?:[0-9]+(?:\xE2\x86\x92|\\u2192|\t|\\t)|(?:Proc-Type|DEK-Info):[ A-Za-z0-9,-]*|[A-Za-z0-9+/=]|\s|\\+[nrt])*",
            r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
        ),
        left_bounded: false,
        check: Check::KeyBody,
    },
    Pattern {
        name: "aws-access-key-id",
        needs: &["akia", "asia"],
        regex: r"(?-u)((?:AKIA|ASIA)[A-Z0-9]{16})(?:[^A-Za-z0-9]|$)",
        left_bounded: true,
        check: Check::Distinct,
    },
    Pattern {
        name: "aws-secret-access-key",
        needs: &["secret"],
        regex: concat!(
            // `KEY = value`, `"KEY": "value"`, and `aws configure set KEY value`.
            r#"(?-u)(?i)aws_?secret_?access_?key(?:\\?["'])?(?:\s*[:=]\s*|[ \t]+)(?:\\?["'])?"#,
            r"([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)",
        ),
        left_bounded: false,
        check: Check::Random,
    },
    Pattern {
        name: "github-token",
        needs: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        regex: r"(?-u)(gh[pousr]_[A-Za-z0-9]{36,251})(?:[^A-Za-z0-9_]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "github-pat",
        needs: &["github_pat_"],
        regex: r"(?-u)(github_pat_[A-Za-z0-9_]{22,244})(?:[^A-Za-z0-9_]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "gitlab-token",
        needs: &["glpat-", "gldt-", "glrt-", "glptt-", "glft-", "gloas-"],
        regex: r"(?-u)(gl(?:pat|dt|rt|ptt|ft|oas)-[A-Za-z0-9_-]{20,})(?:[^A-Za-z0-9_-]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "anthropic-key",
        needs: &["sk-"],
        regex: r"(?-u)(sk-ant-[A-Za-z0-9_-]{32,})(?:[^A-Za-z0-9_-]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "openai-key",
        needs: &["sk-"],
        regex: r"(?-u)(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})(?:[^A-Za-z0-9_-]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "slack-token",
        needs: &["xox"],
        regex: r"(?-u)(xox[abprs]-[A-Za-z0-9-]{10,})(?:[^A-Za-z0-9-]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "google-api-key",
        needs: &["aiza"],
        regex: r"(?-u)(AIza[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "stripe-key",
        needs: &["_live_"],
        regex: r"(?-u)((?:sk|rk)_live_[0-9A-Za-z]{24,})(?:[^0-9A-Za-z]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "npm-token",
        needs: &["npm_"],
        regex: r"(?-u)(npm_[A-Za-z0-9]{36})(?:[^A-Za-z0-9]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "huggingface-token",
        needs: &["hf_"],
        regex: r"(?-u)(hf_[A-Za-z0-9]{34,})(?:[^A-Za-z0-9]|$)",
        left_bounded: true,
        check: Check::Random,
    },
    Pattern {
        name: "jwt",
        needs: &["eyj"],
        regex: r"(?-u)(eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})(?:[^A-Za-z0-9_.-]|$)",
        left_bounded: true,
        check: Check::Shape,
    },
    Pattern {
        // The password of a URL: `postgres://user:PASSWORD@host`,
        // `https://oauth2:TOKEN@gitlab.com/...` (a git remote, a database URL).
        name: "url-password",
        needs: &["://"],
        regex: concat!(
            r"(?-u)[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s/?#@:\x22'\\<>]{0,256}:",
            r"([^\s/?#@\x22'\\<>]{1,256})@[A-Za-z0-9\[]",
        ),
        left_bounded: false,
        check: Check::Password,
    },
    Pattern {
        name: "bearer-token",
        needs: &["authorization"],
        regex: concat!(
            r#"(?-u)(?i)authorization(?:\\?["'])?\s*[:=]\s*(?:\\?["'])?\s*bearer\s+"#,
            r"([A-Za-z0-9._~+/=-]{20,})(?:[^A-Za-z0-9._~+/=-]|$)",
        ),
        left_bounded: false,
        check: Check::Random,
    },
];

/// The pattern names, in table order (the order [`count`] reports them in).
pub fn pattern_names() -> impl Iterator<Item = &'static str> {
    PATTERNS.iter().map(|p| p.name)
}

fn compiled() -> &'static [Regex] {
    static COMPILED: OnceLock<Vec<Regex>> = OnceLock::new();
    COMPILED
        .get_or_init(|| PATTERNS.iter().map(|p| Regex::new(p.regex).expect("the secret patterns compile")).collect())
}

/// Every pattern's literals in one automaton (each literal once), and the patterns each
/// literal belongs to.
fn literals() -> &'static (AhoCorasick, Vec<Vec<usize>>) {
    static LITERALS: OnceLock<(AhoCorasick, Vec<Vec<usize>>)> = OnceLock::new();
    LITERALS.get_or_init(|| {
        let mut words: Vec<&str> = PATTERNS.iter().flat_map(|p| p.needs.iter().copied()).collect();
        words.sort_unstable();
        words.dedup();
        let owners = words
            .iter()
            .map(|w| PATTERNS.iter().enumerate().filter(|(_, p)| p.needs.contains(w)).map(|(i, _)| i).collect())
            .collect();
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&words)
            .expect("the secret literals build an automaton");
        (automaton, owners)
    })
}

/// The patterns worth running over `bytes`: those with one of their literals in it.
/// One pass over the text instead of one regex search per pattern, and almost every
/// text of a run holds none of them.
fn candidates(bytes: &[u8]) -> Vec<usize> {
    let (automaton, owners) = literals();
    let mut wanted = vec![false; PATTERNS.len()];
    // Each search resumes one byte after the last match's start, so a literal that
    // overlaps another is still found: a search reports the match that ends first, and
    // since no literal is inside another, the one it reports starts no later than any
    // other it could hide. A search that can skip ahead is far quicker than an
    // overlapping walk of every byte.
    let mut at = 0;
    while let Some(found) = automaton.find(aho_corasick::Input::new(bytes).span(at..bytes.len())) {
        for &owner in &owners[found.pattern().as_usize()] {
            wanted[owner] = true;
        }
        at = found.start() + 1;
    }
    wanted.iter().enumerate().filter(|(_, w)| **w).map(|(i, _)| i).collect()
}

/// Every secret in `bytes`, in order of offset, none overlapping.
pub fn scan(bytes: &[u8]) -> Vec<Finding> {
    let candidates = candidates(bytes);
    if candidates.is_empty() {
        return Vec::new();
    }
    scan_with(bytes, candidates)
}

/// [`scan`] with these patterns (table indexes, ascending).
fn scan_with(bytes: &[u8], patterns: impl IntoIterator<Item = usize>) -> Vec<Finding> {
    // (offset, table index, len)
    let mut found: Vec<(usize, usize, usize)> = Vec::new();
    for index in patterns {
        let (pattern, regex) = (&PATTERNS[index], &compiled()[index]);
        let mut at = 0;
        while at <= bytes.len() {
            let Some(caps) = regex.captures_at(bytes, at) else { break };
            let whole = caps.get(0).expect("group 0 is the match");
            let secret = caps.get(1).unwrap_or(whole);
            let span = &bytes[secret.start()..secret.end()];
            let ok = (!pattern.left_bounded || left_ok(bytes, secret.start())) && passes(pattern.check, span);
            if ok {
                found.push((secret.start(), index, secret.len()));
                at = secret.end().max(at + 1);
            } else {
                // A secret may start inside a rejected match (`task-sk-...`): look again
                // one byte on.
                at = whole.start() + 1;
            }
        }
    }
    found.sort_unstable();
    let mut out: Vec<Finding> = Vec::with_capacity(found.len());
    for (offset, index, len) in found {
        if out.last().is_some_and(|last| offset < last.end()) {
            continue;
        }
        out.push(Finding { pattern: PATTERNS[index].name, offset, len });
    }
    out
}

/// `bytes` with every secret replaced by `[REDACTED:<pattern>]`, and how many there were.
pub fn redact(bytes: &[u8]) -> (Vec<u8>, usize) {
    let findings = scan(bytes);
    (replace(bytes, &findings), findings.len())
}

/// `bytes` with the findings (from [`scan`] of the same bytes) replaced.
pub fn replace(bytes: &[u8], findings: &[Finding]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    for f in findings {
        out.extend_from_slice(&bytes[at..f.offset]);
        out.extend_from_slice(b"[REDACTED:");
        out.extend_from_slice(f.pattern.as_bytes());
        out.push(b']');
        at = f.end();
    }
    out.extend_from_slice(&bytes[at..]);
    out
}

/// [`redact`] on text (the secrets and their replacements are ASCII, so the result is
/// still UTF-8).
pub fn redact_str(text: &str) -> (String, usize) {
    let (bytes, n) = redact(text.as_bytes());
    (String::from_utf8(bytes).expect("redaction replaces ASCII with ASCII"), n)
}

/// Findings counted by pattern, in table order, patterns without any left out.
pub fn count(findings: &[Finding]) -> Vec<(&'static str, usize)> {
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    for name in pattern_names() {
        let n = findings.iter().filter(|f| f.pattern == name).count();
        if n > 0 {
            counts.push((name, n));
        }
    }
    counts
}

/// Adds `more` to `counts`, keeping table order.
pub fn add_counts(counts: &mut Vec<(&'static str, usize)>, more: &[(&'static str, usize)]) {
    for &(name, n) in more {
        match counts.iter_mut().find(|(c, _)| *c == name) {
            Some((_, total)) => *total += n,
            None => counts.push((name, n)),
        }
    }
    let order = |name: &str| pattern_names().position(|p| p == name).unwrap_or(usize::MAX);
    counts.sort_by_key(|(name, _)| order(name));
}

/// The secret does not continue a word: the byte before it is no letter, digit or `_`,
/// unless that letter ends a JSON escape (`\n`, `\t`, `\u0027`).
fn left_ok(bytes: &[u8], start: usize) -> bool {
    let Some(&prev) = start.checked_sub(1).and_then(|i| bytes.get(i)) else {
        return true;
    };
    if !(prev.is_ascii_alphanumeric() || prev == b'_') {
        return true;
    }
    if start >= 2 && bytes[start - 2] == b'\\' && matches!(prev, b'n' | b'r' | b't' | b'b' | b'f') {
        return true;
    }
    start >= 6
        && bytes[start - 6] == b'\\'
        && bytes[start - 5] == b'u'
        && bytes[start - 4..start].iter().all(u8::is_ascii_hexdigit)
}

/// Documentation examples and fill-in-the-blanks, not secrets.
fn placeholder(span: &[u8]) -> bool {
    let lower = span.to_ascii_lowercase();
    if lower.windows(7).any(|w| w == b"example") {
        return true;
    }
    // Eight of one character in a row (`xxxxxxxx`, `00000000`, `AAAAAAAA`).
    span.windows(8).any(|w| w.iter().all(|&b| b == w[0]))
}

fn distinct(span: &[u8]) -> usize {
    let mut seen = [false; 256];
    span.iter().filter(|&&b| !std::mem::replace(&mut seen[b as usize], true)).count()
}

fn passes(check: Check, span: &[u8]) -> bool {
    match check {
        Check::Shape => !placeholder(span),
        Check::Distinct => !placeholder(span) && distinct(span) >= 8,
        Check::Random if placeholder(span) => false,
        Check::Random => {
            let classes = [
                span.iter().any(u8::is_ascii_lowercase),
                span.iter().any(u8::is_ascii_uppercase),
                span.iter().any(u8::is_ascii_digit),
            ];
            classes.iter().filter(|&&c| c).count() >= 2 && distinct(span) >= 10
        }
        Check::Password => {
            let lower = span.to_ascii_lowercase();
            let named = [&b"password"[..], b"passwd", b"pass", b"pwd", b"secret", b"token"].contains(&lower.as_slice());
            let variable = span.starts_with(b"$") || span.starts_with(b"%") || span.starts_with(b"{");
            !(named || variable || span.iter().all(|&b| b == b'*' || b == b'x' || b == b'X') || placeholder(span))
        }
        // Not [`placeholder`]: a key's DER body has runs of `A` (OpenSSH keys always do).
        Check::KeyBody => {
            // The body: what follows the header's closing dashes, up to any footer.
            let after_header = span.windows(5).skip(5).position(|w| w == b"-----").map_or(span.len(), |p| p + 10);
            let body = &span[after_header.min(span.len())..];
            let body = match body.windows(9).position(|w| w == b"-----END ") {
                Some(p) => &body[..p],
                None => body,
            };
            body.iter().filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/')).count() >= 64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The fake secrets are split with `concat!` so the source text itself carries no
    // token a push-protection scanner would stop.
    const AWS_ID: &str = concat!("AKIA", "UJZDEGXDNCF32EPF");
    const AWS_SECRET: &str = concat!("2hpChYgCfrL1spNxnyVm", "ihA+2O76UMFxFkM+R5Kj");
    const GHP: &str = concat!("ghp", "_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");
    const GHO: &str = concat!("gho", "_QedUStPKR0CsTy4Qwb8DwkNhFdnXsiVpzz63");
    const GITHUB_PAT: &str =
        concat!("github", "_pat_FfkCzJr4i0B3JrTAwR4y9o_jfljoQoaF1LlqsajAIxNKu8iS2G8NPRVdD53X83RZJzzzzgEOzdmenCkhvM");
    const OPENAI_PROJ: &str =
        concat!("sk-", "proj-gnatmUdjAWtGSU8po_799NksnRH9ucAUsdMlHUvTT3BlbkFJCQCyEZDz-TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3Q");
    const OPENAI: &str = concat!("sk-", "fZ8UzDzV8fUkkibjL5DZT3BlbkFJPjN0MEQ7wjJJibaZUPgH");
    const ANTHROPIC: &str = concat!(
        "sk-",
        "ant-api03-r3yBdGBLEPH1qhT61qtc4xatws8phP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY_uCu3ZR1zTOlUcR64cXQAA"
    );
    const SLACK: &str = concat!("xox", "b-894811311440-2426462889751-rdZSlB5er8bOfZqfM2oeq3hD");
    const GOOGLE: &str = concat!("AIza", "bR1IqfEouHgxzNNAL5wIScGebcy8F5n3-YN");
    const STRIPE: &str = concat!("sk_", "live_Snovm14TUOizwd1iaeOV4qBk");
    const STRIPE_RK: &str = concat!("rk_", "live_dfQ1y3GQsMpSscDlkrCaqx9v");
    const NPM: &str = concat!("npm", "_Jupc94tnwlavyfErGPmpGXafq0fjzLczbttO");
    const HF: &str = concat!("hf", "_ofLHWjQTYMyWuUFjsUNPjcTGOBUSZGiHWG");
    const JWT: &str = concat!(
        "eyJhbGciOiAiSFMyNTYiLCAidHlwIjogIkpXVCJ9.",
        "eyJzdWIiOiAiMTIzNDU2Nzg5MCIsICJuYW1lIjogIkpvIiwgImlhdCI6IDE1MTYyMzkwMjJ9.",
        "cDkdfrUnW5gcF_Ha6ili8GjHEAD6-Wj9KfzjsQGMrb9"
    );
    const BEARER: &str = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg";

    /// A PEM block (a made-up body), lines joined with `sep`.
    fn private_key(sep: &str) -> String {
        let body = [
            "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
            "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
            "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo",
        ];
        let mut lines = vec![concat!("-----BEGIN RSA ", "PRIVATE KEY-----")];
        lines.extend(body);
        lines.push(concat!("-----END RSA ", "PRIVATE KEY-----"));
        lines.join(sep)
    }

    fn found(text: &str) -> Vec<(&'static str, String)> {
        scan(text.as_bytes()).iter().map(|f| (f.pattern, text[f.offset..f.end()].to_string())).collect()
    }

    fn one(line: &str, pattern: &'static str, secret: &str) {
        assert_eq!(found(line), vec![(pattern, secret.to_string())], "in {line:?}");
    }

    /// The literal filter only skips work: over every fixture of the repository (real
    /// logs, constructed secrets), the filtered scan finds what all the regexes find.
    #[test]
    fn the_literal_filter_loses_no_finding() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        let mut stack = vec![root];
        let (mut files, mut findings) = (0, 0);
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let bytes = std::fs::read(&path).unwrap();
                let all = scan_with(&bytes, 0..PATTERNS.len());
                assert_eq!(scan(&bytes), all, "{}", path.display());
                files += 1;
                findings += all.len();
            }
        }
        assert!(files > 100, "{files} files, {findings} findings");
        // And over one secret of every pattern, in upper and lower case contexts.
        let gitlab = concat!("glpat", "-Xk3vT9qLm2Rw8YzBn4Hc");
        let lines = [
            format!("export AWS_ACCESS_KEY_ID={AWS_ID}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}"),
            format!("git clone https://{GHP}@github.com/a/b.git; GH_TOKEN={GHO}; T='{GITHUB_PAT}'"),
            format!("GITLAB_TOKEN={gitlab} OPENAI_API_KEY={OPENAI_PROJ} k={OPENAI} x-api-key: {ANTHROPIC}"),
            format!("SLACK={SLACK} key={GOOGLE}&a=1 {STRIPE} {STRIPE_RK} {NPM} --token {HF}"),
            format!("Cookie: session={JWT}; AUTHORIZATION: BEARER {BEARER}"),
            "psql postgres://admin:Tr0ub4dor3x@db.internal:5432/app".to_string(),
            format!("$ cat key\n{}\n", private_key("\n")),
        ];
        let text = lines.join("\n");
        let all = scan_with(text.as_bytes(), 0..PATTERNS.len());
        assert_eq!(scan(text.as_bytes()), all);
        let mut names: Vec<&str> = all.iter().map(|f| f.pattern).collect();
        names.sort_unstable();
        names.dedup();
        let mut every: Vec<&str> = pattern_names().collect();
        every.sort_unstable();
        assert_eq!(names, every, "one finding of every pattern");
    }

    #[test]
    fn no_literal_is_inside_another() {
        let mut words: Vec<&str> = PATTERNS.iter().flat_map(|p| p.needs.iter().copied()).collect();
        words.sort_unstable();
        words.dedup();
        for (i, a) in words.iter().enumerate() {
            assert_eq!(*a, a.to_ascii_lowercase(), "{a} is lower case");
            for (j, b) in words.iter().enumerate() {
                assert!(i == j || !b.contains(a), "{a} is inside {b}");
            }
        }
    }

    #[test]
    fn each_pattern_in_a_realistic_line() {
        one(&format!("export AWS_ACCESS_KEY_ID={AWS_ID}"), "aws-access-key-id", AWS_ID);
        let sts = AWS_ID.replacen("AKIA", "ASIA", 1);
        one(&format!("[default]\naws_access_key_id = {sts}\n"), "aws-access-key-id", &sts);
        one(&format!("aws_secret_access_key = {AWS_SECRET}\n"), "aws-secret-access-key", AWS_SECRET);
        one(&format!("export AWS_SECRET_ACCESS_KEY=\"{AWS_SECRET}\""), "aws-secret-access-key", AWS_SECRET);
        one(&format!("{{\"aws_secret_access_key\": \"{AWS_SECRET}\"}}"), "aws-secret-access-key", AWS_SECRET);
        one(&format!("git clone https://{GHP}@github.com/acme/app.git"), "github-token", GHP);
        one(&format!("GH_TOKEN={GHO} gh pr list"), "github-token", GHO);
        one(&format!("export GITHUB_TOKEN='{GITHUB_PAT}'"), "github-pat", GITHUB_PAT);
        one(&format!("OPENAI_API_KEY={OPENAI_PROJ} python run.py"), "openai-key", OPENAI_PROJ);
        one(&format!("client = OpenAI(api_key=\"{OPENAI}\")"), "openai-key", OPENAI);
        one(
            &format!("curl -H 'x-api-key: {ANTHROPIC}' https://api.anthropic.com/v1/messages"),
            "anthropic-key",
            ANTHROPIC,
        );
        one(&format!("SLACK_BOT_TOKEN={SLACK}"), "slack-token", SLACK);
        one(
            &format!("https://maps.googleapis.com/maps/api/geocode/json?key={GOOGLE}&address=x"),
            "google-api-key",
            GOOGLE,
        );
        one(&format!("stripe.api_key = \"{STRIPE}\""), "stripe-key", STRIPE);
        one(&format!("STRIPE_KEY={STRIPE_RK}"), "stripe-key", STRIPE_RK);
        one(&format!("//registry.npmjs.org/:_authToken={NPM}"), "npm-token", NPM);
        one(&format!("huggingface-cli login --token {HF}"), "huggingface-token", HF);
        one(&format!("Cookie: session={JWT}; Path=/"), "jwt", JWT);
        one(&format!("curl -H \"Authorization: Bearer {BEARER}\" https://api.example.org"), "bearer-token", BEARER);
        one(&format!("headers = {{'Authorization': 'Bearer {BEARER}'}}"), "bearer-token", BEARER);
        let key = private_key("\n");
        one(&format!("$ cat ~/.ssh/id_rsa\n{key}\n$ "), "private-key", &key);
        let openssh = [
            concat!("-----BEGIN OPENSSH ", "PRIVATE KEY-----"),
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
            "QyNTUxOQAAACBh3uN5kVpQKbLWXq0T2d8l1rU0ZQ7nB2g4v8yXf1cWkQAAAJg4m2xSOJts",
            concat!("-----END OPENSSH ", "PRIVATE KEY-----"),
        ]
        .join("\r\n");
        one(
            &format!("{{\"content\": {}}}", serde_json::to_string(&openssh).unwrap()),
            "private-key",
            &openssh.replace("\r\n", "\\r\\n"),
        );
    }

    #[test]
    fn the_red_teams_secrets() {
        // A key read through Claude Code's `Read`: numbered lines, the arrow raw (tool
        // output, messages) or escaped (the JSON of the source log).
        let numbered: Vec<String> =
            private_key("\n").lines().enumerate().map(|(i, l)| format!("{:>6}\u{2192}{l}", i + 1)).collect();
        let read = numbered.join("\n");
        let found_raw = found(&read);
        assert_eq!(found_raw.len(), 1, "{found_raw:?}");
        assert!(found_raw[0].1.contains("-----END RSA"), "{found_raw:?}");
        let escaped = serde_json::to_string(&read).unwrap().replace('\u{2192}', "\\u2192");
        let found_escaped = found(&escaped);
        assert_eq!(found_escaped.len(), 1, "{found_escaped:?}");
        assert!(found_escaped[0].1.contains("-----END RSA"), "{found_escaped:?}");
        let (redacted, n) = redact_str(&read);
        assert_eq!(n, 1);
        assert!(!redacted.contains("MIIEow") && !redacted.contains("LxoS2t"), "{redacted}");
        // Passwords in URLs: a database URL, a git remote with a token that has no
        // pattern of its own.
        one("DATABASE_URL=postgres://app:Tr0ub4dor&3@db.internal:5432/app", "url-password", "Tr0ub4dor&3");
        one(
            "git remote add origin https://oauth2:s3cr3tT0ken99@gitlab.com/acme/app.git",
            "url-password",
            "s3cr3tT0ken99",
        );
        one("mysql://root:hunter2@127.0.0.1/db", "url-password", "hunter2");
        // ... but a token with a pattern is named by it.
        one(&format!("https://x-access-token:{GHP}@github.com/acme/app"), "github-token", GHP);
        for placeholder in [
            "postgres://user:password@localhost/db",
            "postgres://user:${DB_PASSWORD}@localhost/db",
            "https://user:****@example.org",
            "https://host:8080/path@x",
            "see http://example.org/a:b@c",
            "git@github.com:acme/app.git",
        ] {
            assert_eq!(found(placeholder), vec![], "{placeholder}");
        }
        // `aws configure set` takes the key after a space.
        one(&format!("aws configure set aws_secret_access_key {AWS_SECRET}"), "aws-secret-access-key", AWS_SECRET);
        let glpat = concat!("glpat", "-x9Kq2vBz7RtWm4Np8Ls3");
        one(&format!("GITLAB_TOKEN={glpat} glab mr list"), "gitlab-token", glpat);
    }

    #[test]
    fn the_most_specific_pattern_wins() {
        // An Anthropic key is also an `sk-` key; a JWT after `Bearer` is also a bearer token.
        one(&format!("ANTHROPIC_API_KEY={ANTHROPIC}"), "anthropic-key", ANTHROPIC);
        one(&format!("Authorization: Bearer {JWT}"), "jwt", JWT);
        let two = format!("a={GHP},b={NPM}");
        assert_eq!(found(&two), vec![("github-token", GHP.to_string()), ("npm-token", NPM.to_string())]);
    }

    #[test]
    fn nothing_in_ordinary_text_hashes_or_base64() {
        let blake3 = blake3::hash(b"x").to_hex().to_string();
        let b64 = |b: &[u8]| {
            // Standard base64, by hand (no dependency for a test).
            const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut out = String::new();
            for c in b.chunks(3) {
                let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
                for i in 0..4 {
                    out.push(if i <= c.len() { A[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
                }
            }
            out
        };
        let random: Vec<u8> = (0u32..96).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let texts = [
            "The quick brown fox jumps over the lazy dog. Run `pytest -k test_risk-assessment` again.".to_string(),
            format!("blake3 {blake3}"),
            "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
            "commit 02e5ab2d6c1b0f1c8e0b4a5f3d2c1b0a9f8e7d6c (HEAD -> main)".into(),
            "uuid 4d5611e5-241a-462a-8d15-5122611a9569, toolUseID task-output-waiting-1770927708311".into(),
            format!("data: {}", b64(b"an ordinary sentence, encoded because a tool likes base64 output")),
            format!("blob {}", b64(&random)),
            "from huggingface_hub import hf_hub_download; npm_config_cache=/tmp/npm; session_live_test.exs".into(),
            "disk-usage-report-generator-for-every-mounted-volume and the task-notification-with-a-long-name".into(),
            "sk-my-long-kebab-case-identifier-name-here; github_pat_is_a_prefix_but_not_a_token_here".into(),
            "\"aws_access_key_id\":null,\"aws_secret_access_key\":null,\"aws_region_name\":null".into(),
            "curl -H \"Authorization: Bearer $GITHUB_TOKEN\" -H 'Authorization: Bearer YOUR_ACCESS_TOKEN_HERE'".into(),
            // Documentation's examples and placeholders.
            concat!("AKIA", "IOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY").into(),
            concat!("gh", "p_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx, sk-", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx").into(),
            // A header alone (code that looks for one) is no key.
            concat!("if line.startswith('-----BEGIN RSA ", "PRIVATE KEY-----'):\n    return parse(line)").into(),
            "eyJhbGciOiJIUzI1NiJ9 is one base64 JSON object, not a token".into(),
        ];
        for text in texts {
            assert_eq!(found(&text), vec![], "in {text:?}");
        }
    }

    #[test]
    fn inside_a_word_is_no_secret_but_after_a_json_escape_is() {
        assert_eq!(found(&format!("x{GHP}")), vec![]);
        assert_eq!(found(&format!("{NPM}x")), vec![]);
        assert_eq!(found(&format!("{AWS_ID}0")), vec![]);
        // `\n` and `\u0027` in a JSON document: the letter before the token ends an escape.
        one(&format!("\"line one\\n{GHP}\""), "github-token", GHP);
        one(&format!("\"\\u0027{GHP}\\u0027\""), "github-token", GHP);
    }

    #[test]
    fn redact_keeps_a_json_line_valid() {
        let command = format!(
            "export GITHUB_TOKEN={GHP} && curl -H \"Authorization: Bearer {BEARER}\" -d '{{\"key\": \"{OPENAI}\"}}'"
        );
        let value = serde_json::json!({
            "type": "tool_use",
            "input": {"command": command},
            "output": format!("id_rsa:\n{}\n", private_key("\n")),
            // Escaped twice: a JSON document inside a string.
            "nested": serde_json::to_string(&serde_json::json!({"pem": private_key("\n"), "t": HF})).unwrap(),
        });
        let line = serde_json::to_string(&value).unwrap();
        let (redacted, n) = redact(line.as_bytes());
        assert_eq!(n, 6);
        let back: serde_json::Value = serde_json::from_slice(&redacted).expect("still JSON");
        let text = String::from_utf8(redacted.clone()).unwrap();
        for secret in [GHP, BEARER, OPENAI, HF, "MIIEowIBAAKCAQEA"] {
            assert!(!text.contains(secret), "{secret} left in {text}");
        }
        assert_eq!(
            back["input"]["command"],
            "export GITHUB_TOKEN=[REDACTED:github-token] && curl -H \"Authorization: Bearer [REDACTED:bearer-token]\" \
             -d '{\"key\": \"[REDACTED:openai-key]\"}'"
        );
        assert_eq!(back["output"], "id_rsa:\n[REDACTED:private-key]\n");
        let nested: serde_json::Value = serde_json::from_str(back["nested"].as_str().unwrap()).expect("nested JSON");
        assert_eq!(nested, serde_json::json!({"pem": "[REDACTED:private-key]", "t": "[REDACTED:huggingface-token]"}));
        // Redacting again finds nothing; text without secrets comes back unchanged.
        assert_eq!(redact(&redacted), (redacted.clone(), 0));
        assert_eq!(redact(b"{\"a\": \"b\"}"), (b"{\"a\": \"b\"}".to_vec(), 0));
    }

    #[test]
    fn a_cut_off_key_in_a_json_string_stays_in_it() {
        // The block is cut off and the string closes; a footer further on must not be reached.
        let head = concat!("-----BEGIN ", "PRIVATE KEY-----");
        let line = format!(
            "{{\"a\": \"{head}\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\\nMzEfYyji\", \
             \"b\": \"{}\"}}",
            concat!("-----END ", "PRIVATE KEY-----")
        );
        let (redacted, n) = redact(line.as_bytes());
        assert_eq!(n, 1);
        let back: serde_json::Value = serde_json::from_slice(&redacted).unwrap();
        assert_eq!(back["a"], "[REDACTED:private-key]");
        assert_eq!(back["b"], concat!("-----END ", "PRIVATE KEY-----"));
    }

    #[test]
    fn counts_in_table_order() {
        let text = format!("{HF} {GHP} {HF} {AWS_ID}");
        assert_eq!(
            count(&scan(text.as_bytes())),
            vec![("aws-access-key-id", 1), ("github-token", 1), ("huggingface-token", 2)]
        );
        let mut counts = vec![("huggingface-token", 1)];
        add_counts(&mut counts, &[("github-token", 2), ("huggingface-token", 1)]);
        assert_eq!(counts, vec![("github-token", 2), ("huggingface-token", 2)]);
        let names: Vec<&str> = pattern_names().collect();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(names.len(), 16);
        assert_eq!(unique, names);
        for name in names {
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'), "{name}: no quote or backslash");
        }
    }

    /// The project's real fixtures were redacted by their authors: nothing in them (the
    /// members of an Inspect `.eval` read too) is a secret.
    #[test]
    fn nothing_in_the_real_fixtures() {
        let root = crate::testing::fixture("");
        let mut folders = vec![root.clone()];
        let mut files = Vec::new();
        while let Some(dir) = folders.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        files.sort();
        assert!(files.len() >= 50, "the fixtures are there: {}", files.len());
        let mut findings = Vec::new();
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let mut parts = vec![(String::new(), bytes.clone())];
            if bytes.starts_with(b"PK\x03\x04") {
                let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
                for i in 0..zip.len() {
                    let mut member = zip.by_index(i).unwrap();
                    let mut b = Vec::new();
                    std::io::Read::read_to_end(&mut member, &mut b).unwrap();
                    parts.push((member.name().unwrap().to_string(), b));
                }
            }
            for (member, b) in parts {
                for f in scan(&b) {
                    findings.push(format!("{}:{member}: {} at {}", path.display(), f.pattern, f.offset));
                }
            }
        }
        assert_eq!(findings, Vec::<String>::new());
    }
}
