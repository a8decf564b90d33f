//! The command line, as both binaries read it.

use clap::{Command, Parser};

/// Parses this process's arguments as `C`, with every option whose environment variable is
/// set but empty read as though the variable were unset. A GitHub Actions workflow passes an
/// empty string for every repository variable that is not defined (`${{ vars.HUBDEX_STORE }}`),
/// and clap would take it as the value: a store called "", a memory budget of "". An empty
/// value given on the command line itself is still a value (and an error where it is not one).
pub fn parse_args<C: Parser>() -> C {
    let mut command = without_empty_env(C::command());
    let mut matches = command.get_matches_mut();
    C::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| e.format(&mut command).exit())
}

/// `command` and its subcommands, with the environment variables that are set but empty no
/// longer read.
fn without_empty_env(command: Command) -> Command {
    command
        .mut_args(|arg| {
            let empty = arg.get_env().and_then(std::env::var_os).is_some_and(|v| v.is_empty());
            if empty { arg.env(None) } else { arg }
        })
        .mut_subcommands(without_empty_env)
}

/// Runs a binary's async body on a new tokio runtime and says how the process ends: success,
/// or `error: …` on stderr (with the error's whole chain: `{:#}`) and failure, as when no
/// runtime can be started.
pub fn run_to_exit<E: std::fmt::Display>(
    body: impl std::future::Future<Output = Result<(), E>>,
) -> std::process::ExitCode {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(body) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
