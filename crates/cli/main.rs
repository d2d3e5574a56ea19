//! The `epistore` binary: the command line of `lib.rs`.

fn main() -> std::process::ExitCode {
    epistore_cli::run(std::env::args_os())
}
