use super::*;

#[test]
fn python_writes() {
    let cases: &[(&str, bool)] = &[
        ("open('f', 'w').write('x')", true),
        ("with open(\"f\", \"a\") as fh: fh.write('x')", true),
        ("open(path, mode='x')", true),
        ("open('f', 'r+')", true),
        ("open('f','wb')", true),
        ("import io\nio.open('f', 'w')", true),
        ("from pathlib import Path\nPath('x').write_text('y')", true),
        ("p.write_bytes(b'')", true),
        ("Path('a').open('w')", true),
        ("import os\nos.open('f', os.O_WRONLY | os.O_CREAT)", true),
        ("open('f')", false),
        ("open('f', 'r')", false),
        ("print(open('f').read())", false),
        ("with open(path, \"rb\") as f: data = f.read()", false),
        ("Path('a').open()", false),
        ("reopen('f', 'w')", false),
        ("print('hello')", false),
    ];
    for (code, want) in cases {
        assert_eq!(python_writes_file(code), *want, "{code:?}");
    }
}
