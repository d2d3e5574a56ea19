//! Deterministic synthetic populations of episode packages (`episode-package/1`).
//!
//! A population crosses models x harness levels H0..H3 x tasks (grouped in clusters,
//! one repository per cluster) x seeds x attempts. Each episode is a small simulation
//! of an agent fixing a bug, recorded with the evidence its harness level keeps:
//!
//! - H0 records actions only; H1 adds tools; H2 adds context; H3 adds the verification
//!   trace (agent checks), attribution, a recorded interventions trace, an entropy audit,
//!   a verification report and a reproduction log. Fix rates and gate quality rise
//!   with the level.
//! - Study design per (task, seed): 30% forced-revision runs (the agent must make 3..6
//!   revisions; evaluator oracles judge most revisions, and later revisions can lose a
//!   correct state; these runs have a verification trace at every level, holding only
//!   evaluator and verifier records below H3), 20% common-state starts
//!   (`outcome.start_state`).
//! - Three verifiers (`judge-a`, `judge-b`, `judge-c`) judge candidates through one
//!   shared latent "looks right" factor, so their false accepts are correlated.
//! - Shared artifacts dedupe across episodes: `artifacts/task-spec.md` (every episode
//!   of a task), `artifacts/repo-snapshot.txt` (H2, H3) and the unmodified repository's
//!   test log (the reproduction run's output).
//!
//! Output is a pure function of [`Config`]: every episode draws from its own stream,
//! seeded from (`seed`, episode index), so the thread count does not matter.

mod episode;
mod model;
mod rng;
mod text;
mod world;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rayon::prelude::*;

pub use world::LEVELS;

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Number of episode packages.
    pub episodes: usize,
    /// Index of the first episode written: a run writes episodes `first..first +
    /// episodes` of the population's fixed order, so a population too big for the disk
    /// can be written, ingested and deleted in parts that together equal one run.
    pub first: usize,
    /// Population seed: same config, byte-identical output.
    pub seed: u64,
    /// Number of models.
    pub models: usize,
    /// Number of tasks.
    pub tasks: usize,
    /// Tasks per cluster (one repository per cluster).
    pub cluster_size: usize,
    /// Most attempts of one (cell, seed); a later attempt follows a failed one.
    pub attempts_max: u32,
    /// Scales the size of generated tool-output logs (1.0: 10-200 KB like real runs;
    /// 0.05 for scale tests where a million realistic episodes would not fit on disk).
    pub output_scale: f64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            episodes: 1000,
            first: 0,
            seed: 1,
            models: 4,
            tasks: 50,
            cluster_size: 5,
            output_scale: 1.0,
            attempts_max: 2,
        }
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub episodes: usize,
    pub files: usize,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid synth config: {0}")]
    Config(String),
    #[error("output directory {} is not empty", .0.display())]
    NotEmpty(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

/// Writes the population of `config` under `out` (created if missing; it must be
/// empty), one package directory per episode at
/// `out/<model>/<level>/<task>/s<seed>-a<attempt>/`. Episodes are generated in
/// parallel on the current rayon pool. `progress` is called after each episode is
/// written with the number written so far (calls are serialised, counts increase).
pub fn generate(config: &Config, out: &Path, progress: impl Fn(usize) + Sync) -> Result<Summary> {
    let generator = Generator::new(config)?;
    match fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::NotEmpty(out.to_path_buf()));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs::create_dir_all(out).map_err(io(out))?,
        Err(e) => return Err(io(out)(e)),
    }
    let done = Mutex::new(0usize);
    (0..generator.len())
        .into_par_iter()
        .map(|i| {
            let package = generator.build(i);
            let summary = write_package(out, &package)?;
            let mut n = done.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            progress(*n);
            Ok(summary)
        })
        .try_reduce(Summary::default, |a, b| {
            Ok(Summary { episodes: a.episodes + b.episodes, files: a.files + b.files, bytes: a.bytes + b.bytes })
        })
}

/// A population planned but not yet built: each package is built on demand, so a
/// population can go straight into a store without its files touching the disk (a
/// million realistic packages are 11 million files).
pub struct Generator {
    seed: u64,
    output_scale: f64,
    world: world::World,
    slots: Vec<episode::Slot>,
}

impl Generator {
    pub fn new(config: &Config) -> Result<Generator> {
        check(config)?;
        let world = world::World::new(config);
        let slots = population(config, &world);
        Ok(Generator { seed: config.seed, output_scale: config.output_scale, world, slots })
    }

    /// Packages in this run (`config.episodes`).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Package `i` of this run (`0..len()`): its directory, relative to the output
    /// directory, and its files (path inside the package, bytes) as `generate` writes
    /// them.
    pub fn package(&self, i: usize) -> (String, Vec<(String, Vec<u8>)>) {
        let package = self.build(i);
        (package.dir, package.files)
    }

    fn build(&self, i: usize) -> episode::Package {
        episode::build(&self.world, self.seed, self.output_scale, &self.slots[i])
    }
}

fn check(config: &Config) -> Result<()> {
    let positive = [
        ("models", config.models),
        ("tasks", config.tasks),
        ("cluster_size", config.cluster_size),
        ("attempts_max", config.attempts_max as usize),
    ];
    for (name, value) in positive {
        if value == 0 {
            return Err(Error::Config(format!("{name} must be at least 1")));
        }
    }
    if config.first.checked_add(config.episodes).is_none() {
        return Err(Error::Config("first + episodes is too large".into()));
    }
    if !(config.output_scale > 0.0 && config.output_scale <= 10.0) {
        return Err(Error::Config("output_scale must lie in (0, 10]".into()));
    }
    Ok(())
}

fn write_package(out: &Path, package: &episode::Package) -> Result<Summary> {
    let dir = out.join(&package.dir);
    let mut made: Vec<PathBuf> = Vec::new();
    let mut bytes = 0u64;
    for (rel, data) in &package.files {
        let path = dir.join(rel);
        let parent = path.parent().expect("package files live in a directory");
        if !made.iter().any(|m| m == parent) {
            fs::create_dir_all(parent).map_err(io(parent))?;
            made.push(parent.to_path_buf());
        }
        fs::write(&path, data).map_err(io(&path))?;
        bytes += data.len() as u64;
    }
    Ok(Summary { episodes: 1, files: package.files.len(), bytes })
}

/// Episodes `first..first + episodes` of the population in order: rounds of seeds;
/// within a round tasks round-robin over clusters, then models, then levels; a (cell,
/// seed) may have several attempts, the earlier ones ending badly. Any prefix is as
/// balanced as it can be.
fn population(config: &Config, world: &world::World) -> Vec<episode::Slot> {
    let end = config.first + config.episodes; // checked by `check`
    let mut out = Vec::with_capacity(config.episodes);
    // Episodes before `first` are walked (so every index and attempt chain is the same
    // as in one run) but not kept.
    let mut index = 0usize;
    if config.episodes == 0 {
        return out;
    }
    for round in 0u64.. {
        let seed = round + 1;
        for &task in &world.task_order {
            for model in 0..config.models {
                for level in 0..LEVELS.len() {
                    let mut rng = rng::Prng::new(&[
                        config.seed,
                        rng::STREAM_RUN,
                        1 << 32,
                        task as u64,
                        model as u64,
                        level as u64,
                        seed,
                    ]);
                    let mut attempts = 1;
                    while attempts < config.attempts_max && rng.chance(0.18) {
                        attempts += 1;
                    }
                    for attempt in 1..=attempts {
                        let slot =
                            episode::Slot { index, model, level, task, seed, attempt, retried: attempt < attempts };
                        if index >= config.first {
                            out.push(slot);
                        }
                        index += 1;
                        if index == end {
                            return out;
                        }
                    }
                }
            }
        }
    }
    unreachable!("the loop returns once the population is full")
}

#[cfg(test)]
mod tests;
