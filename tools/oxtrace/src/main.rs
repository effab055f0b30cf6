//! oxtrace: the command-line tool that drives the oxtrace kernel module. The flags pick one
//! subcommand of `oxtrace::runtime::commands`; everything else lives in the library.

#![deny(clippy::undocumented_unsafe_blocks)]

use oxtrace::cli::Cli;
use oxtrace::runtime::commands::{list, status, trace, version};
use std::process::ExitCode;

fn main() -> ExitCode {
    // `oxtrace pt ...` has its own options (tools/oxtrace/src/pt/mod.rs).
    if std::env::args().nth(1).as_deref() == Some("pt") {
        let args: Vec<String> = std::env::args().skip(1).collect();
        return match oxtrace::pt::main(args) {
            Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
            Err(e) => {
                eprintln!("oxtrace: pt: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let cli = Cli::ordered();
    let program = cli.program.is_some()
        || cli.script.is_some()
        || cli.probe.is_some()
        || cli.provider.is_some();
    let r = match (cli.args.first().map(String::as_str), &cli.list) {
        // `-l -n PROBE`, `-l -P PROVIDER`: the probes they name.
        (_, Some(_)) if cli.probe.is_some() => list(cli.probe.as_deref().unwrap_or_default(), &cli),
        (_, Some(_)) if cli.provider.is_some() => list(
            &format!("{}:::", cli.provider.as_deref().unwrap_or_default()),
            &cli,
        ),
        (_, Some(p)) => list(p, &cli),
        (Some("version"), _) if !program && cli.args.len() == 1 => version(&cli),
        (Some("status"), _) if !program && cli.args.len() == 1 => status(&cli),
        _ => trace(&cli),
    };
    match r {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("oxtrace: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use oxtrace::cli::{self, Cli};

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
        assert_eq!(cli::DEFAULT_DEVICE, oxtrace::runtime::device::DEFAULT_PATH);
    }
}
