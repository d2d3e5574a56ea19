//! What a population's world is made of: models, repositories and tasks, as plain data.
//! `world` builds them and `text` renders their artifacts. Both take the types from here,
//! so `text` never reaches into `world` and the dependencies run one way:
//! `episode` -> `world` -> `text` -> `model`.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Python,
    JavaScript,
    Rust,
    Go,
}

pub struct Model {
    pub name: String,
    pub version: &'static str,
    pub provider: &'static str,
    /// Latent ability in 0..1.
    pub skill: f64,
    pub usd_in: f64,
    pub usd_out: f64,
}

pub struct SrcFile {
    pub path: String,
    pub module: String,
    pub lines: u32,
}

pub struct Repo {
    pub name: String,
    pub url: String,
    pub lang: Lang,
    pub modules: Vec<String>,
    /// Source files, one per module, in module order.
    pub files: Vec<SrcFile>,
    /// Test files, one per module, in module order.
    pub test_files: Vec<String>,
    /// Every test of the suite (fully qualified, in the framework's spelling).
    pub tests: Vec<String>,
}

pub struct Task {
    pub id: String,
    pub family: &'static str,
    pub cluster: String,
    pub repo: usize,
    pub commit: String,
    /// Module index of the faulty code in the repository.
    pub focus: usize,
    /// The noun the task is about (`password`, `header`, ...).
    pub field: &'static str,
    pub requirements: Vec<(String, String)>,
    /// Ground truth: `None` absent, `Some(vec![])` explicitly none.
    pub fault_locations: Option<Vec<String>>,
    /// (path, start, end) of the real fault regions (also when not published).
    pub regions: Vec<(String, u32, u32)>,
    pub graded: bool,
    pub difficulty: f64,
    pub actions_max: u32,
    /// Tests that fail while the fault is present.
    pub bug_tests: Vec<String>,
    pub summary: String,
    pub spec_md: Vec<u8>,
    pub snapshot: Vec<u8>,
    /// The suite's output on the unmodified repository (deterministic: no timings).
    pub baseline_log: Vec<u8>,
}
