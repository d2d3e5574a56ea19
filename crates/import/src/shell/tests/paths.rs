use super::*;

#[test]
fn workspace_paths() {
    table(
        Some("/repo"),
        &[
            ("rm /repo/a.py", &["mut delete [/repo/a.py] in"]),
            ("rm a.py", &["mut delete [a.py] in"]),
            ("rm /etc/x", &["mut delete [/etc/x] out"]),
            ("rm /repo/../etc/x", &["mut delete [/repo/../etc/x] out"]),
            ("rm /repository/x", &["mut delete [/repository/x] out"]),
            ("rm ../x", &["mut delete [../x] out"]),
            ("cd /tmp && rm x", &["inert", "mut delete [x] out"]),
            ("cd sub && rm x", &["inert", "mut delete [x] in"]),
            ("cp a.py /tmp/a.py", &["mut edit [a.py,/tmp/a.py] out"]),
            ("cp /tmp/a.py a.py", &["mut edit [/tmp/a.py,a.py] in"]),
            ("rm /tmp/x /repo/y", &["mut delete [/tmp/x,/repo/y] in"]),
            ("echo x > /tmp/log", &["mut edit [/tmp/log] out"]),
            ("touch ~/x", &["mut create [~/x] out"]),
        ],
    );
    table(Some("/repo/"), &[("echo x > /repo/out.txt", &["mut edit [/repo/out.txt] in"])]);
    // a working directory under /tmp is still the workspace
    table(Some("/tmp/w"), &[("rm /tmp/w/a.py", &["mut delete [/tmp/w/a.py] in"])]);
    // without a working directory only the always-outside places are outside
    table(None, &[("rm /etc/x", &["mut delete [/etc/x] in"]), ("cd ~ && rm x", &["inert", "mut delete [x] out"])]);
}
