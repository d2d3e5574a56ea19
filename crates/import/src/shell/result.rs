//! Check results from what a log shows of a call (§ 3 / § 4): the exit code and how a chain
//! or a pipe passes it on, runners' summary lines, and exit codes written in the output.

use regex::Regex;
use std::sync::OnceLock;

use super::args::listed;
use super::{Analysis, Joiner};

// ---------------------------------------------------------------------------------------
// Results

/// The result and grade ("observed" | "derived") of the check in segment `i`, given what the log
/// shows of the call: its exit code (None when not shown), the grade of that exit code, whether it
/// timed out, and its output text.
pub fn check_result(
    a: &Analysis,
    i: usize,
    exit_code: Option<i64>,
    exit_grade: &'static str,
    timed_out: bool,
    output: &str,
) -> (&'static str, &'static str) {
    let n = a.segments.len();
    let Some(seg) = a.segments.get(i) else {
        return ("unknown", "derived");
    };
    let by_exit = |grade: &'static str| -> Option<(&'static str, &'static str)> {
        if timed_out {
            Some(("timeout", grade))
        } else {
            exit_code.map(|c| (if c == 0 { "pass" } else { "fail" }, grade))
        }
    };
    // A pipe's exit code is its last command's, so a pipe head never takes it.
    if !seg.piped {
        if n == 1 {
            if let Some(r) = by_exit(exit_grade) {
                return r;
            }
        } else {
            let joins: Vec<Joiner> = a.segments[1..].iter().filter_map(|s| s.before).collect();
            if exit_code == Some(0) && !timed_out && joins.iter().all(|j| *j == Joiner::And) {
                return ("pass", "derived");
            }
            // Reading: "a chain joined by && or ;" has no `||` anywhere (§ 4 sends a chain
            // with `||` to the summary line).
            if i + 1 == n && !joins.contains(&Joiner::Or) {
                if let Some(r) = by_exit("derived") {
                    return r;
                }
            }
        }
    }
    match summary_result(output) {
        Some(r) => (r, "derived"),
        None => ("unknown", "derived"),
    }
}

/// `ok` for a mutating segment `i` (§4: false when it is the last segment and the exit code is
/// non-zero; else true).
pub fn mutation_ok(a: &Analysis, i: usize, exit_code: Option<i64>) -> bool {
    let last = i + 1 == a.segments.len();
    !(last && exit_code.is_some_and(|c| c != 0))
}

struct SummaryRes {
    ansi: Regex,
    pytest: Regex,
    pytest_count: Regex,
    cargo: Regex,
    go_ok: Regex,
    go_fail: Regex,
    jest: Regex,
    jest_failed: Regex,
    jest_passed: Regex,
    unittest: Regex,
}

fn summary_res() -> &'static SummaryRes {
    static RES: OnceLock<SummaryRes> = OnceLock::new();
    RES.get_or_init(|| {
        let re = |s: &str| Regex::new(s).expect("regex");
        SummaryRes {
            ansi: re(r"\x1b\[[0-9;?]*[ -/]*[@-~]"),
            pytest: re(r"^[=\s]*(no tests ran|\d+ [a-z]+(?:, \d+ [a-z]+)*) in \d+(?:\.\d+)?\s?(?:s|seconds)\b"),
            pytest_count: re(r"(\d+) ([a-z]+)"),
            cargo: re(r"^\s*test result: (ok|FAILED)\."),
            go_ok: re(r"^ok\s+\S+\s+(?:\(cached\)|\d+(?:\.\d+)?s)"),
            go_fail: re(r"^FAIL\s*$|^FAIL\s+\S+\s+(?:\d+(?:\.\d+)?s|\[[^\]]*\])"),
            jest: re(r"^\s*Tests:?\s+\d+ (?:failed|passed|skipped|todo|pending)\b"),
            jest_failed: re(r"\b\d+ failed\b"),
            jest_passed: re(r"\b\d+ passed\b"),
            unittest: re(r"^Ran (\d+) tests? in "),
        }
    })
}

const PYTEST_WORDS: &str = "passed failed error errors skipped deselected xfailed xpassed warning \
    warnings rerun reruns";

fn pytest_line(res: &SummaryRes, line: &str) -> Option<Option<&'static str>> {
    let c = res.pytest.captures(line)?;
    let body = &c[1];
    if body == "no tests ran" {
        return Some(Some("error"));
    }
    let mut failed = false;
    let mut passed = false;
    for m in res.pytest_count.captures_iter(body) {
        match &m[2] {
            "failed" | "error" | "errors" => failed = true,
            "passed" => passed = true,
            w if listed(PYTEST_WORDS, w) => {}
            _ => return None, // not pytest's words: a program's own line
        }
    }
    // Reading: a line of skips, deselections or xfails only says nothing about pass or fail.
    Some(if failed {
        Some("fail")
    } else if passed {
        Some("pass")
    } else {
        None
    })
}

/// The runner summary line result in an output: Some("fail") / Some("pass") / Some("error"), None
/// when no summary line.
// Reading: when an output holds several summary lines (two runners, go's per-package lines),
// any fail makes it fail, then any error makes it error.
pub fn summary_result(output: &str) -> Option<&'static str> {
    let res = summary_res();
    let clean = res.ansi.replace_all(output, "");
    let lines: Vec<&str> = clean.split(['\n', '\r']).map(str::trim_end).collect();
    let (mut fail, mut error, mut pass) = (false, false, false);
    let mut note = |r: &str| match r {
        "fail" => fail = true,
        "error" => error = true,
        _ => pass = true,
    };
    for (k, line) in lines.iter().enumerate() {
        if let Some(r) = pytest_line(res, line) {
            if let Some(r) = r {
                note(r);
            }
        } else if let Some(c) = res.cargo.captures(line) {
            note(if &c[1] == "ok" { "pass" } else { "fail" });
        } else if res.go_ok.is_match(line) {
            note("pass");
        } else if res.go_fail.is_match(line) {
            note("fail");
        } else if res.jest.is_match(line) {
            if res.jest_failed.is_match(line) {
                note("fail");
            } else if res.jest_passed.is_match(line) {
                note("pass");
            }
        } else if res.unittest.is_match(line) {
            let next = lines[k + 1..].iter().map(|l| l.trim()).find(|l| !l.is_empty());
            match next {
                Some(l) if l == "OK" || l.starts_with("OK (") => note("pass"),
                Some(l) if l.starts_with("FAILED (") => note("fail"),
                // Reading: Python 3.12's `NO TESTS RAN` is unittest's "no tests ran".
                Some("NO TESTS RAN") => note("error"),
                _ => {}
            }
        }
    }
    if fail {
        Some("fail")
    } else if error {
        Some("error")
    } else if pass {
        Some("pass")
    } else {
        None
    }
}

/// An exit code written in text (§3 derived): `Exit code N`, `Exit code: N`, `Process exited with
/// code N`, `[The command completed with exit code N.]`. The last such occurrence wins. None when
/// absent.
pub fn exit_code_from_text(output: &str) -> Option<i64> {
    static RE: OnceLock<Regex> = OnceLock::new();
    // Reading: the spellings are matched as § 3 writes them (case included), so a
    // program's own "exit code 3" in prose is not taken for the call's.
    let re = RE.get_or_init(|| {
        Regex::new(
            r"(?:\bExit code:?[ \t]*|\bProcess exited with code[ \t]+|\[The command completed with exit code[ \t]+)(-?\d+)",
        )
        .expect("regex")
    });
    re.captures_iter(output).filter_map(|c| c[1].parse::<i64>().ok()).last()
}
