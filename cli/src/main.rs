use std::io::IsTerminal;

use clap::Parser;
use mgws_cli::output;

fn main() {
    // Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org).
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // The library reports through `tracing`; the CLI shows its warnings, errors and the grid
    // of each GPU run (`mgws::grid`) by default, and with `MGWS_LOG` (e.g. `mgws=debug`) what
    // that filter names, with times and each span's duration when it closes.
    let filter = std::env::var("MGWS_LOG").ok().and_then(|v| {
        tracing_subscriber::EnvFilter::try_new(&v)
            .map_err(|e| {
                eprintln!(
                    "mgws: MGWS_LOG={v:?} is not a tracing filter ({e}); logging as without it"
                )
            })
            .ok()
    });
    match filter {
        Some(filter) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_writer(std::io::stderr)
            .with_ansi(colour)
            .init(),
        None => tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("warn,mgws::grid=info"))
            .without_time()
            .with_target(false)
            .with_writer(std::io::stderr)
            .with_ansi(colour)
            .init(),
    }
    // A PE process of a multi-process run (`--processes`) serves its PE and nothing else.
    if let Some(pe) = mgws::processes::Pe::from_env() {
        std::process::exit(mgws_cli::cli::serve_pe(pe));
    }
    // Known before parsing, so that a usage error under --json is JSON too.
    let json = std::env::args_os().any(|a| a == "--json");
    output::set_json(json);
    let cli = match mgws_cli::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => std::process::exit(mgws_cli::cli::usage_error(&e, json)),
    };
    let code = match mgws_cli::cli::main_with(cli) {
        Ok(code) => code,
        Err(e) => {
            output::report_error(&e);
            output::EXIT_ERROR
        }
    };
    std::process::exit(code);
}
