//! The messages of a mini-SWE-agent trajectory as one stream of recorder calls.
//!
//! The log is read in turns: a turn starts at a message that carries actions (the
//! model's assistant message, or in human mode a person's `User command`) and holds the
//! messages up to the next one: the observations of its actions, the messages the
//! harness writes for a person (`extra.interrupt_type`: `UserRejection`,
//! `UserInterruption`, `UserNewTask`), and the `exit` message of a submission. A turn is
//! flushed whole, because what happened to an action is told by what follows it (a
//! rejection comes after the "not executed" results of the calls it refused).

use regex::{Regex, RegexBuilder};
use serde_json::Value;

use super::text;
use crate::common::template_fill;
use crate::recorder::Message;
use crate::{Call, Grade, Recorder};

/// The first line of output by which the agent submits (1.x and 2.x spellings).
const SENTINELS: [&str; 2] = ["COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT"];

/// 1.x and 2.x text-based action blocks, when the configuration names none.
const DEFAULT_ACTION_REGEXES: [&str; 2] = [r"```mswea_bash_command\s*\n(.*?)\n```", r"```bash\s*\n(.*?)\n```"];

struct Action {
    command: String,
    tool: String,
    id: Option<String>,
    /// The tool call's arguments (2.x tool calls), as the log gives them.
    arguments: Option<Value>,
    /// A command a person typed in human mode.
    human: bool,
}

struct Turn<'a> {
    /// The message that started the turn (none for the messages after the task).
    start: Option<&'a Value>,
    actions: Vec<Action>,
    ts: Option<f64>,
    followers: Vec<&'a Value>,
}

/// What an observation message says about its action.
struct Obs {
    id: Option<String>,
    output: String,
    /// The log shows the whole output (`extra.raw_output`, or the `<output>` of the
    /// observation's text); not when the harness cut it to its head and tail.
    shown: bool,
    exit: Option<(i64, Grade)>,
    timed_out: bool,
    not_executed: bool,
    ts: Option<f64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Person {
    Rejection,
    Abort,
    NewTask,
}

pub(super) fn stream(rec: &mut Recorder, msgs: &[Value], config: &Value, exit_status: &str) {
    let regexes = action_regexes(config);
    let times: Vec<f64> = msgs.iter().filter_map(ts).collect();
    if let Some(first) = times.iter().copied().reduce(f64::min) {
        rec.saw_time(rfc3339(first).as_deref());
    }
    let has_exit_msg = msgs.iter().any(|m| role(m) == "exit");
    // The first user message is the task; what comes before it is the system prompt.
    let start = msgs.iter().position(|m| role(m) == "user").map_or(0, |i| i + 1);
    rec.record_messages();
    let template = config.pointer("/agent/instance_template").and_then(Value::as_str);
    for m in &msgs[..start] {
        let t = text(m);
        if role(m) == "user" {
            if let Some(task) = template.and_then(|tpl| template_fill(tpl, &t)) {
                rec.task_prompt(&task);
            }
            rec.message(Message::user(t).ts(ts(m).and_then(rfc3339)));
        } else {
            rec.message(Message::system(t).ts(ts(m).and_then(rfc3339)));
        }
    }
    let mut turns = vec![Turn { start: None, actions: Vec::new(), ts: None, followers: Vec::new() }];
    for m in &msgs[start..] {
        tokens(rec, m);
        match turn_start(m, &regexes) {
            Some(actions) => turns.push(Turn { start: Some(m), actions, ts: ts(m), followers: Vec::new() }),
            None => turns.last_mut().expect("one turn at least").followers.push(m),
        }
    }
    let last = turns.len() - 1;
    for (i, turn) in turns.iter().enumerate() {
        let submitted =
            turn.followers.iter().any(|f| {
                role(f) == "exit" && f.pointer("/extra/exit_status").and_then(Value::as_str) == Some("Submitted")
            }) || (i == last && exit_status == "Submitted" && !has_exit_msg && !turn.actions.is_empty());
        flush(rec, turn, submitted);
    }
    if let Some(end) = times.iter().copied().reduce(f64::max) {
        rec.saw_time(rfc3339(end).as_deref());
    }
}

fn flush(rec: &mut Recorder, turn: &Turn, submitted: bool) {
    let rejected = turn.followers.iter().any(|f| person(f) == Some(Person::Rejection));
    let obs: Vec<Obs> = turn.followers.iter().filter(|f| is_observation(f)).map(|f| observation(f)).collect();
    // Each action's result: by tool call id, else the next one in order.
    let mut used = vec![false; obs.len()];
    let mut matched: Vec<Option<usize>> = Vec::with_capacity(turn.actions.len());
    for a in &turn.actions {
        let by_id = a.id.as_ref().and_then(|id| (0..obs.len()).find(|&j| !used[j] && obs[j].id.as_deref() == Some(id)));
        let j = by_id.or_else(|| (0..obs.len()).find(|&j| !used[j] && (obs[j].id.is_none() || a.id.is_none())));
        if let Some(j) = j {
            used[j] = true;
        }
        matched.push(j);
    }
    // The submit command: the one that printed the sentinel and got no result of its own
    // (the harness took its output as the submission; a padded "not executed" is not a
    // result), also when a person then gave a new task instead of letting it end.
    let no_result = |k: usize| matched[k].is_none_or(|j| obs[j].not_executed);
    let sentinel = |a: &Action| SENTINELS.iter().any(|s| a.command.contains(s));
    let new_task = turn.followers.iter().any(|f| person(f) == Some(Person::NewTask));
    let submit = if rejected || !(submitted || new_task) {
        None
    } else {
        let n = turn.actions.len();
        (0..n).find(|&k| sentinel(&turn.actions[k]) && no_result(k)).or_else(|| (0..n).rev().find(|&k| no_result(k)))
    };
    if let Some(m) = turn.start {
        rec.message(said(m));
    }
    let mut boundary = turn.ts;
    for (k, a) in turn.actions.iter().enumerate() {
        let mut call = Call::new(a.tool.clone())
            .command(a.command.clone())
            .ts(boundary.and_then(rfc3339))
            .id(a.id.clone())
            .arguments(a.arguments.clone().unwrap_or(Value::Null));
        if Some(k) == submit {
            rec.note("the submit command's exit code is not logged (its output is the submission)");
            run(rec, call, a);
            continue;
        }
        match matched[k].map(|j| &obs[j]) {
            Some(o) if o.not_executed => {
                let call = if rejected { call } else { call.failure("other") };
                rec.refused(call, "run");
            }
            Some(o) => {
                call = if o.shown {
                    call.output(o.output.clone())
                } else {
                    rec.note(if o.output.contains("<output_head>") {
                        "an output the harness cut to its head and tail is not kept as the call's output"
                    } else {
                        "an observation with no `<output>` and no `raw_output` is not kept as the call's output"
                    });
                    Call { output: o.output.clone(), ..call }
                };
                call.exit_code = o.exit;
                call.timed_out = o.timed_out;
                if let (Some(s), Some(e)) = (boundary, o.ts) {
                    if e >= s {
                        call.duration_ms = Some((e - s) * 1000.0);
                    }
                }
                boundary = o.ts.or(boundary);
                run(rec, call, a);
            }
            None if rejected => {
                rec.refused(call, "run");
            }
            None => {
                rec.note("an action without a logged result (the run stopped while it ran): its outcome is unknown");
                run(rec, call, a);
            }
        }
    }
    if submit.is_some() {
        rec.complete(None, None);
    }
    for f in &turn.followers {
        let at = ts(f).and_then(rfc3339);
        // The observations are the calls' results, which the recorder writes.
        let message = match person(f) {
            Some(Person::Rejection) => {
                rec.person_decision(at.as_deref(), false, &text(f));
                Some(Message::human(text(f)))
            }
            Some(Person::Abort) => {
                rec.person_abort(at.as_deref(), &text(f));
                Some(Message::human(text(f)))
            }
            Some(Person::NewTask) => {
                rec.person_message(at.as_deref(), &text(f));
                Some(Message::human(text(f)))
            }
            None if is_observation(f) => None,
            None => match role(f) {
                "system" => Some(Message::system(text(f))),
                // The harness's messages to the model (a format error, the output it
                // took as the submission); `exit` is its closing record, not a message.
                "user" => Some(Message::harness(text(f))),
                "assistant" => Some(said(f)),
                _ => None,
            },
        };
        if let Some(m) = message {
            rec.message(m.ts(at));
        }
    }
}

/// What a message that starts a turn says: the model's text (with its action blocks, as
/// the log keeps them), thinking, usage and model; a person's command in human mode.
fn said(m: &Value) -> Message {
    let at = ts(m).and_then(rfc3339);
    if role(m) == "user" {
        return Message::human(text(m)).ts(at);
    }
    let thinking: Vec<String> = m
        .get("thinking_blocks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("thinking").and_then(Value::as_str).map(str::to_string))
        .chain(m.get("reasoning_content").and_then(Value::as_str).map(str::to_string))
        .collect();
    let (tokens_in, tokens_out) = usage(m);
    let model = m.pointer("/extra/response/model").and_then(Value::as_str);
    Message::assistant(text(m)).reasoning(thinking.join("\n\n")).tokens(tokens_in, tokens_out).model(model).ts(at)
}

fn run(rec: &mut Recorder, call: Call, a: &Action) {
    if a.human {
        rec.person_command(call, &a.command);
    } else {
        rec.shell(call, &a.command);
    }
}

fn role(m: &Value) -> &str {
    m.get("role").or_else(|| m.get("type")).and_then(Value::as_str).unwrap_or("")
}

fn ts(m: &Value) -> Option<f64> {
    m.pointer("/extra/timestamp").and_then(Value::as_f64)
}

/// An epoch time (mini-SWE-agent's `time.time()`) as RFC 3339, in UTC, to the microsecond.
fn rfc3339(secs: f64) -> Option<String> {
    if !secs.is_finite() || secs <= 0.0 {
        return None;
    }
    let micros = (secs * 1e6).round() as i64;
    chrono::DateTime::from_timestamp_micros(micros).map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
}

/// The actions of a message that starts a turn, `None` for any other message.
fn turn_start(m: &Value, regexes: &[Regex]) -> Option<Vec<Action>> {
    let r = role(m);
    let listed = m.pointer("/extra/actions").and_then(Value::as_array);
    let human = r == "user" && listed.is_some_and(|l| !l.is_empty()) && !is_observation(m);
    let agent = r == "assistant"
        || (listed.is_some() && !matches!(r, "user" | "tool" | "exit" | "system" | "function_call_output"));
    if !human && !agent {
        return None;
    }
    let names = tool_names(m);
    let mut out = Vec::new();
    if let Some(list) = listed {
        for a in list {
            let command = a.get("command").and_then(Value::as_str).or_else(|| a.as_str()).unwrap_or("");
            let id = a.get("tool_call_id").and_then(Value::as_str).map(str::to_string);
            let named = id.as_ref().and_then(|id| names.iter().find(|(i, _, _)| i == id));
            let tool = named.map(|(_, n, _)| n.clone()).unwrap_or_else(|| {
                if id.is_some() {
                    "bash".into()
                } else {
                    "shell".into()
                }
            });
            let arguments = named.and_then(|(_, _, a)| a.clone());
            out.push(Action { command: command.to_string(), tool, id, arguments, human });
        }
    } else if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
        for c in calls {
            let f = c.get("function").unwrap_or(c);
            let args = match f.get("arguments") {
                Some(Value::String(s)) => epistore_package::json_from_str(s).unwrap_or(Value::Null),
                Some(v) => v.clone(),
                None => Value::Null,
            };
            let Some(command) = args.get("command").and_then(Value::as_str) else {
                continue;
            };
            let tool = f.get("name").and_then(Value::as_str).unwrap_or("bash").to_string();
            let id = c.get("id").or_else(|| c.get("call_id")).and_then(Value::as_str).map(str::to_string);
            out.push(Action { command: command.to_string(), tool, id, arguments: Some(args.clone()), human: false });
        }
    } else {
        // 1.x: the one action block of the text (none, or several, is a format error the
        // harness answered without running anything).
        let content = text(m);
        for re in regexes {
            let found: Vec<String> =
                re.captures_iter(&content).filter_map(|c| c.get(1)).map(|g| g.as_str().trim().to_string()).collect();
            if found.is_empty() {
                continue;
            }
            if let [one] = found.as_slice() {
                out.push(Action { command: one.clone(), tool: "shell".into(), id: None, arguments: None, human });
            }
            break;
        }
    }
    Some(out)
}

/// `(tool_call id, function name, arguments)` of an assistant message's tool calls (the
/// arguments, a JSON string in the log, read as JSON).
fn tool_names(m: &Value) -> Vec<(String, String, Option<Value>)> {
    let mut out = Vec::new();
    for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let id = c.get("id").and_then(Value::as_str);
        let name = c.pointer("/function/name").and_then(Value::as_str);
        let arguments = c.pointer("/function/arguments").map(|a| match a {
            Value::String(s) => epistore_package::json_from_str(s).unwrap_or_else(|_| a.clone()),
            other => other.clone(),
        });
        if let (Some(id), Some(name)) = (id, name) {
            out.push((id.to_string(), name.to_string(), arguments));
        }
    }
    out
}

fn action_regexes(config: &Value) -> Vec<Regex> {
    let configured = ["/model/action_regex", "/agent/action_regex"].iter().filter_map(|p| config.pointer(p)?.as_str());
    configured
        .chain(DEFAULT_ACTION_REGEXES)
        .filter_map(|p| RegexBuilder::new(p).dot_matches_new_line(true).build().ok())
        .collect()
}

fn is_observation(m: &Value) -> bool {
    let r = role(m);
    if matches!(r, "tool" | "function_call_output") || m.pointer("/extra/returncode").is_some() {
        return true;
    }
    let t = text(m);
    r == "user" && (t.contains("<returncode>") || timeout_text(&t))
}

/// 1.x's timeout template ("The last command <command>..</command> timed out and has been killed").
fn timeout_text(t: &str) -> bool {
    t.starts_with("The last command <command>") && t.contains("timed out")
}

fn observation(m: &Value) -> Obs {
    let t = text(m);
    let extra = m.get("extra");
    let get = |k: &str| extra.and_then(|e| e.get(k));
    let exception = get("exception_info").and_then(Value::as_str).unwrap_or("").trim().to_string();
    let kind = get("exception_type").and_then(Value::as_str).unwrap_or("");
    let timed_out = timeout_text(&t)
        || matches!(kind, "TimeoutExpired" | "TimeoutError" | "CommandTimeoutError")
        || exception.contains("timed out");
    let exit = match get("returncode").and_then(Value::as_i64) {
        // -1 is the harness's "no exit code" (the command raised, timed out, or never ran).
        Some(-1) if !exception.is_empty() || timed_out => None,
        Some(code) => Some((code, Grade::Observed)),
        None if timed_out => None,
        None => returncode_tag(&t).map(|c| (c, Grade::Derived)),
    };
    let (output, shown) = match get("raw_output").and_then(Value::as_str) {
        Some(raw) => (raw.to_string(), true),
        None => match output_tag(&t) {
            Some(inner) => (inner, true),
            None => (t, false),
        },
    };
    Obs {
        id: m.get("tool_call_id").or_else(|| m.get("call_id")).and_then(Value::as_str).map(str::to_string),
        output,
        shown,
        exit,
        timed_out,
        not_executed: exception == "action was not executed",
        ts: ts(m),
    }
}

/// The text of an observation's `<output>` tag: the template writes `<output>`, a newline,
/// the output, `</output>`. An output cut to `<output_head>` and `<output_tail>` has none.
fn output_tag(t: &str) -> Option<String> {
    let rest = t.split_once("<output>")?.1;
    let inner = &rest[..rest.rfind("</output>")?];
    Some(inner.strip_prefix('\n').unwrap_or(inner).to_string())
}

fn returncode_tag(t: &str) -> Option<i64> {
    let rest = t.split_once("<returncode>")?.1;
    rest.split_once("</returncode>")?.0.trim().parse().ok()
}

/// A message the harness wrote for a person, by its interrupt type (2.x) or its fixed
/// wording (1.x, which has no `extra`).
fn person(m: &Value) -> Option<Person> {
    match m.pointer("/extra/interrupt_type").and_then(Value::as_str) {
        Some("UserRejection") => return Some(Person::Rejection),
        Some("UserInterruption") => return Some(Person::Abort),
        Some("UserNewTask") => return Some(Person::NewTask),
        Some(_) => return None,
        None => {}
    }
    if role(m) != "user" || m.pointer("/extra").is_some() {
        return None;
    }
    let t = text(m);
    // 1.x: "Command not executed. The user rejected your command with ..."; 2.x: "Commands ...".
    if t.starts_with("Command not executed.") || t.starts_with("Commands not executed.") {
        Some(Person::Rejection)
    } else if t.starts_with("Interrupted by user") {
        Some(Person::Abort)
    } else if t.starts_with("The user added a new task") {
        Some(Person::NewTask)
    } else {
        None
    }
}

/// Tokens of a model call, from the provider's response kept in `extra.response.usage`.
fn tokens(rec: &mut Recorder, m: &Value) {
    let (i, o) = usage(m);
    if i.is_some() || o.is_some() {
        rec.tokens(i, o);
    }
}

/// `(input, output)` tokens of `extra.response.usage`.
fn usage(m: &Value) -> (Option<i64>, Option<i64>) {
    let Some(usage) = m.pointer("/extra/response/usage") else {
        return (None, None);
    };
    let n = |keys: [&str; 2]| keys.iter().find_map(|k| usage.get(*k).and_then(Value::as_i64));
    (n(["prompt_tokens", "input_tokens"]), n(["completion_tokens", "output_tokens"]))
}
