//! The viewer's pages from the command line: `show --format html`, `leaderboard
//! --with-episodes` (a static folder) and `ui` (the same pages, served).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use epistore_leaderboard::{BoardLinks, Leaderboard};
use epistore_package::parse_hex;
use epistore_store::Snapshot;
use epistore_view::{episode_doc, render, render_static, static_assets, FilePolicy, Links};

use crate::commands::{leaderboard_spec, open_read, open_read_with_runtime, progress_bar, Session};
use crate::{BoardFormat, LeaderboardArgs, ShowArgs, UiArgs};

fn policy(with_sources: bool) -> FilePolicy {
    FilePolicy { include_sources: with_sources, ..FilePolicy::STATIC }
}

/// Writes `text` to `path` through a file beside it, so a reader never sees half.
fn write_whole(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("epistore-tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// `show EPISODE --format html`: one page, on its own (no links, files inline).
pub fn show_html(store_dir: &Path, args: &ShowArgs) -> Result<ExitCode> {
    let store = open_read(store_dir)?;
    let snapshot = store.snapshot()?;
    let id = snapshot.resolve(&args.episode)?;
    let html = render(&episode_doc(&snapshot, &id, &Links::None, policy(args.with_sources))?)?;
    match args.out.as_deref() {
        Some(path) => {
            write_whole(path, &html)?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{html}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The episodes given a page: entries in rank order, each entry's ids in order, until
/// `max` pages.
/// The episodes that get pages, at most `max`: a share for every entry (so no entry is
/// left with none), failures and label disagreements first within each (what a reader
/// checks first), then what the budget leaves, in the board's order. Each entry's ids
/// are reordered so that its published ones come first, as the board links a prefix.
fn chosen_episodes(board: &mut Leaderboard, snapshot: &Snapshot, max: usize) -> Result<Vec<String>> {
    let share = if board.entries.is_empty() { 0 } else { (max / board.entries.len()).max(1) };
    let mut seen = HashSet::new();
    let mut chosen = Vec::new();
    for entry in &mut board.entries {
        let mut ranked = Vec::with_capacity(entry.episode_ids.len());
        for (i, id) in entry.episode_ids.iter().enumerate() {
            ranked.push((look_first(snapshot, id)?, i, id.clone()));
        }
        ranked.sort_by_key(|(first, i, _)| (!*first, *i));
        entry.episode_ids = ranked.into_iter().map(|(_, _, id)| id).collect();
        for id in entry.episode_ids.iter().take(share) {
            if chosen.len() < max && seen.insert(id.clone()) {
                chosen.push(id.clone());
            }
        }
    }
    for id in board.entries.iter().flat_map(|e| &e.episode_ids) {
        if chosen.len() >= max {
            break;
        }
        if seen.insert(id.clone()) {
            chosen.push(id.clone());
        }
    }
    Ok(chosen)
}

/// A failure or a label that says more than the evidence: what a reader looks at first.
fn look_first(snapshot: &Snapshot, id: &str) -> Result<bool> {
    let hash = parse_hex(id).with_context(|| format!("bad episode id {id} on the board"))?;
    let Some(r) = snapshot.episode(&hash)? else { return Ok(false) };
    let posture = r.derived.posture.as_str();
    let overclaimed =
        r.outcome.label.as_deref().is_some_and(epistore_package::label_claims_verified) && posture != "current";
    Ok(posture == "failure" || r.outcome.correct == Some(false) || overclaimed)
}

/// `leaderboard --format html --out DIR --with-episodes`: the board (DIR/index.html),
/// each entry's episode list (DIR/entries/N.html) and the episode pages
/// (DIR/episodes/ID.html). Written into a folder beside DIR and then moved in place,
/// so DIR is either the old folder or the whole new one.
pub fn publish_board(store_dir: &Path, args: &LeaderboardArgs) -> Result<ExitCode> {
    anyhow::ensure!(args.format == BoardFormat::Html, "--with-episodes writes HTML pages: add --format html");
    let out = args.out.as_deref().context("--with-episodes writes a folder: give it with --out DIR")?;
    let spec = leaderboard_spec(args);
    let session = Session::open(store_dir)?;
    let mut board = session.block_on(epistore_leaderboard::build(&session.engine, &spec))?;
    let snapshot = session.store.snapshot()?;
    let external = args.publish.episode_url.clone();
    // Episodes hosted elsewhere get no page here: every id links out.
    let chosen = match external {
        Some(_) => Vec::new(),
        None => chosen_episodes(&mut board, &snapshot, args.publish.max_episodes)?,
    };
    let written: Arc<HashSet<String>> = Arc::new(chosen.iter().cloned().collect());
    let entries = (0..board.entries.len()).map(|i| Some(format!("entries/{i}.html"))).collect();
    board.links = Some(match &external {
        Some(template) => BoardLinks::hosted_elsewhere(template, entries),
        None => BoardLinks {
            home: None,
            entries,
            episode: "episodes/{id}.html".into(),
            linked: Some(
                board.entries.iter().map(|e| e.episode_ids.iter().take_while(|id| written.contains(*id)).count()).collect(),
            ),
            unlinked: Some(format!(
                "no page published: --max-episodes {} (each entry gets a share, failures and label disagreements first)",
                args.publish.max_episodes
            )),
        },
    });

    let staging = sibling(out, "epistore-staging");
    if staging.exists() {
        std::fs::remove_dir_all(&staging).with_context(|| format!("clearing {}", staging.display()))?;
    }
    for dir in ["entries", "episodes", "assets"] {
        std::fs::create_dir_all(staging.join(dir)).with_context(|| format!("creating {}", staging.display()))?;
    }
    write_whole(&staging.join("index.html"), &epistore_leaderboard::to_html(&board)?)?;
    // The template's script and style once, shared by every page of the folder.
    for (name, content) in static_assets() {
        std::fs::write(staging.join("assets").join(&name), content).with_context(|| format!("writing {name}"))?;
    }
    let links = match external {
        Some(template) => Links::External { depth: 1, template: template.into() },
        None => Links::Static { depth: 1, written: written.clone() },
    };
    write_entry_lists(&snapshot, &board, &links, &staging)?;
    // The breadcrumb of an episode page: the board, the first entry (in rank order) the
    // episode stands behind, the episode.
    let mut entry_of: std::collections::HashMap<&str, (usize, &str)> = std::collections::HashMap::new();
    for (i, entry) in board.entries.iter().enumerate() {
        for id in &entry.episode_ids {
            entry_of.entry(id.as_str()).or_insert((i, entry.label.as_str()));
        }
    }
    let bar = progress_bar(false, chosen.len() as u64, "episode pages");
    for id in &chosen {
        let hash = parse_hex(id).with_context(|| format!("bad episode id {id} on the board"))?;
        let mut doc = episode_doc(&snapshot, &hash, &links, policy(args.publish.with_sources))?;
        if let Some((i, label)) = entry_of.get(id.as_str()) {
            doc["nav"] = links.nav(&[(label, Some(format!("../entries/{i}.html"))), (&id[..12.min(id.len())], None)]);
        }
        let page = render_static(&doc, 1)?;
        std::fs::write(staging.join(format!("episodes/{id}.html")), page)
            .with_context(|| format!("writing the page of {id}"))?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    replace_dir(&staging, out)?;
    let total: usize = board.entries.iter().map(|e| e.episode_ids.len()).sum();
    eprintln!(
        "wrote {} ({} entries, {} episode pages{})",
        out.display(),
        board.entries.len(),
        chosen.len(),
        if chosen.len() < total { format!(" of {total}: --max-episodes") } else { String::new() }
    );
    Ok(ExitCode::SUCCESS)
}

fn write_entry_lists(snapshot: &Snapshot, board: &Leaderboard, links: &Links, dir: &Path) -> Result<()> {
    for i in 0..board.entries.len() {
        let doc = epistore_leaderboard::entry_list(board, i, snapshot, links, None)?.expect("an entry of the board");
        std::fs::write(dir.join(format!("entries/{i}.html")), render_static(&doc, 1)?)
            .with_context(|| format!("writing the list of entry {i}"))?;
    }
    Ok(())
}

/// `DIR.suffix` beside `DIR`.
fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    dir.with_file_name(format!("{name}.{suffix}"))
}

/// Moves `staging` to `out`; an existing `out` is set aside first and removed after.
fn replace_dir(staging: &Path, out: &Path) -> Result<()> {
    let old = sibling(out, "epistore-old");
    if out.exists() {
        if old.exists() {
            std::fs::remove_dir_all(&old).with_context(|| format!("clearing {}", old.display()))?;
        }
        std::fs::rename(out, &old).with_context(|| format!("moving {} aside", out.display()))?;
    }
    std::fs::rename(staging, out).with_context(|| format!("writing {}", out.display()))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    }
    Ok(())
}

/// `epistore ui`.
pub fn ui(store_dir: &Path, args: &UiArgs) -> Result<ExitCode> {
    use std::io::Write;
    let settings = epistore_server::ui::UiSettings {
        addr: args.addr,
        token: args.token.clone().filter(|t| !t.is_empty()),
        max_concurrent: args.max_concurrent,
        allowed_hosts: args.allow_host.clone(),
    };
    // Refuse before touching the store: the refusal is about the command line.
    epistore_server::check_exposure(args.addr, settings.token.as_deref())?;
    let (store, runtime) = open_read_with_runtime(store_dir)?;
    runtime.block_on(epistore_server::ui::serve_ui(
        store,
        settings,
        |local| {
            // Scripts wait for this line (and read the port from it when asked for 0).
            println!("listening on http://{local}");
            let _ = std::io::stdout().flush();
        },
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    ))?;
    Ok(ExitCode::SUCCESS)
}
