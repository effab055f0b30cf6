//! oxtrace: the command-line tool that drives the oxtrace kernel module.
use clap::{Parser, Subcommand};
use oxtrace::device::{self, Device};
use oxtrace_core::abi;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "oxtrace", version, about = "DTrace-class tracing for Linux")]
struct Cli {
    /// The oxtrace device node.
    #[arg(long, global = true, default_value = device::DEFAULT_PATH)]
    device: PathBuf,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the module's ABI version and features.
    Version,
    /// Show the state of a new consumer.
    Status,
}

fn features(bits: u64) -> Vec<&'static str> {
    let mut v = Vec::new();
    if bits & abi::FEAT_KPROBES != 0 {
        v.push("kprobes");
    }
    if bits & abi::FEAT_INTEL_PT != 0 {
        v.push("intel-pt");
    }
    v
}

fn state_name(state: u32) -> &'static str {
    match state {
        abi::STATE_IDLE => "idle",
        _ => "unknown",
    }
}

fn run(cli: &Cli) -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::open(&cli.device)?;
    match cli.command {
        Command::Version => {
            let v = dev.version()?;
            let feats = features(v.features);
            if cli.json {
                let list: Vec<String> = feats.iter().map(|f| format!("\"{f}\"")).collect();
                println!(
                    "{{\"module\":\"{}\",\"abi\":\"{}.{}\",\"tool_abi\":\"{}.{}\",\"ncpus\":{},\"features\":[{}]}}",
                    abi::cstr_field(&v.release),
                    v.abi_major,
                    v.abi_minor,
                    abi::ABI_MAJOR,
                    abi::ABI_MINOR,
                    v.ncpus,
                    list.join(",")
                );
            } else {
                println!("oxtrace tool   {}", env!("CARGO_PKG_VERSION"));
                println!("oxtrace module {}", abi::cstr_field(&v.release));
                println!(
                    "ABI            {}.{} (tool {}.{})",
                    v.abi_major,
                    v.abi_minor,
                    abi::ABI_MAJOR,
                    abi::ABI_MINOR
                );
                println!("CPUs           {}", v.ncpus);
                println!("features       {}", feats.join(" "));
            }
            if v.abi_major != abi::ABI_MAJOR {
                return Err(format!(
                    "module ABI {}.x is not the tool's {}.x: rebuild both",
                    v.abi_major,
                    abi::ABI_MAJOR
                )
                .into());
            }
        }
        Command::Status => {
            let s = dev.status()?;
            if cli.json {
                println!(
                    "{{\"consumer\":{},\"state\":\"{}\",\"consumers_open\":{},\"consumers_live\":{},\"ioctls\":{}}}",
                    s.consumer_id,
                    state_name(s.state),
                    s.nconsumers,
                    s.live_consumers,
                    s.ioctls
                );
            } else {
                println!("consumer       {}", s.consumer_id);
                println!("state          {}", state_name(s.state));
                println!("consumers open {}", s.nconsumers);
                println!("consumers live {}", s.live_consumers);
                println!("ioctls         {}", s.ioctls);
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("oxtrace: {e}");
            ExitCode::FAILURE
        }
    }
}
