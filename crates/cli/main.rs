//! The `epistore` binary: the command line of `lib.rs`.

fn main() -> std::process::ExitCode {
    // The commands plan SQL on this thread (`block_on` runs a future where it is
    // called), so it gets the stack the runtime's threads have, not the main thread's
    // 8 MiB.
    let args: Vec<_> = std::env::args_os().collect();
    std::thread::Builder::new()
        .name("epistore".into())
        .stack_size(epistore_sql::statement::STACK_BYTES)
        .spawn(move || epistore_cli::run(args))
        .expect("the command thread starts")
        .join()
        .unwrap_or(std::process::ExitCode::from(101))
}
