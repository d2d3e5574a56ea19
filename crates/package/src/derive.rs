//! Derived state (spec 5): observed revisions, check freshness, evidence posture.
//! The store computes these; a recorder's own claims are kept beside them.

use crate::model::{Episode, TRACE_FILES};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posture {
    Current,
    Stale,
    Failure,
    Gap,
    Unknown,
}

impl Posture {
    pub fn as_str(self) -> &'static str {
        match self {
            Posture::Current => "current",
            Posture::Stale => "stale",
            Posture::Failure => "failure",
            Posture::Gap => "gap",
            Posture::Unknown => "unknown",
        }
    }
}

/// Fills in every record's observed revision, every check's bound revision and
/// freshness, the final revision and the posture.
///
/// Fails with (file, line, message) when a check's recorded `revision` lies above the
/// final revision. Assumes `seq` values are unique (checked by the parser).
pub fn derive_state(e: &mut Episode) -> Result<(), (&'static str, u32, String)> {
    // Seqs of the ok mutating actions, sorted: the revision at seq s is the number of
    // them strictly below s (a mutating action sees the revision before its mutation).
    let mut mutations: Vec<u64> =
        e.actions.iter().flatten().filter(|a| a.advances_revision()).map(|a| a.common.seq).collect();
    mutations.sort_unstable();
    let revision_at = |seq: u64| mutations.partition_point(|&m| m < seq) as u64;
    let final_revision = mutations.len() as u64;

    macro_rules! stamp {
        ($trace:expr) => {
            for r in $trace.iter_mut().flatten() {
                r.common.revision = revision_at(r.common.seq);
            }
        };
    }
    stamp!(e.actions);
    stamp!(e.tools);
    stamp!(e.context);
    stamp!(e.checks);
    stamp!(e.attributions);
    stamp!(e.interventions);
    stamp!(e.entropy);

    for check in e.checks.iter_mut().flatten() {
        if let Some(r) = check.recorded_revision {
            if r > final_revision {
                return Err((
                    TRACE_FILES[3].0,
                    check.common.line,
                    format!("revision {r} lies outside 0..={final_revision} (the final revision)"),
                ));
            }
        }
        check.bound_revision = check.recorded_revision.unwrap_or(check.common.revision);
        check.fresh = check.bound_revision == final_revision;
    }
    e.derived.final_revision = final_revision;
    e.derived.posture = posture(e).as_str().to_string();
    Ok(())
}

/// The first rule of spec 5 that holds.
fn posture(e: &Episode) -> Posture {
    if !e.manifest.trace_complete {
        return Posture::Unknown;
    }
    let last = e.derived.final_revision;
    let on_final = || e.agent_checks().filter(|c| c.bound_revision == last);
    if on_final().any(|c| c.failed()) {
        return Posture::Failure;
    }
    let passed_on_final = on_final().any(|c| c.passed());
    if last > 0 && !passed_on_final && e.agent_checks().any(|c| c.bound_revision < last) {
        return Posture::Stale;
    }
    if e.agent_checks().next().is_none() {
        return Posture::Gap;
    }
    if passed_on_final {
        return Posture::Current;
    }
    Posture::Unknown
}
