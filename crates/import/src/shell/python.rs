//! Python invocations: `python -m MODULE`, `python -c CODE`, `python FILE` and a
//! here-document fed to `python -`.

use regex::Regex;
use std::sync::OnceLock;

use super::checks::{det, guarded, test, DJANGO_VALUES, PYTEST_VALUES, UNITTEST_VALUES};
use super::classify::{classify_prog, read, Class};
use super::lex::{heredoc_body, Redir};
use super::python_writes::python_write_targets;
use super::unwrap::basename;

pub(super) fn is_python(prog: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^python(3(\.\d+)?)?$").expect("regex")).is_match(prog)
}

fn python_code(code: &str) -> Class {
    let (writes, paths, all_known) = python_write_targets(code);
    if !writes {
        // § 4: Python code that writes nothing recognisable is opaque
        return Class::Opaque;
    }
    let decide = if all_known { paths.clone() } else { Vec::new() };
    Class::Mut { kind: "edit", paths, decide }
}

pub(super) fn classify_python(args: &[String], redirs: &[Redir]) -> Class {
    let mut j = 0;
    while let Some(a) = args.get(j) {
        if a == "-m" {
            return match args.get(j + 1) {
                Some(m) => classify_module(m, &args[j + 2..]),
                None => Class::Opaque,
            };
        }
        if let Some(m) = a.strip_prefix("-m").filter(|m| !m.is_empty() && !a.starts_with("--")) {
            return classify_module(m, &args[j + 1..]);
        }
        if a == "-c" {
            return match args.get(j + 1) {
                Some(code) => python_code(code),
                None => Class::Opaque,
            };
        }
        if a == "-" {
            break;
        }
        if matches!(a.as_str(), "--version" | "-V" | "--help" | "-h") {
            return read(Vec::new());
        }
        if a == "-W" || a == "-X" {
            j += 2;
            continue;
        }
        if a.starts_with('-') {
            j += 1;
            continue;
        }
        return classify_python_file(a, &args[j + 1..]);
    }
    // Reading: `python - <<EOF` (or `python <<EOF`) runs the here-document as `python -c`
    // would run its code.
    match heredoc_body(redirs) {
        Some(body) => python_code(body),
        None => Class::Opaque,
    }
}

fn classify_module(m: &str, rest: &[String]) -> Class {
    match m {
        "pytest" | "py.test" => test(rest, PYTEST_VALUES, ""),
        "unittest" => {
            // `discover` is the whole suite, not a selector
            let r = if rest.first().map(String::as_str) == Some("discover") { &rest[1..] } else { rest };
            test(r, UNITTEST_VALUES, "")
        }
        "compileall" | "py_compile" => det(rest),
        // Reading: a module is matched as the program of the same name only for the tools
        // the tables name; any other module (`http.server`, `test`, `venv`) is opaque.
        "black" | "isort" | "flake8" | "pylint" | "pyflakes" | "mypy" | "ruff" | "bandit" | "tox" | "nox" | "pip"
        | "semgrep" => classify_prog(m, rest, ""),
        _ => Class::Opaque,
    }
}

fn classify_python_file(file: &str, rest: &[String]) -> Class {
    let name = basename(file);
    if name == "manage.py" {
        return if rest.first().map(String::as_str) == Some("test") {
            test(&rest[1..], DJANGO_VALUES, "")
        } else {
            Class::Opaque
        };
    }
    if name == "runtests.py" {
        return test(rest, DJANGO_VALUES, "");
    }
    let test_file =
        (name.starts_with("test_") && name.ends_with(".py")) || name.ends_with("_test.py") || name == "tests.py";
    if test_file {
        // the command names a test file, so it is targeted
        return guarded(rest, Class::Check("targeted_test"));
    }
    if name.starts_with("repro") || name.contains("_repro") {
        return Class::Check("reproduction");
    }
    Class::Opaque
}
