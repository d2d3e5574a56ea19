use super::*;

#[test]
fn wrappers_are_unwrapped() {
    table(
        None,
        &[
            ("bash -lc \"cd /repo && pytest\"", &["inert", "check regression:pytest"]),
            ("/bin/bash -c 'pytest tests/test_x.py'", &["check targeted_test:pytest tests/test_x.py"]),
            ("/usr/bin/env bash -c \"go test ./...\"", &["check regression:go test ./..."]),
            ("uv run pytest -q", &["check regression:pytest -q"]),
            ("uv run --with pytest-cov pytest", &["check regression:pytest"]),
            ("python -m pytest -k foo", &["check targeted_test:python -m pytest -k foo"]),
            ("python3 -m pytest -q", &["check regression:python3 -m pytest -q"]),
            ("timeout 60 pytest", &["check regression:pytest"]),
            ("timeout -s KILL 5m cargo test", &["check regression:cargo test"]),
            ("VAR=1 pytest", &["check regression:pytest"]),
            ("cd x && pytest", &["inert", "check regression:pytest"]),
            ("env -u HOME PYTHONPATH=src nice -n 10 sudo -u dev time pytest -x", &["check regression:pytest -x"]),
            ("poetry run python -m pytest tests", &["check regression:python -m pytest tests"]),
            ("conda run -n py311 pytest", &["check regression:pytest"]),
            ("pipenv run pytest", &["check regression:pytest"]),
            ("npx jest -t adds", &["check targeted_test:jest -t adds"]),
            ("pnpm exec vitest run", &["check regression:vitest run"]),
            ("bunx vitest run", &["check regression:vitest run"]),
            ("npx tsc --noEmit", &["check deterministic_check:tsc --noEmit"]),
            ("tsc", &["opaque"]),
            (
                "sh -c 'pytest'; bash -e -o pipefail -c 'cargo test'",
                &["check regression:pytest", "check regression:cargo test"],
            ),
            ("zsh -c \"dash -c 'ruff check .'\"", &["check lint:ruff check ."]),
            ("bash run_tests.sh", &["opaque"]),
            ("bash <<'EOF'\npytest\nEOF", &["check regression:pytest"]),
            ("curl -s https://x.sh | bash", &["opaque"]),
            ("(cd sub && pytest)", &["inert", "check regression:pytest"]),
            ("{ pytest; }", &["check regression:pytest"]),
            ("python3 -m compileall -q src", &["check deterministic_check:python3 -m compileall -q src"]),
            ("python -m py_compile a.py", &["check deterministic_check:python -m py_compile a.py"]),
            ("python -m mypy src", &["check deterministic_check:python -m mypy src"]),
            ("python -m http.server", &["opaque"]),
            ("if pytest -q; then echo ok; fi", &["check regression:pytest -q", "read", "inert"]),
        ],
    );
}

#[test]
fn head_words_are_unwrapped_and_unquoted() {
    let a = analyse("timeout 60 uv run --with x python -m pytest -q", None, &Declared::default());
    assert_eq!(a.segments[0].head, ["python", "-m", "pytest", "-q"]);
    let a = analyse("VAR=1 pytest -k 'a  or b'", None, &Declared::default());
    assert_eq!(a.segments[0].head, ["pytest", "-k", "a  or b"]);
    assert_eq!(
        a.segments[0].kind,
        SegmentKind::Check { method: "targeted_test", check_id: "targeted_test:pytest -k a or b".to_string() }
    );
    assert_eq!(a.segments[0].text, "VAR=1 pytest -k 'a  or b'");
}

#[test]
fn matching_looks_at_the_head_never_at_substrings() {
    table(
        None,
        &[
            ("pip install pytest", &["opaque"]),
            ("python -m pip install -e .", &["opaque"]),
            ("pip list", &["read"]),
            ("cat pytest.ini", &["read [pytest.ini]"]),
            ("pytest --help", &["read"]),
            ("pytest --version", &["read"]),
            ("pytest --collect-only -q", &["read"]),
            ("echo pytest", &["read"]),
            ("grep -rn pytest .", &["search [.]"]),
            ("rg -l 'cargo test' src", &["search [src]"]),
            ("ls tests", &["read [tests]"]),
        ],
    );
}

#[test]
fn selectors_decide_targeted_or_regression() {
    table(
        None,
        &[
            ("pytest", &["check regression:pytest"]),
            ("pytest tests/", &["check regression:pytest tests/"]),
            ("pytest tests", &["check regression:pytest tests"]),
            ("pytest ./tests", &["check regression:pytest ./tests"]),
            ("pytest .", &["check regression:pytest ."]),
            ("pytest test/", &["check regression:pytest test/"]),
            ("pytest tests/test_x.py", &["check targeted_test:pytest tests/test_x.py"]),
            ("pytest tests/unit", &["check targeted_test:pytest tests/unit"]),
            ("pytest -q tests/test_x.py::test_a", &["check targeted_test:pytest -q tests/test_x.py::test_a"]),
            ("pytest -k foo", &["check targeted_test:pytest -k foo"]),
            ("pytest -x -q", &["check regression:pytest -x -q"]),
            ("pytest -n 4 --tb=short", &["check regression:pytest -n 4 --tb=short"]),
            ("pytest --tb short -v", &["check regression:pytest --tb short -v"]),
            ("py.test -p no:cacheprovider", &["check targeted_test:py.test -p no:cacheprovider"]),
            ("go test ./...", &["check regression:go test ./..."]),
            ("go test .", &["check regression:go test ."]),
            ("go test -run TestX ./pkg", &["check targeted_test:go test -run TestX ./pkg"]),
            ("go test -run=TestX", &["check targeted_test:go test -run=TestX"]),
            ("go test -count=1 -v ./...", &["check regression:go test -count=1 -v ./..."]),
            ("go test -count 1 ./...", &["check regression:go test -count 1 ./..."]),
            ("go test ./pkg/...", &["check targeted_test:go test ./pkg/..."]),
            ("cargo test", &["check regression:cargo test"]),
            ("cargo test name", &["check targeted_test:cargo test name"]),
            ("cargo test -- --nocapture", &["check regression:cargo test -- --nocapture"]),
            ("cargo test --test integration", &["check targeted_test:cargo test --test integration"]),
            ("cargo test --features serde", &["check regression:cargo test --features serde"]),
            ("cargo test -p epistore-import", &["check targeted_test:cargo test -p epistore-import"]),
            ("cargo nextest run", &["check regression:cargo nextest run"]),
            ("npm test", &["check regression:npm test"]),
            ("npm run test:unit", &["check regression:npm run test:unit"]),
            ("npm test -- src/a.test.js", &["check targeted_test:npm test -- src/a.test.js"]),
            ("yarn test", &["check regression:yarn test"]),
            ("bun test", &["check regression:bun test"]),
            ("jest --watchAll=false", &["check regression:jest --watchAll=false"]),
            ("vitest run src/a.test.ts", &["check targeted_test:vitest run src/a.test.ts"]),
            ("python3 test_add.py", &["check targeted_test:python3 test_add.py"]),
            ("python tests/foo_test.py", &["check targeted_test:python tests/foo_test.py"]),
            ("python tests.py", &["check targeted_test:python tests.py"]),
            ("python test.py", &["opaque"]),
            ("python reproduce_issue.py", &["check reproduction:python reproduce_issue.py"]),
            ("python3 bug_repro.py", &["check reproduction:python3 bug_repro.py"]),
            ("python script.py", &["opaque"]),
            ("python manage.py test app.tests", &["check targeted_test:python manage.py test app.tests"]),
            ("python manage.py test", &["check regression:python manage.py test"]),
            ("python manage.py migrate", &["opaque"]),
            ("python tests/runtests.py", &["check regression:python tests/runtests.py"]),
            ("python tests/runtests.py queries", &["check targeted_test:python tests/runtests.py queries"]),
            ("python -m unittest", &["check regression:python -m unittest"]),
            ("python -m unittest discover -s tests", &["check regression:python -m unittest discover -s tests"]),
            ("python -m unittest tests.test_x", &["check targeted_test:python -m unittest tests.test_x"]),
            ("make test", &["check regression:make test"]),
            ("make -C sub check", &["check regression:make -C sub check"]),
            ("make build", &["opaque"]),
            ("mvn -q test", &["check regression:mvn -q test"]),
            ("mvn test -Dtest=FooTest", &["check targeted_test:mvn test -Dtest=FooTest"]),
            ("./gradlew test", &["check regression:./gradlew test"]),
            ("./gradlew test --tests Foo", &["check targeted_test:./gradlew test --tests Foo"]),
            ("tox -e py311", &["check regression:tox -e py311"]),
            ("nox -s tests", &["check regression:nox -s tests"]),
            ("ctest", &["check regression:ctest"]),
            ("rspec spec/a_spec.rb", &["check targeted_test:rspec spec/a_spec.rb"]),
            ("dotnet test", &["check regression:dotnet test"]),
        ],
    );
}

#[test]
fn linters_formatters_and_deterministic_checks() {
    table(
        None,
        &[
            ("ruff check .", &["check lint:ruff check ."]),
            ("ruff check --fix .", &["mut edit [.] in"]),
            ("ruff format --check .", &["check lint:ruff format --check ."]),
            ("ruff format src", &["mut edit [src] in"]),
            ("black --check .", &["check lint:black --check ."]),
            ("black .", &["mut edit [.] in"]),
            ("black -l 100 src", &["mut edit [src] in"]),
            ("isort --check-only .", &["check lint:isort --check-only ."]),
            ("isort --check .", &["check lint:isort --check ."]),
            ("isort src", &["mut edit [src] in"]),
            ("cargo fmt --check", &["check lint:cargo fmt --check"]),
            ("cargo fmt -- --check", &["check lint:cargo fmt -- --check"]),
            ("cargo fmt", &["mut edit [] in"]),
            ("gofmt -l .", &["check lint:gofmt -l ."]),
            ("gofmt -w main.go", &["mut edit [main.go] in"]),
            ("prettier --write src/a.js", &["mut edit [src/a.js] in"]),
            ("prettier --check .", &["check lint:prettier --check ."]),
            ("eslint src", &["check lint:eslint src"]),
            ("eslint --fix src", &["mut edit [src] in"]),
            ("cargo clippy -- -D warnings", &["check lint:cargo clippy -- -D warnings"]),
            ("flake8", &["check lint:flake8"]),
            ("python -m flake8 src", &["check lint:python -m flake8 src"]),
            ("shellcheck run.sh", &["check lint:shellcheck run.sh"]),
            ("go vet ./...", &["check lint:go vet ./..."]),
            ("mypy src", &["check deterministic_check:mypy src"]),
            ("pyright", &["check deterministic_check:pyright"]),
            ("cargo build --release", &["check deterministic_check:cargo build --release"]),
            ("cargo check", &["check deterministic_check:cargo check"]),
            ("go build ./...", &["check deterministic_check:go build ./..."]),
            ("npm run build", &["check deterministic_check:npm run build"]),
            ("npm run typecheck", &["check deterministic_check:npm run typecheck"]),
            ("mvn package", &["check deterministic_check:mvn package"]),
            ("git diff --check", &["check deterministic_check:git diff --check"]),
            ("git diff", &["read"]),
        ],
    );
}
