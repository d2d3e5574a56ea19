//! Whether a path lies inside the workspace: the run's working directory, the directory a
//! `cd` earlier in the command moved to, and the places (/tmp, /dev, /proc, ~) always outside.

use super::args::positionals;

pub(super) enum Cwd {
    Known(String),
    Home,
    Unknown,
}

pub(super) struct Ctx {
    pub(super) workdir: Option<String>,
    /// Reading: a `cd` earlier in the command moves where relative paths point, so
    /// `cd /tmp && rm x` removes a file outside the workspace.
    pub(super) cwd: Cwd,
}

pub(super) fn norm_path(p: &str) -> String {
    let abs = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !abs {
                    parts.push("..");
                }
            }
            c => parts.push(c),
        }
    }
    let j = parts.join("/");
    if abs {
        format!("/{j}")
    } else {
        j
    }
}

fn under(p: &str, root: &str) -> bool {
    root == "/" || p == root || p.strip_prefix(root).is_some_and(|r| r.starts_with('/'))
}

fn is_home(p: &str) -> bool {
    p.starts_with('~') || p.starts_with("$HOME") || p.starts_with("${HOME}")
}

impl Ctx {
    /// Whether commands now run in a directory known to lie outside the workspace (a
    /// known working directory, and a `cd` or the call's own directory elsewhere;
    /// `~` counts as elsewhere). Unknown is not elsewhere.
    pub(super) fn cwd_outside(&self) -> bool {
        match (&self.cwd, &self.workdir) {
            (Cwd::Home, Some(_)) => true,
            (Cwd::Known(c), Some(w)) => !under(c, w),
            _ => false,
        }
    }

    pub(super) fn inside(&self, p: &str) -> bool {
        if is_home(p) {
            return false;
        }
        let abs = if p.starts_with('/') {
            norm_path(p)
        } else {
            match &self.cwd {
                Cwd::Known(c) => norm_path(&format!("{c}/{p}")),
                Cwd::Home => return false,
                Cwd::Unknown => return true,
            }
        };
        // Reading: a path inside a working directory that itself lies under /tmp is in the
        // workspace; otherwise every run in /tmp would change nothing.
        if let Some(w) = &self.workdir {
            if under(&abs, w) {
                return true;
            }
        }
        if ["/tmp", "/dev", "/proc"].iter().any(|r| under(&abs, r)) {
            return false;
        }
        self.workdir.is_none()
    }

    pub(super) fn cd(&mut self, args: &[String]) {
        let dir = positionals(args, "").into_iter().next();
        self.cwd = match dir.as_deref() {
            None => Cwd::Home,
            Some(d) if is_home(d) => Cwd::Home,
            Some(d) if d == "-" || d.contains('$') || d.contains('`') => Cwd::Unknown,
            Some(d) if d.starts_with('/') => Cwd::Known(norm_path(d)),
            Some(d) => match &self.cwd {
                Cwd::Known(c) => Cwd::Known(norm_path(&format!("{c}/{d}"))),
                Cwd::Home => Cwd::Home,
                Cwd::Unknown => Cwd::Unknown,
            },
        };
    }
}
