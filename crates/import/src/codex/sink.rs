//! The one place a Codex log's events become [`Recorder`] calls: turns and their
//! completion claims, people's interventions, and each tool call's records. Both readers
//! (rollout, `codex exec --json`) feed it events in stream order.

use serde_json::Value;

use crate::recorder::{Grade, Message};
use crate::{Call, Recorder};

use super::calls::{self, Spec};
use crate::common::apply_patch::{self, Change};

/// A tool call at its start, with whatever the log shows of its result.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub ts: Option<String>,
    pub tool: String,
    pub command: String,
    pub spec: Spec,
    pub exit: Option<(i64, Grade)>,
    pub duration_ms: Option<f64>,
    pub output: String,
    pub timed_out: bool,
    /// The files a patch event or file-change item names.
    pub changes: Option<Vec<(String, Change)>>,
    /// A patch's success as a structured field reports it.
    pub success: Option<bool>,
    /// Declined before it ran (`rejected by user`, a `declined` status).
    pub declined: bool,
    /// A person approved it when asked (an approval request the log shows, then the run).
    pub approved: bool,
    pub failure: Option<&'static str>,
    /// The call's id as the log spells it.
    pub call_id: Option<String>,
    /// The call's arguments as the log gives them.
    pub arguments: Option<Value>,
    /// What the tool printed, when the log shows it: the call's output file.
    pub printed: Option<String>,
    /// The tool said it failed (or succeeded), where a structured field says so.
    pub is_error: Option<bool>,
    /// A patch event's or file-change item's `changes`, for the edit's diff.
    pub raw_changes: Option<Value>,
}

impl Pending {
    pub fn new(ts: Option<String>, tool: impl Into<String>, command: impl Into<String>, spec: Spec) -> Pending {
        Pending {
            ts,
            tool: tool.into(),
            command: command.into(),
            spec,
            exit: None,
            duration_ms: None,
            output: String::new(),
            timed_out: false,
            changes: None,
            success: None,
            declined: false,
            approved: false,
            failure: None,
            call_id: None,
            arguments: None,
            printed: None,
            is_error: None,
            raw_changes: None,
        }
    }

    /// The log's id of the call (an empty id is none).
    pub fn id(mut self, id: &str) -> Pending {
        self.call_id = (!id.is_empty()).then(|| id.to_string());
        self
    }

    pub fn arguments(mut self, arguments: Option<Value>) -> Pending {
        self.arguments = arguments.filter(|a| !a.is_null());
        self
    }
}

pub(super) struct Sink {
    pub rec: Recorder,
    /// The log marks the end of every turn (`task_complete`, `turn.completed`). Without
    /// such marks (older rollouts), a turn ends at the next person message, an abort or
    /// the end of the log, and its claim is its last agent message when nothing the
    /// agent did came after it.
    marked: bool,
    /// A marked turn has started and not ended (completed or aborted).
    turn_open: bool,
    /// Denials are a person's unless the log names another reviewer.
    pub person_reviews: bool,
    prompt_seen: bool,
    last_agent: Option<(Option<String>, String)>,
    agent_spoke_last: bool,
    pending_stop: Option<&'static str>,
    total_tokens: Option<(i64, i64)>,
    summed_tokens: Option<(i64, i64)>,
    total_cached: Option<i64>,
    patch: Option<String>,
    /// The model the log names at this point (`turn_context`, session settings), put
    /// on the agent's messages.
    pub model: Option<String>,
}

impl Sink {
    pub fn new(rec: Recorder, marked: bool) -> Sink {
        Sink {
            rec,
            marked,
            turn_open: false,
            person_reviews: true,
            prompt_seen: false,
            last_agent: None,
            agent_spoke_last: false,
            pending_stop: None,
            total_tokens: None,
            summed_tokens: None,
            total_cached: None,
            patch: None,
            model: None,
        }
    }

    /// A model a structured field names: the run's, and the one of the messages after it.
    pub fn model(&mut self, model: &str) {
        self.rec.model(model);
        if !model.trim().is_empty() {
            self.model = Some(model.to_string());
        }
    }

    /// A message or message part, at its place in the stream; the agent's carry the
    /// model of the moment.
    pub fn say(&mut self, m: Message) {
        let m = if m.role == crate::recorder::Role::Assistant { m.model(self.model.clone()) } else { m };
        self.rec.message(m);
    }

    /// A message a person wrote: the first is the run's prompt, every later one an
    /// intervention.
    pub fn person_message(&mut self, ts: Option<&str>, text: &str) {
        self.rec.saw_time(ts);
        if !self.marked {
            self.close_turn();
        }
        if self.prompt_seen {
            self.rec.person_message(ts, text);
        } else {
            self.prompt_seen = true;
        }
    }

    pub fn agent_message(&mut self, ts: Option<&str>, text: &str) {
        self.rec.saw_time(ts);
        if !text.trim().is_empty() {
            self.last_agent = Some((ts.map(str::to_string), text.to_string()));
            self.agent_spoke_last = true;
        }
    }

    pub fn turn_started(&mut self, ts: Option<&str>) {
        self.rec.saw_time(ts);
        if self.marked {
            self.last_agent = None;
            self.agent_spoke_last = false;
            self.turn_open = true;
        }
    }

    /// The turn ended normally (`task_complete`, `turn.completed`): the agent's claim.
    pub fn turn_complete(&mut self, ts: Option<&str>, last_message: Option<&str>) {
        let summary = last_message.map(str::to_string).or_else(|| self.last_agent.take().map(|(_, t)| t));
        self.rec.complete(ts, summary.as_deref());
        self.pending_stop = None;
        self.last_agent = None;
        self.agent_spoke_last = false;
        self.turn_open = false;
    }

    /// A person interrupted the turn: no claim for it.
    pub fn abort(&mut self, ts: Option<&str>, reason: &str) {
        self.rec.person_abort(ts, reason);
        self.last_agent = None;
        self.agent_spoke_last = false;
        self.turn_open = false;
    }

    /// The run (or its turn) ended in an error; `budget_exhausted` when Codex says a
    /// context window or usage limit was reached.
    pub fn error(&mut self, ts: Option<&str>, reason: &'static str) {
        self.rec.saw_time(ts);
        self.pending_stop = Some(reason);
        self.agent_spoke_last = false;
    }

    /// A cumulative usage total (`token_count` `total_token_usage`, `turn.completed`):
    /// the last one is the run's.
    pub fn total_tokens(&mut self, tokens_in: i64, tokens_out: i64) {
        self.total_tokens = Some((tokens_in, tokens_out));
    }

    /// The cached part of the last cumulative total's input tokens.
    pub fn total_cached(&mut self, cached: Option<i64>) {
        self.total_cached = cached;
    }

    /// One response's usage (the oldest `token_count`, a bare usage): summed.
    pub fn add_tokens(&mut self, tokens_in: i64, tokens_out: i64) {
        let s = self.summed_tokens.get_or_insert((0, 0));
        s.0 += tokens_in;
        s.1 += tokens_out;
    }

    pub fn turn_diff(&mut self, diff: &str) {
        if !diff.trim().is_empty() {
            self.patch = Some(diff.to_string());
        }
    }

    /// A command a person ran in the agent's shell (`!cmd`).
    pub fn person_command(&mut self, ts: Option<&str>, command: &str, output: &str, exit: Option<i64>) {
        if !self.marked {
            self.close_turn();
        }
        // A structured exit code is observed; the `Exit code: N` of Codex's record of
        // the command is derived.
        let mut call = Call::new("user_shell").ts(ts).output(output);
        call.exit_code = match exit {
            Some(c) => Some((c, Grade::Observed)),
            None => calls::exit_from_text(output).map(|c| (c, Grade::Derived)),
        };
        self.rec.person_command(call, command);
    }

    /// One tool call: its tools record and what follows from it (section 4).
    pub fn call(&mut self, mut p: Pending) {
        self.agent_spoke_last = false;
        if p.command.is_empty() {
            // An edit the log shows only as its changes: those are its arguments.
            if let Some(changes) = &p.changes {
                p.command = calls::changes_command(changes);
            }
        }
        let mut call = Call::new(p.tool.clone())
            .command(p.command.clone())
            .ts(p.ts.clone())
            .duration(p.duration_ms)
            .id(p.call_id.clone())
            .is_error(p.is_error);
        if let Some(a) = p.arguments.take() {
            call = call.arguments(a);
        }
        call.exit_code = p.exit;
        call.output = p.output.clone();
        call.timed_out = p.timed_out;
        call.failure_type = p.failure;
        if p.declined {
            let kind = match &p.spec {
                Spec::Patch(_) => "edit",
                Spec::Tool(kind, _) => kind,
                _ => "run",
            };
            self.rec.refused(call, kind);
            if self.person_reviews {
                self.rec.person_decision(p.ts.as_deref(), false, &p.command);
            }
            return;
        }
        if p.approved && self.person_reviews {
            self.rec.person_decision(p.ts.as_deref(), true, &p.command);
        }
        // A declined call never ran: it printed nothing the log shows. Otherwise the
        // output file is what the tool printed, and what is read from the text (exit
        // codes) is read from what the model was shown.
        let printed = p.printed.take();
        match p.spec {
            Spec::Shell(command) => {
                if call.exit_code.is_none() {
                    call.exit_code = crate::shell::exit_code_from_text(&p.output).map(|c| (c, Grade::Derived));
                }
                self.rec.shell(with_printed(call, printed), &command);
            }
            Spec::Patch(text) => {
                let (kind, paths) = match &p.changes {
                    Some(c) if !c.is_empty() => apply_patch::summarise(c),
                    _ => apply_patch::patch_files(&text),
                };
                if call.exit_code.is_none() {
                    call.exit_code = calls::exit_from_text(&p.output).map(|c| (c, Grade::Derived));
                }
                let exit = call.exit_code.map(|(c, _)| c);
                let ok = p.success.unwrap_or_else(|| apply_patch::patch_ok_from_text(&p.output, exit));
                if !ok && call.failure_type.is_none() && !matches!(exit, Some(c) if c != 0) {
                    call.failure_type = Some("other");
                }
                let rec = &self.rec;
                let (diff, fragment) =
                    apply_patch::patch_diff(&text, p.raw_changes.as_ref(), &|path| rec.relative(path));
                if fragment && diff.is_some() {
                    self.rec.fragment_diff();
                }
                self.rec.edit(with_printed(call, printed).diff(diff), kind, &paths, ok);
            }
            Spec::Tool(kind, paths) => {
                self.rec.tool(with_printed(call, printed), kind, &paths);
            }
            Spec::Stdin { empty: true } => {
                self.rec.tool(with_printed(call, printed), "read", &[]);
            }
            Spec::Stdin { empty: false } | Spec::Opaque => {
                self.rec.opaque(with_printed(call, printed));
            }
        }
    }

    fn close_turn(&mut self) {
        if self.agent_spoke_last {
            if let Some((ts, text)) = self.last_agent.take() {
                self.rec.complete(ts.as_deref(), Some(&text));
                self.pending_stop = None;
            }
        }
        self.last_agent = None;
        self.agent_spoke_last = false;
    }

    pub fn finish(mut self) -> Recorder {
        if !self.marked {
            self.close_turn();
        } else if self.turn_open && self.pending_stop.is_none() {
            // `task_started` without its `task_complete` (the red team's rollout ended
            // after "Now running the tests."): no claim is guessed from the last words.
            self.rec.log_cut_mid_turn();
        }
        if let Some((i, o)) = self.total_tokens.or(self.summed_tokens) {
            self.rec.tokens(Some(i), Some(o));
            if self.total_tokens.is_some() {
                self.rec.cache_tokens(self.total_cached, None);
            }
        }
        if let Some(p) = &self.patch {
            self.rec.patch(p);
        }
        if let Some(reason) = self.pending_stop {
            self.rec.stop_reason(reason);
        }
        self.rec
    }
}

/// The call with its output file, when the log shows what the tool printed.
fn with_printed(call: Call, printed: Option<String>) -> Call {
    match printed {
        Some(text) => call.output(text),
        None => call,
    }
}
