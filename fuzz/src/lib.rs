//! Helpers shared by the fuzz targets.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A scratch directory of this process, for targets whose API reads files: under
/// `$TMPDIR` (`.ci/fuzz` points that at a directory it removes afterwards), named after
/// the target and the process, created once.
pub fn scratch(target: &str) -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("epistore-fuzz-{target}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create the fuzz scratch directory");
        dir
    })
}

/// Writes `bytes` to `dir/name` (replacing what was there), creating `dir`.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    std::fs::create_dir_all(dir).expect("cannot create a fuzz scratch directory");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("cannot write the fuzz input");
    path
}

/// `EPISTORE_FUZZ_VERBOSE=1`: targets say what they did with each input (for triage,
/// and to check that the seeds get past the parsers' front doors).
pub fn verbose() -> bool {
    static VERBOSE: OnceLock<bool> = OnceLock::new();
    *VERBOSE.get_or_init(|| std::env::var_os("EPISTORE_FUZZ_VERBOSE").is_some_and(|v| v != "0"))
}
