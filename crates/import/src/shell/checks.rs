//! Check tools: help and listing guards, targeted vs regression selection, the option
//! tables of the test runners, and the build tools and package managers whose goals or
//! scripts decide whether they run a check.

use super::args::{has, listed, positionals};
use super::classify::{generic, mutation, read, Class};
use super::unwrap::is_assignment;

const HELP: &str = "--help -h --version --collect-only --co --fixtures --markers";

/// A check tool asked for its help, version or test list runs nothing.
// Reading: such a call is a read (`pytest --help` shows text and changes nothing), not opaque;
// `--fixtures` and `--markers` are pytest's other listings besides `--collect-only`.
pub(super) fn guarded(args: &[String], c: Class) -> Class {
    if args.iter().any(|a| listed(HELP, a)) {
        read(Vec::new())
    } else {
        c
    }
}

pub(super) fn lint(args: &[String]) -> Class {
    guarded(args, Class::Check("lint"))
}

pub(super) fn det(args: &[String]) -> Class {
    guarded(args, Class::Check("deterministic_check"))
}

const SELECTORS: &str = "-k -run -p -t --test";
const NOT_SELECTORS: &str = ". ./... tests tests/ test test/";

/// § 4: a test file, a node (`::`), a selector option, or a positional argument other than
/// the whole-suite ones. Options in `values` take a value that is not positional.
fn is_targeted(args: &[String], values: &str, extra: &str, positional_counts: bool) -> bool {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        if a == "--" {
            continue;
        }
        if a.starts_with('-') && a.len() > 1 {
            let (name, inline) = match a.split_once('=') {
                Some((n, _)) => (n, true),
                None => (a, false),
            };
            if listed(SELECTORS, name) || listed(extra, name) {
                return true;
            }
            if !inline && listed(values, name) {
                i += 1;
            }
            continue;
        }
        if !positional_counts {
            continue;
        }
        if a.contains("::") {
            return true;
        }
        if listed(NOT_SELECTORS, a) {
            continue;
        }
        // Reading: `./tests` and `./` are the same directories as `tests` and `.`.
        if let Some(r) = a.strip_prefix("./") {
            if r.is_empty() || listed(NOT_SELECTORS, r) {
                continue;
            }
        }
        return true;
    }
    false
}

fn test_method(targeted: bool) -> &'static str {
    if targeted {
        "targeted_test"
    } else {
        "regression"
    }
}

pub(super) fn test(args: &[String], values: &str, extra: &str) -> Class {
    guarded(args, Class::Check(test_method(is_targeted(args, values, extra, true))))
}

pub(super) const PYTEST_VALUES: &str = "-n -c -m -o -W -r --rootdir --tb --maxfail --durations --junitxml \
    --junit-xml --cov-report --cov-config --basetemp --confcutdir --ignore --ignore-glob \
    --deselect --log-level --log-cli-level --log-file --timeout --color --import-mode --capture \
    --override-ini --dist --reruns --numprocesses --maxprocesses --randomly-seed --html --count";
pub(super) const UNITTEST_VALUES: &str = "-s --start-directory --top-level-directory";
pub(super) const GO_VALUES: &str = "-count -timeout -parallel -cpu -tags -coverprofile -covermode -coverpkg \
    -o -mod -modfile -exec -bench -benchtime -outputdir -cpuprofile -memprofile -blockprofile \
    -trace -shuffle -vet -ldflags -gcflags -C -skip";
const CARGO_VALUES: &str = "--features -F --manifest-path --target -j --jobs --profile --bin \
    --example --bench --target-dir --color --message-format -Z --exclude --config --test-threads \
    --skip --format --logfile --partition -P --retries";
pub(super) const JS_VALUES: &str = "--config -c --maxWorkers -w --reporter --reporters --testTimeout \
    --timeout --coverageDirectory --project --environment --env --shard --outputFile --pool \
    --prefix --workspace --require -r";
/// the test-name and test-path filters of jest, vitest, mocha
pub(super) const JS_SELECTORS: &str = "--testNamePattern --testPathPattern --testPathPatterns --grep -g";
pub(super) const DJANGO_VALUES: &str = "--settings -v --verbosity --parallel --pythonpath --testrunner";
pub(super) const TOX_VALUES: &str = "-e -c --workdir -x --override --conf";
pub(super) const NOX_VALUES: &str = "-s --session --sessions -e -f --noxfile";

/// Goals / tasks of a build tool.
// Reading: for make, mvn and gradle the other arguments are the tool's own (other targets,
// `VAR=value`, options such as make `-k`), so only their test filters (`-Dtest=`,
// `--tests`) select; `mvn clean test` is `mvn test`, the first words being options and goals.
fn build_goals(args: &[String], values: &str) -> Vec<String> {
    positionals(args, values).into_iter().filter(|g| !is_assignment(g)).collect()
}

fn goal_is(goals: &[String], name: &str) -> bool {
    goals.iter().any(|g| g == name || g.strip_suffix(name).is_some_and(|p| p.ends_with(':')))
}

pub(super) fn mvn(args: &[String]) -> Class {
    let goals = build_goals(args, "-pl --projects -f --file -s --settings -P -T -rf");
    let targeted = args.iter().any(|a| a.starts_with("-Dtest=") || a.starts_with("-Dit.test="));
    if goal_is(&goals, "test") || goal_is(&goals, "verify") {
        guarded(args, Class::Check(test_method(targeted)))
    } else if goal_is(&goals, "compile") || goal_is(&goals, "package") {
        det(args)
    } else {
        generic(args)
    }
}

pub(super) fn gradle(args: &[String]) -> Class {
    let goals = build_goals(args, "-p --project-dir -x --exclude-task --tests -P -D");
    let targeted = has(args, "--tests");
    if goal_is(&goals, "test") || goal_is(&goals, "check") {
        guarded(args, Class::Check(test_method(targeted)))
    } else if goal_is(&goals, "build") {
        det(args)
    } else {
        generic(args)
    }
}

pub(super) fn make(args: &[String]) -> Class {
    let mut targets = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a.starts_with('-') {
            let takes = ["-C", "-f", "--file", "--directory", "-I", "-o", "-W", "--makefile"].contains(&a.as_str());
            // `-j` takes a job count only when one follows: `make -j test`
            let jobs = a == "-j" && args.get(i).is_some_and(|v| v.bytes().all(|c| c.is_ascii_digit()));
            if takes || jobs {
                i += 1;
            }
            continue;
        }
        if !is_assignment(a) {
            targets.push(a.clone());
        }
    }
    if targets.iter().any(|t| t == "test" || t == "check") {
        guarded(args, Class::Check("regression"))
    } else {
        Class::Opaque
    }
}

pub(super) fn cargo(args: &[String]) -> Class {
    let i = usize::from(args.first().is_some_and(|a| a.starts_with('+')));
    let rest = |k: usize| &args[(i + k).min(args.len())..];
    match args.get(i).map(String::as_str) {
        // Reading: `--package` is the long spelling of the `-p` selector.
        Some("test") => test(rest(1), CARGO_VALUES, "--package"),
        Some("nextest") if args.get(i + 1).map(String::as_str) == Some("run") => {
            test(rest(2), CARGO_VALUES, "--package -E --filterset --filter-expr")
        }
        Some("clippy") => lint(rest(1)),
        Some("fmt") => {
            if has(rest(1), "--check") {
                lint(rest(1))
            } else {
                guarded(rest(1), mutation("edit", Vec::new()))
            }
        }
        Some("check" | "build") => det(rest(1)),
        _ => generic(args),
    }
}

fn js_run(pm_args: &[String]) -> Class {
    match pm_args.first().map(String::as_str) {
        Some(s) if s.starts_with("test") => test(&pm_args[1..], JS_VALUES, JS_SELECTORS),
        Some("build" | "typecheck") => det(&pm_args[1..]),
        _ => Class::Opaque,
    }
}

pub(super) fn node_pm(prog: &str, args: &[String]) -> Class {
    match args.first().map(String::as_str) {
        Some("test" | "t" | "tst") => test(&args[1..], JS_VALUES, JS_SELECTORS),
        Some("run" | "run-script") => {
            let script = &args[1..];
            // `npm run build` / `typecheck` are listed for npm only
            match script.first().map(String::as_str) {
                Some(s) if s.starts_with("test") => js_run(script),
                Some("build" | "typecheck") if prog == "npm" => js_run(script),
                _ => Class::Opaque,
            }
        }
        Some("ls" | "list" | "view" | "outdated" | "why") => read(Vec::new()),
        _ => generic(args),
    }
}
