//! Tells the integration tests which outside tools this machine has, so tests that need
//! a missing one are reported as ignored (with the reason) instead of passing while
//! they skipped. Three switches, each on when found or when CI requires it:
//!
//! - `epistore_browser`: Chromium (`CHROMIUM`, else /usr/bin/chromium) and
//!   playwright-core (`PLAYWRIGHT_CORE`), or `EPISTORE_REQUIRE_BROWSER` set;
//! - `epistore_python`: python3 with the client packages the notebook tests import, or
//!   `EPISTORE_REQUIRE_PYTHON` set;
//! - `epistore_root`: running as root (the full-disk test mounts a tmpfs).
//!
//! Detection reruns when one of those variables changes; after installing a tool, set
//! `EPISTORE_REDETECT` to any new value (or `touch crates/cli/build.rs`).

use std::path::Path;
use std::process::Command;

/// What the notebook-side tests import (tests/integration/python.rs runs them).
const PYTHON_IMPORTS: &str =
    "import pytest, pyarrow, polars, duckdb, pandas, adbc_driver_flightsql, nbclient, matplotlib";

fn main() {
    for var in
        ["CHROMIUM", "PLAYWRIGHT_CORE", "EPISTORE_REQUIRE_BROWSER", "EPISTORE_REQUIRE_PYTHON", "EPISTORE_REDETECT"]
    {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rerun-if-changed=crates/cli/build.rs");
    for cfg in ["epistore_browser", "epistore_python", "epistore_root"] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
    }
    let required = |var: &str| std::env::var_os(var).is_some();

    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let playwright = std::env::var("PLAYWRIGHT_CORE").is_ok_and(|p| Path::new(&p).exists());
    if required("EPISTORE_REQUIRE_BROWSER") || (Path::new(&chromium).exists() && playwright) {
        println!("cargo::rustc-cfg=epistore_browser");
    }

    // The test probes the same list again at run time (and fails if it is gone).
    println!("cargo::rustc-env=EPISTORE_PYTHON_IMPORTS={PYTHON_IMPORTS}");
    let python = Command::new("python3").args(["-c", PYTHON_IMPORTS]).output().is_ok_and(|o| o.status.success());
    if required("EPISTORE_REQUIRE_PYTHON") || python {
        println!("cargo::rustc-cfg=epistore_python");
    }

    let uid = Command::new("id").arg("-u").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if uid.as_deref() == Some("0") {
        println!("cargo::rustc-cfg=epistore_root");
    }
}
