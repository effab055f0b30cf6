//! Generates the bash, zsh and fish completions of `oxtrace` from its clap definition
//! (src/cli.rs) into OUT_DIR/completions; `make install` copies them from there.

use clap::CommandFactory;
use clap_complete::{generate_to, Shell};
use std::path::PathBuf;

#[allow(dead_code)]
mod cli {
    include!("src/cli.rs");
}

fn main() -> std::io::Result<()> {
    println!("cargo:rerun-if-changed=src/cli.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = out.join("completions");
    std::fs::create_dir_all(&dir)?;
    let mut cmd = cli::Cli::command();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        generate_to(shell, &mut cmd, "oxtrace", &dir)?;
    }
    Ok(())
}
