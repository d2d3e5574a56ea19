use super::*;

#[test]
fn opaque_flag() {
    for (cmd, want) in [
        ("cd x && pytest && cat out", false),
        ("git add -A && git commit -m x", false),
        ("echo hi > f.txt", false),
        ("pip install -e . && pytest", true),
        ("./run.sh", true),
        ("ls | python3 -c 'import sys; print(sys.stdin.read())'", true),
        ("", false),
    ] {
        assert_eq!(analyse(cmd, None, &Declared::default()).opaque, want, "{cmd:?}");
    }
    assert!(analyse("", None, &Declared::default()).segments.is_empty());
}

#[test]
fn declared_commands() {
    let d = |t: Option<&str>, l: Option<&str>| Declared {
        test_cmd: t.map(str::to_string),
        lint_cmd: l.map(str::to_string),
    };
    let run = |cmd: &str, dec: &Declared| -> Vec<String> {
        analyse(cmd, None, dec).segments.iter().map(|s| render(&s.kind)).collect()
    };
    let t = d(Some("pytest tests/test_api.py -q"), Some("flake8 --select=E9 ."));
    assert_eq!(run("pytest  tests/test_api.py   -q", &t), ["check registered_test:pytest tests/test_api.py -q"]);
    let a = analyse("flake8 --select=E9 .", None, &t);
    assert_eq!(
        a.segments[0].kind,
        SegmentKind::Check { method: "lint", check_id: "lint:flake8 --select=E9 .".to_string() }
    );
    // not equal to the declared command: the table decides
    assert_eq!(run("pytest -x", &d(Some("pytest"), None)), ["check regression:pytest -x"]);

    let t = d(Some("./run_tests.sh"), None);
    let a = analyse("./run_tests.sh", None, &t);
    assert_eq!(render(&a.segments[0].kind), "check registered_test:./run_tests.sh");
    assert!(!a.opaque);

    assert_eq!(
        run("cd app && make check-all", &d(Some("make check-all"), None)),
        ["inert", "check registered_test:make check-all"]
    );
    assert_eq!(
        run("cd app && ./test.sh", &d(Some("cd app && ./test.sh"), None)),
        ["inert", "check registered_test:./test.sh"]
    );
    assert_eq!(run("bash -c 'pytest -q'", &d(Some("pytest -q"), None)), ["check registered_test:pytest -q"]);
}

#[test]
fn whitespace_normalisation() {
    assert_eq!(normalise_ws("  a \t b\n c  "), "a b c");
    assert_eq!(normalise_ws(""), "");
}

/// A segment after `cd` to a directory outside the workspace, or in a call run
/// elsewhere, is marked `elsewhere`; inside (or unknown) it is not.
#[test]
fn segments_run_elsewhere() {
    let marks = |cmd: &str, cwd: Option<&str>| -> Vec<bool> {
        analyse_in(cmd, Some("/srv/app"), cwd, &Declared::default()).segments.iter().map(|s| s.elsewhere).collect()
    };
    assert_eq!(marks("pytest -q", None), [false]);
    assert_eq!(marks("cd /srv/other && pytest -q", None), [false, true]);
    assert_eq!(marks("cd sub && pytest -q", None), [false, false]);
    assert_eq!(marks("cd ~ && pytest -q", None), [false, true]);
    assert_eq!(marks("pytest -q", Some("/srv/other")), [true]);
    assert_eq!(marks("pytest -q", Some("packages/core")), [false]);
    assert_eq!(marks("cd /srv/app && pytest -q", Some("/srv/other")), [true, false]);
    // No known workspace: nothing is known to be elsewhere.
    assert!(analyse_in("cd /x && pytest", None, None, &Declared::default()).segments.iter().all(|s| !s.elsewhere));
}
