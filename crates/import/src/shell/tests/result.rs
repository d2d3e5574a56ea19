use super::*;

#[test]
fn check_result_bullets() {
    let a = |cmd: &str| analyse(cmd, None, &Declared::default());
    let out_pass = "======== 3 passed in 0.12s ========";
    let out_fail = "======== 1 failed, 2 passed in 0.30s ========";

    // the segment is the whole command: the exit code decides, graded as it is
    let one = a("pytest");
    assert_eq!(check_result(&one, 0, Some(0), "observed", false, ""), ("pass", "observed"));
    assert_eq!(check_result(&one, 0, Some(1), "derived", false, out_pass), ("fail", "derived"));
    assert_eq!(check_result(&one, 0, None, "observed", true, ""), ("timeout", "observed"));
    assert_eq!(check_result(&a("python3 test_add.py"), 0, Some(0), "observed", false, ""), ("pass", "observed"));
    // no exit code: the summary line, else unknown
    assert_eq!(check_result(&one, 0, None, "observed", false, ""), ("unknown", "derived"));
    assert_eq!(check_result(&one, 0, None, "observed", false, out_pass), ("pass", "derived"));

    // a && chain that exited 0: every check passed
    let chain = a("cd x && pytest");
    assert_eq!(check_result(&chain, 1, Some(0), "observed", false, ""), ("pass", "derived"));
    let two = a("pytest && flake8");
    assert_eq!(check_result(&two, 0, Some(0), "observed", false, ""), ("pass", "derived"));
    assert_eq!(check_result(&two, 1, Some(0), "observed", false, ""), ("pass", "derived"));
    // exited non-zero: the last segment takes the exit code, an earlier one the summary
    assert_eq!(check_result(&two, 0, Some(1), "observed", false, out_fail), ("fail", "derived"));
    assert_eq!(check_result(&two, 0, Some(1), "observed", false, out_pass), ("pass", "derived"));
    assert_eq!(check_result(&two, 1, Some(1), "observed", false, out_pass), ("fail", "derived"));
    assert_eq!(check_result(&two, 0, Some(1), "observed", false, ""), ("unknown", "derived"));
    assert_eq!(check_result(&chain, 1, None, "observed", true, ""), ("timeout", "derived"));

    // an earlier segment of a `;` chain: the summary line decides even when it exited 0
    let seq = a("pytest; echo done");
    assert_eq!(check_result(&seq, 0, Some(0), "observed", false, ""), ("unknown", "derived"));
    assert_eq!(check_result(&seq, 0, Some(0), "observed", false, out_pass), ("pass", "derived"));
    assert_eq!(check_result(&seq, 0, Some(0), "observed", false, out_fail), ("fail", "derived"));
    // the last of a `;` chain: the exit code
    assert_eq!(check_result(&a("echo start; pytest"), 1, Some(2), "observed", false, out_pass), ("fail", "derived"));

    // a pipe head: the summary line
    let pipe = a("pytest | tail -5");
    assert_eq!(check_result(&pipe, 0, Some(0), "observed", false, out_pass), ("pass", "derived"));
    assert_eq!(check_result(&pipe, 0, Some(0), "observed", false, out_fail), ("fail", "derived"));
    assert_eq!(check_result(&pipe, 0, Some(0), "observed", false, ""), ("unknown", "derived"));

    // a chain with ||: the summary line
    let or = a("pytest || true");
    assert_eq!(check_result(&or, 0, Some(0), "observed", false, ""), ("unknown", "derived"));
    let mixed = a("pytest -x && echo ok || echo bad");
    assert_eq!(check_result(&mixed, 0, Some(0), "observed", false, ""), ("unknown", "derived"));
    assert_eq!(check_result(&a("echo a || echo b; pytest"), 2, Some(0), "observed", false, ""), ("unknown", "derived"));
}

#[test]
fn mutation_ok_rule() {
    let a = |cmd: &str| analyse(cmd, None, &Declared::default());
    let first = a("sed -i s/a/b/ f && pytest");
    assert!(mutation_ok(&first, 0, Some(1)));
    let last = a("pytest && sed -i s/a/b/ f");
    assert!(!mutation_ok(&last, 1, Some(1)));
    assert!(mutation_ok(&last, 1, None));
    assert!(mutation_ok(&last, 1, Some(0)));
    assert!(!mutation_ok(&a("rm x"), 0, Some(1)));
}

#[test]
fn summary_lines() {
    let pytest_fail = "============================= test session starts ==============================\n\
platform linux -- Python 3.11.4, pytest-7.4.0, pluggy-1.2.0\n\
collected 3 items\n\n\
tests/test_a.py .F.                                                      [100%]\n\n\
=================================== FAILURES ===================================\n\
FAILED tests/test_a.py::test_b - assert 1 == 2\n\
========================= 1 failed, 2 passed in 0.12s ==========================\n";
    let unittest_ok = "...\n----------------------------------------------------------------------\n\
Ran 3 tests in 0.001s\n\nOK\n";
    let unittest_fail = "F.\n======================================================================\n\
FAIL: test_add (test_calc.TestCalc)\n----------------------------------------------------------------------\n\
Ran 2 tests in 0.002s\n\nFAILED (failures=1)\n";
    let cases: &[(&str, Option<&str>)] = &[
        (pytest_fail, Some("fail")),
        ("3 passed in 0.05s", Some("pass")),
        ("=== 2 passed, 1 warning in 0.50s ===", Some("pass")),
        ("=== 4 passed, 1 skipped in 1.02s (0:00:01) ===", Some("pass")),
        ("==== 1 error in 0.20s ====", Some("fail")),
        ("=== 2 failed in 3.1 seconds ===", Some("fail")),
        ("============================ no tests ran in 0.01s =============================", Some("error")),
        ("test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s", Some("pass")),
        ("test result: ok. 3 passed; 0 failed\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored", Some("fail")),
        ("ok  \tgithub.com/x/y\t0.012s", Some("pass")),
        ("ok  \tgithub.com/x/y\t(cached)", Some("pass")),
        ("--- FAIL: TestX (0.00s)\n    x_test.go:9: want 2\nFAIL\nFAIL\tgithub.com/x/y\t0.010s\nFAIL", Some("fail")),
        ("ok  \tgithub.com/x/a\t0.1s\nFAIL\tgithub.com/x/b [build failed]", Some("fail")),
        ("Test Suites: 1 failed, 1 total\nTests:       1 failed, 3 passed, 4 total", Some("fail")),
        ("Tests:       4 passed, 4 total\nSnapshots:   0 total", Some("pass")),
        ("\x1b[1mTests:\x1b[22m       \x1b[1m\x1b[32m4 passed\x1b[39m\x1b[22m, 4 total", Some("pass")),
        ("      Tests  1 failed | 2 passed (3)", Some("fail")),
        ("      Tests  3 passed (3)", Some("pass")),
        (unittest_ok, Some("pass")),
        ("Ran 1 test in 0.000s\n\nOK (skipped=1)", Some("pass")),
        (unittest_fail, Some("fail")),
        ("Ran 0 tests in 0.000s\n\nNO TESTS RAN", Some("error")),
        ("All tests passed", None),
        ("test_add OK\ntest_sub OK", None),
        ("OK", None),
        ("3 passed", None),
        ("Ran the migration in 2s", None),
        ("FAILED: could not connect", None),
        ("", None),
    ];
    for (out, want) in cases {
        assert_eq!(summary_result(out), *want, "{out:?}");
    }
}

#[test]
fn exit_codes_in_text() {
    let cases: &[(&str, Option<i64>)] = &[
        ("Exit code 1", Some(1)),
        ("output\nExit code: 127", Some(127)),
        ("Process exited with code 2", Some(2)),
        ("[The command completed with exit code 0.]", Some(0)),
        ("Exit code 1\nretrying\nExit code: 0", Some(0)),
        ("[The command completed with exit code 3.]\nProcess exited with code 4", Some(4)),
        ("Exit code: -1", Some(-1)),
        ("no code here", None),
        ("the exit code 3 means busy", None),
    ];
    for (text, want) in cases {
        assert_eq!(exit_code_from_text(text), *want, "{text:?}");
    }
}
