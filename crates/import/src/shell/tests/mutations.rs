use super::*;

#[test]
fn derived_mutations() {
    table(
        None,
        &[
            ("sed -i 's/a/b/' f.py", &["mut edit [f.py] in"]),
            ("sed -i.bak -e 's/a/b/' a.py b.py", &["mut edit [a.py,b.py] in"]),
            ("sed -i '' 's/a/b/' f.py", &["mut edit [f.py] in"]),
            ("sed -n '1,5p' f.py", &["read [f.py]"]),
            ("perl -pi -e 's/a/b/' f.pl", &["mut edit [f.pl] in"]),
            ("perl -i -pe 's/a/b/' f.pl", &["mut edit [f.pl] in"]),
            ("perl -e 'print 1'", &["opaque"]),
            ("awk -i inplace '{print}' f.txt", &["mut edit [f.txt] in"]),
            ("awk '{print $1}' f.txt", &["read [f.txt]"]),
            ("echo x | tee out.txt", &["mut edit [out.txt] in"]),
            ("tee -a log.txt < in.txt", &["mut edit [log.txt] in"]),
            ("echo x | tee /dev/null", &["read"]),
            ("patch -p1 < fix.diff", &["mut edit [] in"]),
            ("patch --dry-run -p1 < fix.diff", &["read"]),
            ("git apply fix.patch", &["mut edit [] in"]),
            ("git apply /tmp/fix.patch", &["mut edit [] in"]),
            ("git apply --check fix.patch", &["read"]),
            ("git am 0001.patch", &["mut edit [] in"]),
            ("git checkout -- a.py", &["mut edit [a.py] in"]),
            ("git checkout .", &["mut edit [.] in"]),
            ("git checkout main", &["opaque"]),
            ("git restore src/a.py", &["mut edit [src/a.py] in"]),
            ("git reset --hard HEAD", &["mut edit [] in"]),
            ("git stash pop", &["mut edit [] in"]),
            ("git stash", &["mut edit [] in"]),
            ("git stash push -m wip", &["mut edit [] in"]),
            ("git stash -k", &["mut edit [] in"]),
            ("git stash apply", &["mut edit [] in"]),
            ("git revert HEAD", &["mut edit [] in"]),
            ("git merge main", &["mut edit [] in"]),
            ("git cherry-pick abc123", &["mut edit [] in"]),
            ("git pull", &["mut edit [] in"]),
            ("git -C repo pull --rebase", &["mut edit [] in"]),
            ("mv a.py b.py", &["mut edit [a.py,b.py] in"]),
            ("cp a.py b.py", &["mut edit [a.py,b.py] in"]),
            ("rm -f a.py", &["mut delete [a.py] in"]),
            ("rm -rf /tmp/x", &["mut delete [/tmp/x] out"]),
            ("touch ~/x", &["mut create [~/x] out"]),
            ("touch \"$HOME/.rc\"", &["mut create [$HOME/.rc] out"]),
            ("rm /dev/shm/x /proc/y", &["mut delete [/dev/shm/x,/proc/y] out"]),
            ("mkdir -p src/pkg", &["mut create [src/pkg] in"]),
            ("ln -s a b", &["mut edit [a,b] in"]),
            ("truncate -s 0 log.txt", &["mut edit [log.txt] in"]),
            ("./run.sh", &["opaque"]),
            ("make lint", &["opaque"]),
            ("python -c \"open('out.txt','w').write('x')\"", &["mut edit [out.txt] in"]),
            ("python -c 'print(1)'", &["opaque"]),
            ("python3 - <<'EOF'\nfrom pathlib import Path\nPath('a.py').write_text('x')\nEOF", &["mut edit [a.py] in"]),
            ("create foo.py", &["mut create [foo.py] in"]),
            ("str_replace_editor create /repo/new.py --file_text 'x'", &["mut create [/repo/new.py] in"]),
            (
                "str_replace_editor str_replace /repo/a.py --old_str 'x && y' --new_str 'z'",
                &["mut edit [/repo/a.py] in"],
            ),
            ("str_replace_editor insert /repo/a.py --insert_line 3", &["mut edit [/repo/a.py] in"]),
            ("str_replace_editor view /repo/a.py", &["read [/repo/a.py]"]),
            ("append", &["mut edit [] in"]),
            ("find . -name '*.pyc' -delete", &["mut delete [.] in"]),
            ("find . -name '*.py' -exec grep -l foo {} \\;", &["search [.]"]),
            ("find /tmp -name x -exec rm {} +", &["mut delete [/tmp] out"]),
            ("ls | xargs rm", &["mut delete [] in"]),
            ("find . -name '*.py' | xargs sed -i 's/a/b/'", &["mut edit [] in"]),
            ("cat x | sh", &["opaque"]),
            (
                "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a.py\n+x\n*** End Patch\nEOF",
                &["mut create [a.py] in"],
            ),
        ],
    );
}

#[test]
fn git_commands_that_change_no_file() {
    table(
        None,
        &[
            ("git stash drop", &["inert"]),
            ("git stash list", &["read"]),
            ("git commit -m \"fix && test; done\"", &["inert"]),
            ("git add -A", &["inert"]),
            ("git status", &["read"]),
            ("git log --oneline | head -5", &["read"]),
            ("git show HEAD -- a.py", &["read [a.py]"]),
            ("git --no-pager diff", &["read"]),
        ],
    );
}

#[test]
fn redirections() {
    table(
        None,
        &[
            ("echo hi > out.txt", &["mut edit [out.txt] in"]),
            ("echo hi >> out.txt", &["mut edit [out.txt] in"]),
            ("printf 'a\\n' >out.txt", &["mut edit [out.txt] in"]),
            ("echo hi > /dev/null", &["read"]),
            ("ls 2>&1", &["read"]),
            ("ls >&2", &["read"]),
            ("ls 2> err.log", &["mut edit [err.log] in"]),
            ("ls &> /dev/null", &["read"]),
            ("ls > /dev/null 2>&1", &["read"]),
            ("git diff > fix.patch", &["mut edit [fix.patch] in"]),
            ("grep x a | sort > out.txt", &["mut edit [out.txt] in"]),
            ("cat < in.txt", &["read"]),
            ("[[ a > b ]]", &["read"]),
            ("pytest > out.txt 2>&1", &["check regression:pytest"]),
            ("./run.sh > out.log", &["mut edit [out.log] in"]),
            ("./run.sh > /tmp/out.log", &["opaque"]),
        ],
    );
}
