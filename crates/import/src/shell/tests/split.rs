use super::*;

#[test]
fn here_documents_are_not_split() {
    let cmd = "cat > f.py <<'EOF'\nimport os\nx = 1 && 2\nprint('a; b')\nEOF";
    let a = analyse(cmd, None, &Declared::default());
    assert_eq!(a.segments.len(), 1, "{:?}", a.segments);
    assert_eq!(a.segments[0].text, cmd);
    assert_eq!(render(&a.segments[0].kind), "mut edit [f.py] in");
    assert!(!a.opaque);

    let cmd = "cat <<EOF > notes.md\n# title\nrm -rf / || true\nEOF\npytest";
    let a = analyse(cmd, None, &Declared::default());
    let texts: Vec<&str> = a.segments.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["cat <<EOF > notes.md\n# title\nrm -rf / || true\nEOF", "pytest"]);
    assert_eq!(kinds(cmd, None), ["mut edit [notes.md] in", "check regression:pytest"]);
    assert_eq!(a.segments[1].before, Some(Joiner::Seq));

    // `<<-` strips leading tabs before the terminator
    table(
        None,
        &[
            ("cat <<-EOF > a.txt\n\tbody; rm x\n\tEOF\nls", &["mut edit [a.txt] in", "read"]),
            ("cat <<\"END\" >a.txt\n$(rm -rf x) `y`\nEND", &["mut edit [a.txt] in"]),
            ("cat << EOF\nhi && bye\nEOF", &["read"]),
        ],
    );
}

#[test]
fn chains_pipes_and_quotes() {
    let seg = |cmd: &str| analyse(cmd, None, &Declared::default()).segments;
    let texts = |cmd: &str| seg(cmd).into_iter().map(|s| s.text).collect::<Vec<_>>();
    let befores = |cmd: &str| seg(cmd).into_iter().map(|s| s.before).collect::<Vec<_>>();
    use Joiner::*;

    let p = seg("pytest | tail -5");
    assert_eq!(p.len(), 1);
    assert!(p[0].piped);
    assert_eq!(p[0].head, ["pytest"]);
    assert_eq!(p[0].text, "pytest | tail -5");
    assert_eq!(render(&p[0].kind), "check regression:pytest");
    assert!(!seg("pytest")[0].piped);

    assert_eq!(texts("a && b || c"), ["a", "b", "c"]);
    assert_eq!(befores("a && b || c"), [None, Some(And), Some(Or)]);
    assert_eq!(befores("a; b\nc"), [None, Some(Seq), Some(Seq)]);
    assert_eq!(texts("a &&\n  b"), ["a", "b"]);
    assert_eq!(befores("a &&\n  b"), [None, Some(And)]);
    assert_eq!(befores("a\n\n\nb"), [None, Some(Seq)]);
    assert_eq!(befores("sleep 1 & wait"), [None, Some(Seq)]);
    assert_eq!(texts("echo \"a && b; c\" && ls 'x || y'"), ["echo \"a && b; c\"", "ls 'x || y'"]);
    assert_eq!(seg("echo \"a && b; c\"")[0].head, ["echo", "a && b; c"]);
    assert_eq!(texts("echo $(cd x && ls) && pwd"), ["echo $(cd x && ls)", "pwd"]);
    assert_eq!(texts("echo `a && b`; pwd"), ["echo `a && b`", "pwd"]);
    assert_eq!(texts("echo a\\;b"), ["echo a\\;b"]);
    assert_eq!(texts("sed -i 's/;/,/g' f && pytest"), ["sed -i 's/;/,/g' f", "pytest"]);
    assert_eq!(texts("# run the tests\npytest"), ["pytest"]);
    assert_eq!(kinds("pytest -q \\\n  tests/test_x.py", None), ["check targeted_test:pytest -q tests/test_x.py"]);

    // a shell's string is spliced in with its own joiners
    let cmd = "bash -lc \"cd /repo && pytest -x\" && echo done";
    assert_eq!(texts(cmd), ["cd /repo", "pytest -x", "echo done"]);
    assert_eq!(befores(cmd), [None, Some(And), Some(And)]);
    assert_eq!(befores("x=1; bash -c 'a || b'"), [None, Some(Seq), Some(Or)]);
    assert!(seg("bash -c 'pytest' | tail")[0].piped);

    table(
        None,
        &[
            ("for f in *.py; do black $f; done", &["inert", "mut edit [$f] in", "inert"]),
            ("pytest | tee log.txt", &["check regression:pytest"]),
        ],
    );
}

#[test]
fn swe_agent_edit_block_is_one_command() {
    let cmd = "edit 1:3\nfoo && bar; baz\n    qux\nend_of_edit";
    let a = analyse(cmd, None, &Declared::default());
    assert_eq!(a.segments.len(), 1);
    assert_eq!(a.segments[0].text, cmd);
    assert_eq!(a.segments[0].head, ["edit", "1:3"]);
    assert_eq!(render(&a.segments[0].kind), "mut edit [] in");
    assert!(!a.opaque);

    let cmd = "edit 1:1\nx = 1\nend_of_edit\npytest";
    assert_eq!(kinds(cmd, None), ["mut edit [] in", "check regression:pytest"]);
    assert_eq!(analyse(cmd, None, &Declared::default()).segments[1].before, Some(Joiner::Seq));
}
