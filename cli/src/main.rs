use clap::Parser;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("MGWS_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = mgws_cli::cli::Cli::parse();
    match mgws_cli::cli::main_with(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("mgws: error: {e}");
            std::process::exit(1);
        }
    }
}
