//! The table-driven tests of the shell rules, one file per part (helpers here).

mod analysis;
mod classify;
mod mutations;
mod paths;
mod python;
mod result;
mod split;

use super::*;

fn render(k: &SegmentKind) -> String {
    match k {
        SegmentKind::Check { check_id, .. } => format!("check {check_id}"),
        SegmentKind::Mutation { kind, paths, inside } => {
            format!("mut {kind} [{}] {}", paths.join(","), if *inside { "in" } else { "out" })
        }
        SegmentKind::Read { kind, paths } if paths.is_empty() => kind.to_string(),
        SegmentKind::Read { kind, paths } => format!("{kind} [{}]", paths.join(",")),
        SegmentKind::Inert => "inert".to_string(),
        SegmentKind::Opaque => "opaque".to_string(),
    }
}

fn kinds(cmd: &str, workdir: Option<&str>) -> Vec<String> {
    analyse(cmd, workdir, &Declared::default()).segments.iter().map(|s| render(&s.kind)).collect()
}

fn table(workdir: Option<&str>, rows: &[(&str, &[&str])]) {
    let mut bad = Vec::new();
    for (cmd, want) in rows {
        let got = kinds(cmd, workdir);
        if got != *want {
            bad.push(format!("{cmd:?}:\n   want {want:?}\n    got {got:?}"));
        }
    }
    let n = bad.len();
    assert!(bad.is_empty(), "{n} rows differ (workdir {workdir:?}):\n{}", bad.join("\n"));
}
