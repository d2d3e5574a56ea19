//! The fixed world a population is drawn from: models, repositories (one per task
//! cluster) and tasks, with each task's shared artifacts (task specification, repository
//! snapshot, baseline test log) rendered once so every episode of the task carries the
//! same bytes.

use rayon::prelude::*;

use crate::model::{Lang, Model, Repo, SrcFile, Task};
use crate::rng::{Prng, STREAM_TASK, STREAM_WORLD};
use crate::text;
use crate::Config;

pub const LEVELS: [&str; 4] = ["H0", "H1", "H2", "H3"];

/// Responsibilities each harness level exposes (cumulative up the ladder).
pub const COMPONENTS: [&[&str]; 4] = [
    &["task_specification"],
    &["task_specification", "tool_access", "observability"],
    &["task_specification", "tool_access", "observability", "context_selection", "project_memory", "task_state"],
    &[
        "task_specification",
        "tool_access",
        "observability",
        "context_selection",
        "project_memory",
        "task_state",
        "failure_attribution",
        "verification",
        "entropy_auditing",
        "intervention_recording",
    ],
];

// The eleven responsibilities, as the package format spells them.
use epistore_package::RESPONSIBILITIES;

/// Responsibilities a level does not expose: what a missing-harness intervention stands in for.
pub fn missing_at(level: usize) -> Vec<&'static str> {
    RESPONSIBILITIES.iter().copied().filter(|r| !COMPONENTS[level].contains(r)).collect()
}

const MODELS: &[(&str, &str, &str, f64, f64, f64)] = &[
    // name, version, provider, skill, usd per 1M tokens in, out
    ("qwen2.5-coder-14b", "2026-05", "local", 0.45, 0.0, 0.0),
    ("llama-3.3-70b-instruct", "2026-03", "openrouter", 0.55, 0.23, 0.40),
    ("deepseek-coder-v2-lite", "2026-04", "local", 0.35, 0.0, 0.0),
    ("gpt-oss-20b", "2026-02", "openrouter", 0.60, 0.05, 0.20),
    ("codestral-22b", "2026-01", "mistral", 0.50, 0.20, 0.60),
    ("granite-code-8b", "2026-04", "local", 0.28, 0.0, 0.0),
    ("starcoder2-15b", "2026-02", "local", 0.32, 0.0, 0.0),
    ("phi-4-mini", "2026-03", "azure", 0.38, 0.07, 0.30),
];

pub struct World {
    pub models: Vec<Model>,
    pub repos: Vec<Repo>,
    pub tasks: Vec<Task>,
    /// Task indices in round-robin order over clusters, so a prefix of the population
    /// spans as many clusters as it can.
    pub task_order: Vec<usize>,
}

const REPO_NAMES: &[&str] = &[
    "login-app",
    "csv-toolkit",
    "httpkit",
    "ledger-core",
    "cron-parser",
    "markdown-lite",
    "rate-limiter",
    "geo-index",
    "job-queue",
    "config-loader",
    "image-resize",
    "feed-reader",
    "invoice-service",
    "search-lite",
    "chat-bridge",
    "sync-agent",
];

const MODULES: &[&str] = &[
    "validate", "parser", "config", "auth", "session", "cache", "router", "format", "reader", "errors", "retry",
    "schedule", "store", "query", "limits", "encode", "decode", "client", "cli", "util", "render", "index", "money",
    "tokens", "paths", "locale",
];

pub const FIELDS: &[&str] = &[
    "password", "username", "email", "timeout", "header", "path", "date", "amount", "token", "port", "tag", "slug",
    "limit", "offset", "locale", "filename", "query", "cursor",
];

/// (family, slug template, R1 template); `{f}` is the field.
const FAMILIES: &[(&str, &str, &str)] = &[
    ("validation", "reject-empty-{f}", "Reject an empty {f} with a clear error message"),
    ("parsing", "quoted-{f}", "Parse quoted {f} values that contain the delimiter"),
    ("off-by-one", "{f}-range-end", "Include the last element of a {f} range"),
    ("error-handling", "propagate-{f}-errors", "Propagate {f} errors to the caller instead of swallowing them"),
    ("concurrency", "racy-{f}-update", "Make concurrent {f} updates safe"),
    ("performance", "quadratic-{f}-scan", "Bring {f} lookup back to linear time"),
    ("api-migration", "migrate-{f}-api", "Move {f} callers to the new API without behaviour changes"),
    ("security", "escape-{f}-output", "Escape {f} before writing it into HTML output"),
];

impl World {
    pub fn new(config: &Config) -> World {
        let mut rng = Prng::new(&[config.seed, STREAM_WORLD]);
        let models = (0..config.models)
            .map(|i| {
                let (name, version, provider, skill, usd_in, usd_out) = MODELS[i % MODELS.len()];
                let round = i / MODELS.len();
                let name = if round == 0 { name.to_string() } else { format!("{name}-r{}", round + 1) };
                let skill = (skill + rng.uniform(-0.05, 0.05)).clamp(0.05, 0.95);
                Model { name, version, provider, skill, usd_in, usd_out }
            })
            .collect();

        let clusters = config.tasks.div_ceil(config.cluster_size);
        let repos: Vec<Repo> = (0..clusters).map(|c| make_repo(&mut rng, c)).collect();

        // Task skeletons first (cheap, sequential: ids must be unique), then their
        // artifacts in parallel, each from the task's own stream.
        let mut seen = std::collections::BTreeSet::new();
        let mut skeletons = Vec::with_capacity(config.tasks);
        for t in 0..config.tasks {
            let c = t / config.cluster_size;
            let repo = &repos[c];
            let (family, slug, r1) = *rng.pick(FAMILIES);
            let field = *rng.pick(FIELDS);
            let mut id = format!("{}-{}", repo.name, slug.replace("{f}", field));
            let mut k = 2;
            while !seen.insert(id.clone()) {
                id = format!("{}-{}-{k}", repo.name, slug.replace("{f}", field));
                k += 1;
            }
            skeletons.push((t, c, id, family, field, r1.replace("{f}", field)));
        }
        let seed = config.seed;
        let tasks: Vec<Task> = skeletons
            .into_par_iter()
            .map(|(t, c, id, family, field, r1)| make_task(seed, t, c, &repos[c], id, family, field, r1))
            .collect();

        let cs = config.cluster_size;
        let mut task_order: Vec<usize> = (0..config.tasks).collect();
        task_order.sort_by_key(|t| (t % cs, t / cs));
        World { models, repos, tasks, task_order }
    }
}

fn make_repo(rng: &mut Prng, c: usize) -> Repo {
    let base = REPO_NAMES[c % REPO_NAMES.len()];
    let name = if c < REPO_NAMES.len() { base.to_string() } else { format!("{base}-{}", c / REPO_NAMES.len() + 1) };
    let lang = *rng.pick(&[Lang::Python, Lang::JavaScript, Lang::Rust, Lang::Go, Lang::Python, Lang::JavaScript]);
    let n = rng.int(7, 13) as usize;
    let modules: Vec<String> = rng.sample(MODULES.len(), n).into_iter().map(|i| MODULES[i].to_string()).collect();
    let pkg = name.replace('-', "_");
    let files = modules
        .iter()
        .map(|m| {
            let path = match lang {
                Lang::Python => format!("src/{pkg}/{m}.py"),
                Lang::JavaScript => format!("src/{m}.js"),
                Lang::Rust => format!("src/{m}.rs"),
                Lang::Go => format!("{m}/{m}.go"),
            };
            SrcFile { path, module: m.clone(), lines: rng.int(60, 420) as u32 }
        })
        .collect();
    let test_files: Vec<String> = modules
        .iter()
        .map(|m| match lang {
            Lang::Python => format!("tests/test_{m}.py"),
            Lang::JavaScript => format!("test/{m}.test.js"),
            Lang::Rust => format!("tests/{m}.rs"),
            Lang::Go => format!("{m}/{m}_test.go"),
        })
        .collect();
    let mut tests = Vec::new();
    for (i, m) in modules.iter().enumerate() {
        for _ in 0..rng.int(6, 30) {
            let case = text::test_case_name(rng);
            let name = match lang {
                Lang::Python => format!("{}::test_{m}_{case}", test_files[i]),
                Lang::JavaScript => format!("{m} {}", case.replace('_', " ")),
                Lang::Rust => format!("{m}::{case}"),
                Lang::Go => format!("Test{}{}", text::camel(m), text::camel(&case)),
            };
            if !tests.contains(&name) {
                tests.push(name);
            }
        }
    }
    Repo { url: format!("https://git.example.org/synth/{name}.git"), name, lang, modules, files, test_files, tests }
}

#[allow(clippy::too_many_arguments)]
fn make_task(
    seed: u64,
    t: usize,
    c: usize,
    repo: &Repo,
    id: String,
    family: &'static str,
    field: &'static str,
    r1: String,
) -> Task {
    let mut rng = Prng::new(&[seed, STREAM_TASK, t as u64]);
    let focus = rng.index(repo.modules.len());
    let file = &repo.files[focus];
    let mut regions = Vec::new();
    for _ in 0..if rng.chance(0.25) { 2 } else { 1 } {
        let (path, lines) = if regions.is_empty() || rng.chance(0.5) {
            (file.path.clone(), file.lines)
        } else {
            let other = &repo.files[rng.index(repo.files.len())];
            (other.path.clone(), other.lines)
        };
        let start = rng.int(5, lines as u64 - 12) as u32;
        let end = start + rng.int(0, 6) as u32;
        regions.push((path, start, end));
    }
    let fault_locations = match rng.f() {
        x if x < 0.78 => Some(
            regions.iter().map(|(p, s, e)| if s == e { format!("{p}:{s}") } else { format!("{p}:{s}-{e}") }).collect(),
        ),
        x if x < 0.85 => Some(vec![]),
        _ => None,
    };
    let mut requirements = vec![("R1".to_string(), r1)];
    requirements.push(("R2".into(), format!("Keep existing {} behaviour for valid input", file.module)));
    if rng.chance(0.55) {
        let r3 = match rng.index(3) {
            0 => format!("Add a regression test for the {field} case"),
            1 => format!("Do not change the public API of the {} module", file.module),
            _ => "Leave no debugging output or scratch files behind".to_string(),
        };
        requirements.push(("R3".into(), r3));
    }
    // Test names spell the module in the framework's case (`TestConfig...`, `config::...`).
    let module_tests: Vec<&String> =
        repo.tests.iter().filter(|n| n.to_ascii_lowercase().contains(file.module.as_str())).collect();
    let pool: Vec<&String> = if module_tests.is_empty() { repo.tests.iter().collect() } else { module_tests };
    let k = rng.int(1, 3) as usize;
    let bug_tests: Vec<String> = rng.sample(pool.len(), k).into_iter().map(|i| pool[i].clone()).collect();
    let summary = format!(
        "{} in `{}`: {}",
        match family {
            "validation" => "Missing validation",
            "parsing" => "Parser bug",
            "off-by-one" => "Off-by-one",
            "error-handling" => "Swallowed error",
            "concurrency" => "Data race",
            "performance" => "Performance regression",
            "api-migration" => "API migration",
            _ => "Injection risk",
        },
        file.path,
        requirements[0].1.to_lowercase()
    );
    let commit = rng.hex(7);
    let mut task = Task {
        id,
        family,
        cluster: repo.name.clone(),
        repo: c,
        commit,
        focus,
        field,
        requirements,
        fault_locations,
        regions,
        graded: rng.chance(0.3),
        difficulty: rng.uniform(0.1, 0.9),
        actions_max: *rng.pick(&[30, 40, 50, 60, 80, 120]),
        bug_tests,
        summary,
        spec_md: Vec::new(),
        snapshot: Vec::new(),
        baseline_log: Vec::new(),
    };
    task.spec_md = text::task_spec(&mut rng, repo, &task).into_bytes();
    task.snapshot = text::snapshot(&mut rng, repo, &task).into_bytes();
    let failing: Vec<&str> = task.bug_tests.iter().map(String::as_str).collect();
    let size = rng.log_uniform(10_000.0, 60_000.0) as usize;
    task.baseline_log = text::test_log(&mut rng, repo, &task, &failing, None, size).into_bytes();
    task
}
