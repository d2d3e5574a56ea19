//! A SWE-agent run's configuration: 0.x `args.yaml` in the run folder, 1.x
//! `<id>.config.yaml` beside the trajectory (and `run_batch.config.yaml` above it), and
//! the 1.x trajectory's own `replay_config`. Only structured fields are read: the model
//! (`agent.model.model_name` in 0.x, `agent.model.name` in 1.x), the instance id and the
//! repository.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Input, Refusal};

/// Whether a file name is one a SWE-agent configuration is written under.
pub(crate) fn is_config_name(name: &str) -> bool {
    let name = name.to_lowercase();
    (name.ends_with(".yaml") || name.ends_with(".yml"))
        && (name == "args.yaml" || name.ends_with(".args.yaml") || name.ends_with("config.yaml"))
}

/// The configuration files that may describe the trajectory at `traj` (stem `stem`), best
/// first: the run's own (1.x `<id>.config.yaml`), then the run folder's (0.x `args.yaml`,
/// `<prefix>.args.yaml` among `args_files`, the folder's `*.args.yaml`; 1.x
/// `run_batch.config.yaml` here or one folder up). The caller keeps the ones that exist.
pub(crate) fn candidates(traj: &Path, stem: &str, args_files: &[PathBuf]) -> Vec<PathBuf> {
    let Some(dir) = traj.parent() else {
        return Vec::new();
    };
    let mut names: Vec<PathBuf> = vec![
        dir.join(format!("{stem}.config.yaml")),
        dir.join(format!("{stem}.args.yaml")),
        dir.join("args.yaml"),
        dir.join("config.yaml"),
    ];
    // `<prefix>.args.yaml` where the trajectory's name starts with the prefix (run
    // folders flattened beside each other); the longest prefix is the closest.
    let mut prefixed: Vec<(usize, PathBuf)> = args_files
        .iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            let prefix = name.strip_suffix(".args.yaml")?;
            (!prefix.is_empty() && stem.starts_with(prefix)).then(|| (prefix.len(), p.clone()))
        })
        .collect();
    prefixed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    names.extend(prefixed.into_iter().map(|(_, p)| p));
    names.push(dir.join("run_batch.config.yaml"));
    if let Some(up) = dir.parent() {
        names.push(up.join("run_batch.config.yaml"));
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// The `*.args.yaml` files of a folder: those given, and those on disk.
pub(crate) fn args_files(dir: &Path, given: &[PathBuf]) -> Vec<PathBuf> {
    let is_args = |p: &Path| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".args.yaml"));
    let mut out: Vec<PathBuf> = given.iter().filter(|p| p.parent() == Some(dir) && is_args(p)).cloned().collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        out.extend(entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| is_args(p)));
    }
    out.sort();
    out.dedup();
    out
}

/// Reads a configuration file: YAML, whose value may itself be a JSON string (1.x writes
/// `yaml.dump(config.model_dump_json())`).
pub(crate) fn read(input: &Input, text: &str) -> Result<Value, Refusal> {
    let v: Value = serde_yaml_ng::from_str(text).map_err(|e| {
        let line = e.location().map(|l| l.line()).unwrap_or(1);
        crate::Refusal::at_line(
            input.display(),
            line,
            format!("not valid YAML ({e}); expected a SWE-agent run configuration"),
        )
    })?;
    Ok(unwrap_json_string(v))
}

/// A configuration that is a JSON string (1.x `replay_config`, `*.config.yaml`) as its value.
pub(crate) fn unwrap_json_string(v: Value) -> Value {
    match &v {
        Value::String(s) if s.trim_start().starts_with('{') => epistore_package::json_from_str(s).unwrap_or(v),
        _ => v,
    }
}

/// Every model a configuration names: `agent.model.model_name` (0.x), `agent.model.name`
/// (1.x), and each of a 1.x retry agent's `agent.agent_configs[].model`.
pub(crate) fn models(config: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(agent) = config.get("agent") else {
        return out;
    };
    let mut agents: Vec<&Value> = vec![agent];
    if let Some(list) = agent.get("agent_configs").and_then(Value::as_array) {
        agents.extend(list.iter());
    }
    for a in agents {
        if let Some(model) = a.get("model") {
            for key in ["model_name", "name"] {
                if let Some(name) = model.get(key).and_then(Value::as_str).filter(|s| !s.trim().is_empty()) {
                    out.push(name.to_string());
                    break;
                }
            }
        }
    }
    out
}

/// The instance a 1.x configuration runs (`problem_statement.id`).
pub(crate) fn instance_id(config: &Value) -> Option<String> {
    let id = config.get("problem_statement")?.get("id")?.as_str()?;
    (!id.is_empty()).then(|| id.to_string())
}

/// The repository a configuration names as `owner/name`: a GitHub URL (1.x
/// `env.repo.github_url`, 0.x `environment.data_path` / `repo_path` when they are one).
pub(crate) fn repository(config: &Value) -> Option<String> {
    let urls = [
        config.pointer("/env/repo/github_url"),
        config.pointer("/env/repo/url"),
        config.pointer("/environment/repo_path"),
        config.pointer("/environment/data_path"),
    ];
    urls.into_iter().flatten().filter_map(Value::as_str).find_map(github_repo)
}

/// The repository the run's working tree is in, in 1.x (`env.repo.repo_name`): the working
/// directory is `/` + that name.
pub(crate) fn repo_dir(config: &Value) -> Option<String> {
    let name = config.pointer("/env/repo/repo_name")?.as_str()?;
    (!name.is_empty()).then(|| format!("/{}", name.trim_start_matches('/')))
}

/// `owner/name` of a GitHub URL (`https://github.com/o/n`, `.../issues/1`, `.git`).
pub(crate) fn github_repo(url: &str) -> Option<String> {
    let rest = url.trim().split_once("github.com/")?.1;
    let mut parts = rest.split('/').filter(|p| !p.is_empty());
    let owner = parts.next()?;
    let name = parts.next()?.trim_end_matches(".git");
    (!owner.is_empty() && !name.is_empty()).then(|| format!("{owner}/{name}"))
}
