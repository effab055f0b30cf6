//! External kernel variables, DTrace's backquote: `` `jiffies ``, `` vmlinux`init_task ``.
//!
//! The address comes from /proc/kallsyms, the type from the variable's BTF `VAR` when the
//! kernel's BTF has one (pahole emits every global only with its `global_var` BTF
//! feature, which Linux 6.12's scripts/Makefile.btf does not ask for; otherwise only the
//! per-CPU variables), else from the kernel's declaration of a few well-known variables
//! (`KNOWN`) resolved against BTF. The value is read with the fault-free loads of any
//! kernel memory; a variable of unknown type only gives its address (`&`name`).

use super::{Ty, TypeEnv};
use crate::btf::NameKind;

/// Declarations (include/linux/...) of variables D programs read, for kernels whose BTF has
/// no global variables.
const KNOWN: &[(&str, &str)] = &[
    ("jiffies", "unsigned long"),
    ("jiffies_64", "u64"),
    ("init_task", "struct task_struct"),
    ("nr_cpu_ids", "unsigned int"),
    ("nr_threads", "int"),
    ("max_threads", "int"),
    ("total_forks", "unsigned long"),
    ("system_state", "enum system_states"),
    ("init_uts_ns", "struct uts_namespace"),
    ("init_nsproxy", "struct nsproxy"),
    ("init_pid_ns", "struct pid_namespace"),
    ("init_mm", "struct mm_struct"),
    ("init_net", "struct net"),
    ("panic_timeout", "int"),
    ("totalreserve_pages", "unsigned long"),
    ("_totalram_pages", "atomic_long_t"),
    ("__num_online_cpus", "atomic_t"),
    ("max_pfn", "unsigned long"),
    ("max_low_pfn", "unsigned long"),
    ("min_low_pfn", "unsigned long"),
    ("totalcma_pages", "unsigned long"),
    ("nr_swap_pages", "atomic_long_t"),
    ("loops_per_jiffy", "unsigned long"),
    ("tick_usec", "unsigned long"),
    ("cpu_khz", "unsigned int"),
    ("tsc_khz", "unsigned int"),
    ("pid_max", "int"),
    ("overflowuid", "int"),
    ("overflowgid", "int"),
    ("sysctl_nr_open", "unsigned int"),
    ("kptr_restrict", "int"),
    ("dmesg_restrict", "int"),
    ("panic_on_oops", "int"),
    ("oops_in_progress", "int"),
    ("vm_swappiness", "int"),
    ("high_memory", "void *"),
    ("page_offset_base", "unsigned long"),
    ("vmalloc_base", "unsigned long"),
    ("vmemmap_base", "unsigned long"),
    ("phys_base", "unsigned long"),
    ("saved_command_line", "char *"),
    ("boot_cpu_data", "struct cpuinfo_x86"),
    ("init_cred", "struct cred"),
    ("init_user_ns", "struct user_namespace"),
    ("init_fs", "struct fs_struct"),
    ("init_files", "struct files_struct"),
    ("init_ipc_ns", "struct ipc_namespace"),
    ("cad_pid", "struct pid *"),
    ("system_wq", "struct workqueue_struct *"),
    ("__cpu_online_mask", "struct cpumask"),
    ("__cpu_possible_mask", "struct cpumask"),
];

impl TypeEnv {
    /// The address and type (`None`: unknown) of external variable `name`, as written
    /// (`` `jiffies ``, `` vmlinux`jiffies ``).
    pub(crate) fn kvar(&mut self, name: &str) -> Result<(u64, Option<Ty>), String> {
        let (module, sym) = name.split_once('`').unwrap_or(("", name));
        if !matches!(module, "" | "vmlinux") {
            return Err(format!(
                "[D_SYM_MODEL] {name}: only the kernel image's symbols are available \
                 (vmlinux`{sym} or `{sym}), not module {module}'s"
            ));
        }
        let ksyms = self.btf.ksyms.clone();
        let ksyms = ksyms
            .as_deref()
            .unwrap_or_else(|| crate::sym::ksym::Ksyms::kernel());
        if ksyms.is_empty() {
            return Err(format!(
                "[D_SYM_NOSYM] {name}: kernel symbol addresses are unknown \
                 (/proc/kallsyms shows none: run as root)"
            ));
        }
        let Some(addr) = ksyms.lookup(sym, None) else {
            let near = crate::providers::syscalls::nearby(sym, ksyms.data_names());
            return Err(format!(
                "[D_SYM_NOSYM] unknown kernel symbol `{sym}{}",
                crate::providers::syscalls::did_you_mean(&near)
            ));
        };
        let btf = self.btf.btf.clone();
        if let Some((id, percpu)) = btf.as_ref().and_then(|b| b.var(sym)) {
            if percpu {
                return Err(format!(
                    "[D_SYM_PERCPU] `{sym} is a per-CPU variable: it has one copy per CPU and \
                     no single address"
                ));
            }
            let btf = btf.expect("var() of some BTF");
            return Ok((addr, Some(self.btf_ty(&btf, id))));
        }
        let ty = KNOWN
            .iter()
            .find(|k| k.0 == sym)
            .and_then(|k| self.btf_ctype(k.1).ok())
            .filter(|t| *t != Ty::Void);
        Ok((addr, ty))
    }

    /// The symbol value of per-CPU variable `name` (`` `runqueues ``), which is its offset
    /// in every CPU's per-CPU area (add `` `__per_cpu_offset[cpu] `` for a CPU's copy);
    /// `None` if `name` is not a per-CPU variable the kernel's BTF and symbols know.
    pub(crate) fn kvar_percpu(&mut self, name: &str) -> Option<u64> {
        let (module, sym) = name.split_once('`').unwrap_or(("", name));
        if !matches!(module, "" | "vmlinux") {
            return None;
        }
        let btf = self.btf.btf.clone()?;
        if !btf.var(sym)?.1 {
            return None;
        }
        let ksyms = self.btf.ksyms.clone();
        let ksyms = ksyms
            .as_deref()
            .unwrap_or_else(|| crate::sym::ksym::Ksyms::kernel());
        ksyms.lookup(sym, None)
    }

    /// Why external variable `name` cannot be read: its type is unknown.
    pub(crate) fn kvar_untyped(&self, name: &str) -> String {
        let sym = name.rsplit('`').next().unwrap_or(name);
        let why = match &self.btf.btf {
            None => "the kernel has no BTF",
            Some(b) if b.find(NameKind::Var, sym).is_none() => {
                "the kernel's BTF has no global variables: pahole encodes only the per-CPU \
                 ones unless the kernel asks for its global_var feature"
            }
            Some(_) => "its BTF type cannot be read",
        };
        format!(
            "[D_SYM_NOTYPE] the type of {name} is unknown ({why}): read it through a cast of \
             its address, *(TYPE *)&{name}"
        )
    }
}
