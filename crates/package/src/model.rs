//! The typed form of a validated package. Enumerated values are kept as the strings
//! the contract spells (they become dictionary columns in SQL); defaults of the
//! contract are already applied. Fields the contract does not name are kept, as a
//! JSON object text, in `extra`.

use serde::{Deserialize, Serialize};

pub const RESPONSIBILITIES: &[&str] = &[
    "task_specification",
    "context_selection",
    "tool_access",
    "project_memory",
    "task_state",
    "observability",
    "failure_attribution",
    "verification",
    "permissions",
    "entropy_auditing",
    "intervention_recording",
];
pub const GRADES: &[&str] = &["observed", "derived", "inferred"];
/// Revision 1.2 (docs/format.md §9.5): on an action or check, the workspace state it
/// started from, as the harness identifies it (kept in the record's `extra`).
pub const STATE_DIGEST: &str = "state_digest";
/// Revision 1.2 (docs/format.md §9.5): in `outcome.json`, the workspace state at the
/// end of the run (kept in the outcome's `extra`).
pub const FINAL_STATE_DIGEST: &str = "final_state_digest";
pub const ACTION_KINDS: &[&str] =
    &["read", "search", "edit", "create", "delete", "run", "plan", "message", "complete", "other"];
pub const FAILURE_TYPES: &[&str] =
    &["none", "nonzero_exit", "timeout", "crash", "parse_error", "permission_denied", "not_found", "other"];
pub const CONTEXT_KINDS: &[&str] =
    &["architecture", "testing", "task_state", "memory", "known_failures", "code", "doc", "issue", "other"];
pub const CHECK_ACTORS: &[&str] = &["agent", "human", "evaluator", "verifier"];
pub const CHECK_METHODS: &[&str] = &[
    "reproduction",
    "deterministic_check",
    "registered_test",
    "targeted_test",
    "regression",
    "lint",
    "review",
    "manual",
    "oracle",
    "judge",
];
/// `unknown` only in revision 1.1: the check ran, its result was not observed.
pub const CHECK_RESULTS: &[&str] = &["pass", "fail", "timeout", "error", "skipped", "unknown"];
/// The results revision 1 allows.
pub const CHECK_RESULTS_V1: &[&str] = &["pass", "fail", "timeout", "error", "skipped"];
pub const VERDICTS: &[&str] = &["accept", "reject"];
pub const ATTRIBUTION_CATEGORIES: &[&str] =
    &["context", "tool", "feedback", "verification", "recovery", "entropy", "model", "unknown"];
pub const INTERVENTION_ACTORS: &[&str] = &["human", "evaluator", "other"];
pub const INTERVENTION_KINDS: &[&str] =
    &["hint", "correction", "context_provision", "permission_grant", "approval", "rollback", "abort", "other"];
pub const BURDENS: &[&str] = &["low", "medium", "high"];
pub const ENTROPY_CATEGORIES: &[&str] =
    &["code", "documentation", "dependency", "test", "file_residue", "architecture", "workflow"];
pub const ENTROPY_PHASES: &[&str] = &["pre", "post"];
pub const LABELS: &[&str] =
    &["autonomous_verified_success", "assisted_verified_success", "unverified_success", "failed", "unsafe_invalid"];
/// The labels that say the success was *verified* (not `unverified_success`). One rule
/// for every place that asks: `label_audit`'s `verified_without_current_posture` and
/// `verified_but_incorrect` (queries/label_audit.sql lists the same two; a test checks)
/// and the episode page's "posture and label disagree" warning.
pub const VERIFIED_SUCCESS_LABELS: &[&str] = &["autonomous_verified_success", "assisted_verified_success"];

/// Does `label` say the success was verified? ([`VERIFIED_SUCCESS_LABELS`])
pub fn label_claims_verified(label: &str) -> bool {
    VERIFIED_SUCCESS_LABELS.contains(&label)
}
pub const START_STATES: &[&str] = &["correct", "wrong"];
pub const ADMISSIONS: &[&str] = &["accepted", "rejected", "pending"];
pub const REQUIREMENT_STATUSES: &[&str] = &["verified", "unverified", "failed"];
pub const STOP_REASONS: &[&str] =
    &["completed", "budget_exhausted", "escalated", "invalid_action", "timeout", "infra_error", "other"];
/// The roles of a messages record (revision 1.2, docs/format.md §9.1).
pub const ROLES: &[&str] = &["system", "user", "assistant", "tool"];
/// The evidence postures (docs/format.md §6.3), spelled by [`crate::Posture::as_str`].
pub const POSTURES: &[&str] = &crate::Posture::NAMES;

/// The eight trace files, in the order the store reports them (messages, added by
/// revision 1.2, last, so the first seven keep their places).
pub const TRACE_FILES: [(&str, TraceKind); 8] = [
    ("traces/actions.jsonl", TraceKind::Actions),
    ("traces/tools.jsonl", TraceKind::Tools),
    ("traces/context.jsonl", TraceKind::Context),
    ("traces/verification.jsonl", TraceKind::Verification),
    ("traces/attribution.jsonl", TraceKind::Attribution),
    ("traces/interventions.jsonl", TraceKind::Interventions),
    ("traces/entropy.jsonl", TraceKind::Entropy),
    ("traces/messages.jsonl", TraceKind::Messages),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TraceKind {
    Actions,
    Tools,
    Context,
    Verification,
    Attribution,
    Interventions,
    Entropy,
    Messages,
}

impl TraceKind {
    /// The short name used for columns (`n_actions`, `has_tools`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TraceKind::Actions => "actions",
            TraceKind::Tools => "tools",
            TraceKind::Context => "context",
            TraceKind::Verification => "verification",
            TraceKind::Attribution => "attribution",
            TraceKind::Interventions => "interventions",
            TraceKind::Entropy => "entropy",
            TraceKind::Messages => "messages",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Requirement {
    pub id: String,
    pub text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub episode: String,
    pub model: String,
    pub model_version: Option<String>,
    pub model_provider: Option<String>,
    pub harness_name: Option<String>,
    pub harness_level: String,
    pub harness_version: Option<String>,
    pub harness_components: Option<Vec<String>>,
    pub task: String,
    pub task_family: Option<String>,
    /// `task.cluster`, defaulted to `task.id`.
    pub cluster: String,
    pub repository_url: Option<String>,
    pub repository_commit: Option<String>,
    pub requirements: Vec<Requirement>,
    pub seed: Option<i64>,
    pub attempt: i64,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub trace_complete: bool,
    /// `tags` as JSON object text.
    pub tags: Option<String>,
    /// `task.prompt` (revision 1.2): the task as given, whole.
    pub task_prompt: Option<String>,
    pub extra: Option<String>,
}

impl Manifest {
    /// The `provenance` object of a revision 1.1 package (kept among the unknown
    /// fields, as the revision says), `None` for a revision 1 package or without one.
    pub fn provenance(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        if self.revision() < crate::Revision::V1_1 {
            return None;
        }
        let extra = crate::parse_json_text(self.extra.as_deref()?).ok()?;
        match extra.get("provenance")? {
            serde_json::Value::Object(map) => Some(map.clone()),
            _ => None,
        }
    }

    /// The format revision the package declares (only readable ones are stored).
    pub fn revision(&self) -> crate::Revision {
        crate::Revision::of(&self.format).unwrap_or(crate::Revision::V1)
    }

    /// `provenance.source_format`: which importer format the package came from.
    pub fn source_format(&self) -> Option<String> {
        self.provenance()?.get("source_format")?.as_str().map(str::to_string)
    }

    /// `provenance.supersedes`: the episode id of the earlier import this one grew from.
    pub fn supersedes(&self) -> Option<String> {
        self.provenance()?.get("supersedes")?.as_str().map(str::to_string)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequirementStatus {
    pub id: String,
    pub status: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// `None`: not adjudicated (revision 1.1 `"label": null`). Stored as the empty
    /// string, which no label spells, so store records keep the layout they had when
    /// a label was always present.
    #[serde(with = "label_codec")]
    pub label: Option<String>,
    pub agent_reported_complete: Option<bool>,
    pub stop_reason: String,
    pub correct: Option<bool>,
    pub start_state: Option<String>,
    pub admission: Option<String>,
    pub requirements: Vec<RequirementStatus>,
    pub actions_used: Option<i64>,
    pub actions_max: Option<i64>,
    pub budget_exhausted: Option<bool>,
    pub tokens_in: Option<i64>,
    pub tokens_out: Option<i64>,
    pub cost_usd: Option<f64>,
    pub wall_ms: Option<f64>,
    /// Ground-truth locations; `None` when absent, empty when given as `[]`.
    pub fault_locations: Option<Vec<String>>,
    pub score: Option<f64>,
    pub notes: Option<String>,
    /// The recorder's own posture claim, kept beside the derived one.
    pub recorded_posture: Option<String>,
    /// `final_message` (revision 1.2): the agent's last message, whole.
    pub final_message: Option<String>,
    pub extra: Option<String>,
}

impl Outcome {
    /// `cost.cache_read_tokens` and `cost.cache_write_tokens` (revision 1.2, kept in
    /// `extra`): of `tokens_in`, those read from and written to a prompt cache.
    pub fn cache_tokens(&self) -> (Option<i64>, Option<i64>) {
        let Some(text) = self.extra.as_deref().filter(|t| t.contains("cache_")) else { return (None, None) };
        let Ok(extra) = crate::parse_json_text(text) else { return (None, None) };
        let get = |k: &str| extra.get("cost").and_then(|c| c.get(k)).and_then(serde_json::Value::as_i64);
        (get("cache_read_tokens"), get("cache_write_tokens"))
    }
}

mod label_codec {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(label: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
        label.as_deref().unwrap_or("").serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let text = String::deserialize(d)?;
        Ok((!text.is_empty()).then_some(text))
    }
}

/// Fields every trace record has, plus what the store derives for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Common {
    pub seq: u64,
    /// 1-based line in its file.
    pub line: u32,
    pub ts: Option<String>,
    pub grade: String,
    /// Derived: the observed revision at this record's `seq` (docs/format.md §6.1).
    pub revision: u64,
    pub extra: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub common: Common,
    pub kind: Option<String>,
    pub paths: Vec<String>,
    pub summary: Option<String>,
    pub mutates: bool,
    pub ok: bool,
    pub tool_seq: Option<u64>,
    /// `diff` (revision 1.2): the unified diff of this edit.
    pub diff: Option<String>,
}

impl Action {
    /// An ok mutating action advances the observed revision.
    pub fn advances_revision(&self) -> bool {
        self.mutates && self.ok
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub common: Common,
    pub tool: String,
    pub command: Option<String>,
    pub exit_code: Option<i64>,
    pub duration_ms: Option<f64>,
    pub timed_out: bool,
    /// The recorded `failure_type`, when present.
    pub recorded_failure_type: Option<String>,
    /// The effective failure type: the recorded one, else derived (docs/format.md §5.3).
    pub failure_type: String,
    pub recovered_by: Option<u64>,
    pub output: Option<String>,
    /// Derived: the text of the file `output` names, capped (docs/format.md §9.3).
    pub output_text: Option<String>,
    /// Derived: the whole size of that file.
    pub output_bytes: Option<u64>,
}

impl Tool {
    pub fn failed(&self) -> bool {
        self.failure_type != "none"
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextRecord {
    pub common: Common,
    pub artifact: String,
    pub kind: Option<String>,
    pub purpose: Option<String>,
    pub used: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub common: Common,
    pub check_id: String,
    pub actor: Option<String>,
    pub method: Option<String>,
    pub command: Option<String>,
    pub result: Option<String>,
    pub exit_code: Option<i64>,
    pub duration_ms: Option<f64>,
    pub requirements: Vec<String>,
    /// The `revision` field as recorded.
    pub recorded_revision: Option<u64>,
    /// Derived: the recorded revision, else the observed revision at `seq`.
    pub bound_revision: u64,
    /// Derived: bound to the episode's final revision.
    pub fresh: bool,
    pub suite_id: Option<String>,
    pub verifier: Option<String>,
    pub verdict: Option<String>,
    pub score: Option<f64>,
    pub interpretation: Option<String>,
}

impl Check {
    pub fn is_agent(&self) -> bool {
        self.actor.as_deref() == Some("agent")
    }
    pub fn passed(&self) -> bool {
        self.result.as_deref() == Some("pass")
    }
    /// fail, timeout or error: a failed observation.
    pub fn failed(&self) -> bool {
        matches!(self.result.as_deref(), Some("fail" | "timeout" | "error"))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    pub common: Common,
    pub failure_seq: u64,
    pub category: Option<String>,
    pub responsibility: Option<String>,
    pub location: Option<String>,
    pub rank: Option<i64>,
    pub confidence: Option<f64>,
    pub evidence: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intervention {
    pub common: Common,
    pub actor: Option<String>,
    pub kind: Option<String>,
    pub reason: Option<String>,
    pub missing_responsibility: Option<String>,
    pub avoidable: Option<bool>,
    pub burden: Option<String>,
    pub minutes: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntropyFinding {
    pub common: Common,
    pub category: Option<String>,
    pub severity: Option<i64>,
    pub phase: String,
    pub path: Option<String>,
    pub note: Option<String>,
}

/// A messages record (revision 1.2, docs/format.md §9.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub common: Common,
    pub role: String,
    pub author: Option<String>,
    pub text: Option<String>,
    pub reasoning: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool: Option<String>,
    /// `arguments` as compact JSON text.
    pub arguments: Option<String>,
    pub tool_seq: Option<u64>,
    pub is_error: Option<bool>,
    pub tokens_in: Option<i64>,
    pub tokens_out: Option<i64>,
    pub model: Option<String>,
}

/// Everything the store derives for an episode (docs/format.md §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    pub final_revision: u64,
    pub posture: String,
}

/// A validated episode package. A trace is `None` when its file is absent ("not
/// recorded") and `Some(vec![])` when the file is empty ("recorded, none").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    pub manifest: Manifest,
    pub outcome: Outcome,
    pub actions: Option<Vec<Action>>,
    pub tools: Option<Vec<Tool>>,
    pub context: Option<Vec<ContextRecord>>,
    pub checks: Option<Vec<Check>>,
    pub attributions: Option<Vec<Attribution>>,
    pub interventions: Option<Vec<Intervention>>,
    pub entropy: Option<Vec<EntropyFinding>>,
    /// Revision 1.2 only; `None` for earlier revisions, whatever files they hold.
    pub messages: Option<Vec<Message>>,
    pub derived: Derived,
}

impl Episode {
    /// Record count of a trace, `None` when the trace was not recorded.
    pub fn trace_len(&self, kind: TraceKind) -> Option<usize> {
        match kind {
            TraceKind::Actions => self.actions.as_ref().map(Vec::len),
            TraceKind::Tools => self.tools.as_ref().map(Vec::len),
            TraceKind::Context => self.context.as_ref().map(Vec::len),
            TraceKind::Verification => self.checks.as_ref().map(Vec::len),
            TraceKind::Attribution => self.attributions.as_ref().map(Vec::len),
            TraceKind::Interventions => self.interventions.as_ref().map(Vec::len),
            TraceKind::Entropy => self.entropy.as_ref().map(Vec::len),
            TraceKind::Messages => self.messages.as_ref().map(Vec::len),
        }
    }

    /// All agent checks (verification records with `actor` agent).
    pub fn agent_checks(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().flatten().filter(|c| c.is_agent())
    }
}
