//! The command line on arbitrary arguments: the input, split at NUL bytes, follows `mgws run
//! memset --device cpu` or `mgws run uts --device cpu`; whatever parses is validated (scheduler
//! configuration, UTS tree) but not run. Every input must give a configuration or a typed error.
#![no_main]

use clap::Parser;
use libfuzzer_sys::fuzz_target;
use mgws_cli::cli::{Cli, Command, WorkloadCmd};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.split('\0');
    let uts = parts.next().is_some_and(|p| p.starts_with('u'));
    let head: &[&str] = if uts {
        &["mgws", "run", "uts", "--device", "cpu"]
    } else {
        &["mgws", "run", "memset", "--device", "cpu"]
    };
    let args = head.iter().copied().chain(parts);
    let Ok(cli) = Cli::try_parse_from(args) else {
        return;
    };
    let Command::Run { mut workload } = cli.command else {
        return;
    };
    let _ = workload.sched_mut().reject_inapplicable();
    let sched = workload.sched_mut().clone();
    let _ = sched.scheduler::<mgws_tasks::MemsetTasks>();
    if let WorkloadCmd::Uts { args, .. } = &workload {
        if let Ok(cfg) = args.config() {
            let _ = cfg.params().root();
        }
    }
});
