//! Text the packages carry: timestamps, source code for snapshots and patches, test
//! logs, task specifications and reports. Everything is drawn from the caller's
//! stream, so it is as deterministic as the rest.

use std::fmt::Write;

use crate::model::{Lang, Repo, Task};
use crate::rng::Prng;

/// RFC 3339 UTC with milliseconds, e.g. `2026-05-02T10:00:22.413Z`.
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Milliseconds since the epoch of 2026-05-01T00:00:00Z.
pub const EPOCH_2026_05_01: i64 = 1_777_593_600_000;

const WORDS: &[&str] = &[
    "value", "input", "item", "entry", "record", "result", "buffer", "key", "name", "limit", "count", "offset", "line",
    "field", "row", "token", "state", "opts", "ctx", "req", "resp", "data", "items", "parts", "cursor", "header",
    "body", "user", "expires", "retries", "payload", "source", "target",
];
const VERBS: &[&str] = &[
    "parse",
    "load",
    "check",
    "render",
    "resolve",
    "split",
    "merge",
    "encode",
    "decode",
    "flush",
    "lookup",
    "apply",
    "normalize",
    "collect",
    "build",
    "validate",
    "emit",
    "read",
    "write",
    "fetch",
    "update",
];
const CASES: &[&str] = &[
    "empty_input",
    "quoted_delimiter",
    "trailing_newline",
    "unicode_name",
    "large_batch",
    "zero_limit",
    "negative_offset",
    "missing_field",
    "duplicate_key",
    "nested_quotes",
    "expired_token",
    "retry_after",
    "range_end",
    "concurrent_update",
    "invalid_port",
    "default_locale",
    "escaped_html",
    "null_cursor",
    "round_trip",
    "max_length",
    "whitespace_only",
    "mixed_case",
    "utc_offset",
    "leap_day",
    "crlf_lines",
    "bom_prefix",
    "long_path",
    "relative_path",
    "sorted_output",
    "stable_order",
    "timeout_zero",
];
const ERRORS: &[&str] = &["ValueError", "KeyError", "TypeError", "ParseError", "TimeoutError", "ValidationError"];

pub fn test_case_name(rng: &mut Prng) -> String {
    rng.pick(CASES).to_string()
}

pub fn camel(s: &str) -> String {
    s.split(['_', '-', ' '])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// One plausible line of source code.
pub fn code_line(rng: &mut Prng, lang: Lang, out: &mut String) {
    let a = *rng.pick(WORDS);
    let b = *rng.pick(WORDS);
    let v = *rng.pick(VERBS);
    let n = rng.int(0, 512);
    let e = *rng.pick(ERRORS);
    let indent = "    ".repeat(rng.int(0, 3) as usize);
    let body = match lang {
        Lang::Python => match rng.index(12) {
            0 => format!("def {v}_{a}({b}, {a}=None):"),
            1 => format!("if {a} is None:"),
            2 => format!("return {b}"),
            3 => format!("{a} = {b}.get(\"{a}\", {n})"),
            4 => format!("for {a} in {b}:"),
            5 => format!("{b}.append({v}({a}))"),
            6 => format!("raise {e}(f\"cannot {v} {a}: {{{b}!r}}\")"),
            7 => format!("log.debug(\"{v} %s\", {a})"),
            8 => format!("# {v} the {a} before the {b} is used"),
            9 => format!("if len({a}) > {n}:"),
            10 => String::new(),
            _ => format!("{a}, {b} = {v}({a}), {n}"),
        },
        Lang::JavaScript => match rng.index(12) {
            0 => format!("function {v}{}({a}, {b}) {{", camel(a)),
            1 => format!("if ({a} == null) {{"),
            2 => format!("return {b};"),
            3 => format!("const {a} = {b}.{a} ?? {n};"),
            4 => format!("for (const {a} of {b}) {{"),
            5 => format!("{b}.push({v}({a}));"),
            6 => format!("throw new Error(`cannot {v} {a}: ${{{b}}}`);"),
            7 => "}".to_string(),
            8 => format!("// {v} the {a} before the {b} is used"),
            9 => format!("if ({a}.length > {n}) {{"),
            10 => String::new(),
            _ => format!("let {a} = await {v}({b}, {{ limit: {n} }});"),
        },
        Lang::Rust => match rng.index(12) {
            0 => format!("pub fn {v}_{a}({b}: &str) -> Result<{}, Error> {{", camel(a)),
            1 => format!("if {a}.is_empty() {{"),
            2 => format!("return Ok({b});"),
            3 => format!("let {a} = {b}.get(\"{a}\").copied().unwrap_or({n});"),
            4 => format!("for {a} in {b}.iter() {{"),
            5 => format!("{b}.push({v}({a})?);"),
            6 => format!("return Err(Error::{}(format!(\"cannot {v} {a}: {{{b}:?}}\")));", camel(e)),
            7 => "}".to_string(),
            8 => format!("// {v} the {a} before the {b} is used"),
            9 => format!("if {a}.len() > {n} {{"),
            10 => String::new(),
            _ => format!("let ({a}, {b}) = ({v}(&{a})?, {n});"),
        },
        Lang::Go => match rng.index(12) {
            0 => format!("func {}{}({a} string) ({b} int, err error) {{", camel(v), camel(a)),
            1 => format!("if {a} == \"\" {{"),
            2 => format!("return {b}, nil"),
            3 => format!("{a} := {b}[\"{a}\"]"),
            4 => format!("for _, {a} := range {b} {{"),
            5 => format!("{b} = append({b}, {v}({a}))"),
            6 => format!("return 0, fmt.Errorf(\"cannot {v} {a}: %w\", err)"),
            7 => "}".to_string(),
            8 => format!("// {v} the {a} before the {b} is used"),
            9 => format!("if len({a}) > {n} {{"),
            10 => String::new(),
            _ => format!("{a}, err := {v}({b})"),
        },
    };
    if body.is_empty() {
        out.push('\n');
    } else {
        let _ = writeln!(out, "{indent}{body}");
    }
}

/// `artifacts/task-spec.md`: identical for every episode of a task.
pub fn task_spec(rng: &mut Prng, repo: &Repo, task: &Task) -> String {
    let mut s = String::with_capacity(4096);
    let _ = writeln!(s, "# Task {}\n", task.id);
    let _ = writeln!(s, "Repository: {} at commit `{}` ({:?}).", repo.url, task.commit, repo.lang);
    let _ = writeln!(s, "Family: {}. Cluster: {}.\n", task.family, task.cluster);
    let _ = writeln!(s, "## Problem\n\n{}.\n", task.summary);
    for _ in 0..rng.int(2, 5) {
        let _ = writeln!(
            s,
            "When the {} {} is {} the {} step {} instead of {}. Users reported this in issue #{}; \
             the behaviour is covered only partially by the existing tests in `{}`.\n",
            task.field,
            rng.pick(WORDS),
            rng.pick(&["empty", "quoted", "at the end of a range", "shared between requests", "very large"]),
            rng.pick(VERBS),
            rng.pick(&["silently succeeds", "returns a generic error", "drops the last element", "hangs"]),
            rng.pick(&["failing fast", "returning a specific error", "keeping every element", "returning"]),
            rng.int(10, 4000),
            repo.test_files[task.focus],
        );
    }
    let _ = writeln!(s, "## Requirements\n");
    for (id, text) in &task.requirements {
        let _ = writeln!(s, "- **{id}** {text}.");
    }
    let _ = writeln!(s, "\n## Reproduction\n\n```\n{}\n```\n", probe_command(repo, task));
    let _ = writeln!(s, "Failing tests on the unmodified repository:\n");
    for t in &task.bug_tests {
        let _ = writeln!(s, "- `{t}`");
    }
    let _ = writeln!(
        s,
        "\n## Acceptance\n\nThe hidden evaluation runs the full suite plus held-out tests for each requirement. \
         Budget: {} actions.",
        task.actions_max
    );
    s
}

pub fn probe_command(repo: &Repo, task: &Task) -> String {
    let test = &repo.test_files[task.focus];
    match repo.lang {
        Lang::Python => format!("pytest -q {test} -k {}", task.field),
        Lang::JavaScript => format!("npx mocha {test} --grep {}", task.field),
        Lang::Rust => format!("cargo test --test {} {}", repo.modules[task.focus], task.field),
        Lang::Go => format!("go test ./{}/... -run {}", repo.modules[task.focus], camel(task.field)),
    }
}

pub fn suite_command(repo: &Repo) -> &'static str {
    match repo.lang {
        Lang::Python => "pytest",
        Lang::JavaScript => "npm test",
        Lang::Rust => "cargo test",
        Lang::Go => "go test ./...",
    }
}

/// `artifacts/repo-snapshot.txt`: the repository at the task's commit, identical for
/// every episode of the task.
pub fn snapshot(rng: &mut Prng, repo: &Repo, task: &Task) -> String {
    let mut s = String::with_capacity(64 * 1024);
    let _ = writeln!(s, "# snapshot of {} at {}\n# files: {}\n", repo.url, task.commit, repo.files.len() * 2);
    for (i, f) in repo.files.iter().enumerate() {
        let _ = writeln!(s, "==> {} ({} lines) <==", f.path, f.lines);
        // Every file in full for the faulty module, the head of the others.
        let n = if i == task.focus { f.lines } else { f.lines.min(rng.int(20, 60) as u32) };
        for _ in 0..n {
            code_line(rng, repo.lang, &mut s);
        }
        if n < f.lines {
            let _ = writeln!(s, "... ({} more lines)", f.lines - n);
        }
        s.push('\n');
    }
    for t in &repo.test_files {
        let _ = writeln!(s, "==> {t} <==");
        for _ in 0..rng.int(10, 30) {
            code_line(rng, repo.lang, &mut s);
        }
        s.push('\n');
    }
    s
}

/// Output of a test run in the repository's framework, about `target` bytes long.
/// `failing` tests fail; `timeout_ms` cuts the run off.
pub fn test_log(
    rng: &mut Prng,
    repo: &Repo,
    task: &Task,
    failing: &[&str],
    timeout_ms: Option<u64>,
    target: usize,
) -> String {
    let mut s = String::with_capacity(target + 4096);
    let tests = &repo.tests;
    let cases_target = target * 7 / 10;
    let mut passed = 0usize;
    let mut failed: Vec<String> = Vec::new();
    match repo.lang {
        Lang::Python => {
            let _ = writeln!(s, "============================= test session starts ==============================");
            let _ = writeln!(s, "platform linux -- Python 3.12.3, pytest-8.2.1, pluggy-1.5.0");
            let _ = writeln!(s, "rootdir: /workspace/{}\ncollected {} items\n", repo.name, tests.len() * 4);
        }
        Lang::JavaScript => {
            let _ = writeln!(s, "> {}@1.4.2 test\n> mocha --recursive test\n", repo.name);
        }
        Lang::Rust => {
            let _ = writeln!(s, "   Compiling {} v0.3.1 (/workspace/{})", repo.name, repo.name);
            let _ = writeln!(s, "    Finished `test` profile [unoptimized + debuginfo] target(s) in 14.21s");
            let _ = writeln!(s, "     Running unittests src/lib.rs\n\nrunning {} tests", tests.len() * 4);
        }
        Lang::Go => {}
    }
    let mut i = 0usize;
    while s.len() < cases_target || i < tests.len() {
        let name = &tests[i % tests.len()];
        let round = i / tests.len();
        let fail = round == 0 && failing.iter().any(|f| f == name);
        let ms = rng.int(0, 40);
        let param = if round == 0 { String::new() } else { format!("[case-{round}]") };
        match repo.lang {
            Lang::Python => {
                let pct = (i * 100 / (tests.len() * 4).max(1)).min(100);
                let status = if fail { "FAILED" } else { "PASSED" };
                let _ = writeln!(
                    s,
                    "{name}{param} {status}{:>w$}[{pct:>3}%]",
                    "",
                    w = 70usize.saturating_sub(name.len() + param.len() + 7).max(1)
                );
            }
            Lang::JavaScript => {
                let mark = if fail { "  1) " } else { "    ✓ " };
                let _ = writeln!(
                    s,
                    "{mark}{name}{} ({ms}ms)",
                    if round == 0 { String::new() } else { format!(" #{round}") }
                );
            }
            Lang::Rust => {
                let _ = writeln!(
                    s,
                    "test {name}{} ... {}",
                    if round == 0 { String::new() } else { format!("_{round}") },
                    if fail { "FAILED" } else { "ok" }
                );
            }
            Lang::Go => {
                let sub = if round == 0 { String::new() } else { format!("/case_{round}") };
                let _ = writeln!(s, "=== RUN   {name}{sub}");
                let _ = writeln!(s, "--- {}: {name}{sub} (0.{ms:02}s)", if fail { "FAIL" } else { "PASS" });
            }
        }
        if fail {
            failed.push(format!("{name}{param}"));
        } else {
            passed += 1;
        }
        i += 1;
        if let Some(limit) = timeout_ms {
            if s.len() >= cases_target / 2 && i >= tests.len() / 2 {
                let _ = writeln!(s, "\n!!! run killed after {} s (timeout): no summary was printed", limit / 1000);
                return s;
            }
        }
    }
    // Failure details and captured logs fill the rest.
    if !failed.is_empty() {
        let _ = writeln!(s, "\n=================================== FAILURES ===================================");
    }
    for f in &failed {
        let _ = writeln!(s, "____ {f} ____\n");
        for _ in 0..rng.int(6, 14) {
            s.push_str("    ");
            code_line(rng, repo.lang, &mut s);
        }
        let (got, want) = failure_values(task.field);
        let _ = writeln!(s, ">       assert result == expected\nE       AssertionError: expected {want}, got {got}");
        let _ = writeln!(s, "{}:{}: AssertionError\n", repo.test_files[task.focus], rng.int(10, 200));
    }
    let _ = writeln!(s, "----------------------------- Captured log call ------------------------------");
    let file = &repo.files[task.focus];
    while s.len() < target {
        let level = *rng.pick(&["DEBUG", "DEBUG", "DEBUG", "INFO", "WARNING"]);
        let _ = writeln!(
            s,
            "{level:<8} {}:{}:{} {} {}={} {}={}",
            file.module,
            file.path.rsplit('/').next().unwrap_or(&file.path),
            rng.int(1, file.lines as u64),
            rng.pick(VERBS),
            rng.pick(WORDS),
            rng.int(0, 100_000),
            rng.pick(WORDS),
            rng.hex(8),
        );
    }
    let secs = rng.uniform(0.4, 90.0);
    match repo.lang {
        Lang::Python => {
            let _ = writeln!(
                s,
                "========================= {} failed, {passed} passed in {secs:.2}s =========================",
                failed.len()
            );
        }
        Lang::JavaScript => {
            let _ = writeln!(s, "\n  {passed} passing ({}s)\n  {} failing", secs as u64, failed.len());
        }
        Lang::Rust => {
            let _ = writeln!(
                s,
                "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; 0 filtered out; finished in {secs:.2}s",
                if failed.is_empty() { "ok" } else { "FAILED" },
                failed.len()
            );
        }
        Lang::Go => {
            let _ = writeln!(
                s,
                "{}\t{}/{}\t{secs:.3}s",
                if failed.is_empty() { "ok " } else { "FAIL" },
                repo.url.trim_end_matches(".git").trim_start_matches("https://"),
                file.module
            );
        }
    }
    s
}

fn failure_values(field: &str) -> (String, String) {
    (format!("'invalid {field}'"), format!("'{field} is required'"))
}

/// A unified diff touching `paths`, with `hunks` hunks in all.
pub fn diff(rng: &mut Prng, repo: &Repo, paths: &[String]) -> String {
    let mut s = String::new();
    for path in paths {
        let lines = repo.files.iter().find(|f| &f.path == path).map(|f| f.lines).unwrap_or(80);
        let _ = writeln!(
            s,
            "diff --git a/{path} b/{path}\nindex {}..{} 100644\n--- a/{path}\n+++ b/{path}",
            rng.hex(7),
            rng.hex(7)
        );
        let mut at = rng.int(3, 20) as u32;
        for _ in 0..rng.int(1, 3) {
            if at + 10 > lines {
                break;
            }
            let removed = rng.int(0, 3) as u32;
            let added = rng.int(1, 8) as u32;
            let _ = writeln!(s, "@@ -{at},{} +{at},{} @@", 6 + removed, 6 + added);
            for _ in 0..3 {
                s.push(' ');
                code_line(rng, repo.lang, &mut s);
            }
            for _ in 0..removed {
                s.push('-');
                code_line(rng, repo.lang, &mut s);
            }
            for _ in 0..added {
                s.push('+');
                code_line(rng, repo.lang, &mut s);
            }
            for _ in 0..3 {
                s.push(' ');
                code_line(rng, repo.lang, &mut s);
            }
            at += rng.int(12, 60) as u32;
        }
    }
    s
}

pub fn sentence(rng: &mut Prng) -> String {
    let verb = *rng.pick(VERBS);
    format!(
        "{} the {} {}",
        camel(verb),
        rng.pick(WORDS),
        rng.pick(&["first", "before editing", "again", "to be sure", "in isolation"])
    )
}
