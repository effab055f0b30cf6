//! The Rust ABI mirror (`rust/core/abi.rs`, used by the module and the tool) against the C UAPI
//! header, `include/uapi/linux/oxtrace.h`: every size, offset, constant and ioctl number.

use oxtrace_core::abi::*;
use oxtrace_core::program::ProbeKind;

fn crate_kind(k: ProbeKind) -> u32 {
    k as u32
}
use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;

/// One fact: a C expression and the value Rust computes for it.
struct Fact {
    c_expr: String,
    rust: u64,
}

macro_rules! facts {
    ($v:ident; structs { $($cs:ident => $rs:ty { $($f:ident),* $(,)? })* } consts { $($cc:ident => $rc:expr),* $(,)? }) => {
        $(
            $v.push(Fact { c_expr: format!("sizeof(struct {})", stringify!($cs)), rust: size_of::<$rs>() as u64 });
            $v.push(Fact { c_expr: format!("_Alignof(struct {})", stringify!($cs)), rust: std::mem::align_of::<$rs>() as u64 });
            $(
                $v.push(Fact {
                    c_expr: format!("offsetof(struct {}, {})", stringify!($cs), stringify!($f)),
                    rust: offset_of!($rs, $f) as u64,
                });
                $v.push(Fact {
                    c_expr: format!("sizeof(((struct {}*)0)->{})", stringify!($cs), stringify!($f)),
                    rust: {
                        let x: $rs = Default::default();
                        std::mem::size_of_val(&x.$f) as u64
                    },
                });
            )*
        )*
        $( $v.push(Fact { c_expr: stringify!($cc).to_string(), rust: ($rc) as u64 }); )*
    };
}

fn facts() -> Vec<Fact> {
    let mut v = Vec::new();
    facts!(v;
        structs {
            oxt_version => Version { size, abi_major, abi_minor, ncpus, features, release, reserved }
            oxt_status => Status { size, state, consumer_id, nconsumers, live_consumers, opened_ns, ioctls, cpus, ncpus, exited, exit_status, missed, live_uprobes, filled, reserved }
            oxt_cpu_status => CpuStatus { fired, records, drops, errors, recursion, specdrops, specbusy, specunavail }
            oxt_attach => Attach { probe, flags, name, reserved }
            oxt_load => Load { size, flags, image, image_len, attach, names, nattach, names_len, nprobes, nskipped, err_kind, err_index, err_part, err_insn, err_code, err_arg, uattach, usdt_args, nuattach, nusdt_args, nuprobes, reserved0 }
            oxt_uattach => Uattach { probe, flags, name, path, offset, ref_ctr, roff, pid, arg_first, nargs, reserved }
            oxt_usdt_arg => UsdtArg { kind, size, is_signed, base, index, scale, reserved, value }
            oxt_snapshot => Snapshot { size, cpu, buf, buf_len, len, drops, reserved }
            oxt_probe_info => ProbeInfo { probe, flags, func, fired, errors, recursion, reserved }
            oxt_probes => Probes { size, n, info, total, reserved0, reserved }
            oxt_dyn_cpu => DynCpu { allocs, frees, steals, clean_moves, races, drops_empty, drops_dirty, drops_rinsing, drops_size, contended, free, clean, rinsing, dirty, reserved }
            oxt_pt_config => PtConfig { size, backend, mode, nslices, slice_order, per_table, psb_period, ntables, capacity, ncpus, phys_bits, reserved }
            oxt_pt_cpu => PtCpu { position, data_len, written, lost, wraps, ptws, output_base, mask_ptrs, rtit_status, flags, error, reserved }
            oxt_pt_status => PtStatus { size, state, backend, mode, capacity, cpus, ncpus, reserved0, reserved }
            oxt_pt_read => PtRead { size, cpu, offset, buf, buf_len, len, total, reserved }
            oxt_pt_layout => PtLayout { size, cpu, slices, tables, nslices, ntables, slice_order, reserved0, reserved }
            oxt_dynstat => Dynstat { size, flags, dstate, ncpus, cpus, var_drops, nvars, chunk_bytes, nchunks, dynvarsize, cleanrate_ns, cleaner_runs, in_use, high_water, passes, idle_passes, crosscalls, rinsed, borrowed, failclean, audit_free, audit_clean, audit_rinsing, audit_dirty, audit_in_use, audit_error, reserved0, audits, audit_failures, reserved }
        }
        consts {
            OXT_ABI_MAJOR => ABI_MAJOR,
            OXT_ABI_MINOR => ABI_MINOR,
            OXT_BUFPOLICY_SWITCH => BUFPOLICY_SWITCH,
            OXT_BUFPOLICY_FILL => BUFPOLICY_FILL,
            OXT_BUFPOLICY_RING => BUFPOLICY_RING,
            OXT_FEAT_INTEL_PT => FEAT_INTEL_PT,
            OXT_FEAT_KPROBES => FEAT_KPROBES,
            OXT_RELEASE_LEN => RELEASE_LEN,
            OXT_STATE_IDLE => STATE_IDLE,
            OXT_STATE_LOADED => STATE_LOADED,
            OXT_STATE_ACTIVE => STATE_ACTIVE,
            OXT_STATE_STOPPED => STATE_STOPPED,
            OXT_ATTACH_OPTIONAL => ATTACH_OPTIONAL,
            OXT_LOADERR_NONE => LOADERR_NONE,
            OXT_LOADERR_IMAGE => LOADERR_IMAGE,
            OXT_LOADERR_VERIFY => LOADERR_VERIFY,
            OXT_LOADERR_ATTACH => LOADERR_ATTACH,
            OXT_LOADERR_PROBE => LOADERR_PROBE,
            OXT_LOADERR_MEMORY => LOADERR_MEMORY,
            OXT_LOADERR_UNSAFE => LOADERR_UNSAFE,
            OXT_LOADERR_UATTACH => LOADERR_UATTACH,
            OXT_FEAT_UPROBES => FEAT_UPROBES,
            OXT_USDT_MAX_ARGS => USDT_MAX_ARGS,
            OXT_USDT_ARG_CONST => USDT_ARG_CONST,
            OXT_USDT_ARG_REG => USDT_ARG_REG,
            OXT_USDT_ARG_MEM => USDT_ARG_MEM,
            OXT_UREG_NONE => UREG_NONE,
            OXT_RECORD_ERROR => oxtrace_core::buffer::KIND_ERROR,
            OXT_RECORD_STACK => oxtrace_core::buffer::KIND_STACK,
            OXT_STACK_DEF_KERNEL => oxtrace_core::stack::DEF_KERNEL,
            OXT_STACK_DEF_USER => oxtrace_core::stack::DEF_USER,
            OXT_PROBE_KIND_PID_ENTRY => crate_kind(ProbeKind::PidEntry),
            OXT_PROBE_KIND_PID_RETURN => crate_kind(ProbeKind::PidReturn),
            OXT_PROBE_KIND_PID_OFFSET => crate_kind(ProbeKind::PidOffset),
            OXT_PROBE_KIND_USDT => crate_kind(ProbeKind::Usdt),
            OXT_PROBE_RETURN => PROBE_RETURN,
            OXT_PROBE_FUNC_LEN => PROBE_FUNC_LEN,
            OXT_IOC_MAGIC => IOC_MAGIC,
            OXT_IOC_VERSION => IOC_VERSION,
            OXT_IOC_STATUS => IOC_STATUS,
            OXT_IOC_LOAD => IOC_LOAD,
            OXT_IOC_GO => IOC_GO,
            OXT_IOC_STOP => IOC_STOP,
            OXT_IOC_SNAPSHOT => IOC_SNAPSHOT,
            OXT_IOC_PROBES => IOC_PROBES,
            OXT_IOC_AGGSNAP => IOC_AGGSNAP,
            OXT_IOC_DYNSTAT => IOC_DYNSTAT,
            OXT_IOC_PT_CONFIG => IOC_PT_CONFIG,
            OXT_IOC_PT_START => IOC_PT_START,
            OXT_IOC_PT_STOP => IOC_PT_STOP,
            OXT_IOC_PT_STATUS => IOC_PT_STATUS,
            OXT_IOC_PT_READ => IOC_PT_READ,
            OXT_IOC_PT_LAYOUT => IOC_PT_LAYOUT,
            OXT_PT_BACKEND_AUTO => PT_BACKEND_AUTO,
            OXT_PT_BACKEND_SOFT => PT_BACKEND_SOFT,
            OXT_PT_BACKEND_HW => PT_BACKEND_HW,
            OXT_PT_MODE_RING => PT_MODE_RING,
            OXT_PT_MODE_STOP => PT_MODE_STOP,
            OXT_PT_MODE_STOP_INT => PT_MODE_STOP_INT,
            OXT_PT_MAX_SLICES => PT_MAX_SLICES,
            OXT_PT_MAX_ORDER => PT_MAX_ORDER,
            OXT_PT_MAX_BYTES => PT_MAX_BYTES,
            OXT_PT_MAX_READ => PT_MAX_READ,
            OXT_PT_STATE_NONE => PT_STATE_NONE,
            OXT_PT_STATE_READY => PT_STATE_READY,
            OXT_PT_STATE_RUNNING => PT_STATE_RUNNING,
            OXT_PT_STATE_STOPPED => PT_STATE_STOPPED,
            OXT_PT_CPU_PRESENT => PT_CPU_PRESENT,
            OXT_PT_CPU_WRAPPED => PT_CPU_WRAPPED,
            OXT_PT_CPU_STOPPED => PT_CPU_STOPPED,
            OXT_PT_CPU_ERROR => PT_CPU_ERROR,
            OXT_PT_CPU_PMI => PT_CPU_PMI,
            OXT_PT_CPU_ENABLED => PT_CPU_ENABLED,
            OXT_DSTATE_FREE => DSTATE_FREE,
            OXT_DSTATE_CLEAN => DSTATE_CLEAN,
            OXT_DSTATE_RINSING => DSTATE_RINSING,
            OXT_DSTATE_DIRTY => DSTATE_DIRTY,
            OXT_DSTATE_EMPTY => DSTATE_EMPTY,
            OXT_DYN_PRESENT => DYN_PRESENT,
            OXT_DYN_STARTED => DYN_STARTED,
            OXT_DYN_AUDITED => DYN_AUDITED,
            OXT_DYN_AUDIT_OK => DYN_AUDIT_OK,
            OXT_DYN_AUDIT_BITMAP => DYN_AUDIT_BITMAP,
            OXT_DYN_AUDIT_DUPLICATE => DYN_AUDIT_DUPLICATE,
            OXT_DYN_AUDIT_BAD_INDEX => DYN_AUDIT_BAD_INDEX,
            OXT_DYN_AUDIT_BAD_HASH => DYN_AUDIT_BAD_HASH,
            OXT_DYN_AUDIT_LOST => DYN_AUDIT_LOST,
            OXT_DYN_AUDIT_COUNTERS => DYN_AUDIT_COUNTERS,
        }
    );
    v
}

#[test]
fn rust_mirror_matches_c_header() {
    let facts = facts();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("oxtrace-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut src = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <linux/oxtrace.h>\nint main(void)\n{\n",
    );
    for f in &facts {
        writeln!(
            src,
            "\tprintf(\"%llu\\n\", (unsigned long long)({}));",
            f.c_expr
        )
        .unwrap();
    }
    src.push_str("\treturn 0;\n}\n");
    let c = dir.join("abi.c");
    let exe = dir.join("abi");
    std::fs::write(&c, src).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-Wpadded", "-I"])
        .arg(root.join("include/uapi"))
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("a C compiler (cc) to check the UAPI header");
    assert!(
        st.success(),
        "the UAPI header does not compile cleanly (-Wpadded: no implicit padding)"
    );
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let values: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), facts.len());
    let mut bad = Vec::new();
    for (f, c) in facts.iter().zip(values) {
        if f.rust != c {
            bad.push(format!("{}: C {} Rust {}", f.c_expr, c, f.rust));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(bad.is_empty(), "ABI mismatch:\n{}", bad.join("\n"));
}
