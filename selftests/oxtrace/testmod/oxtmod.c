// SPDX-License-Identifier: GPL-2.0
/*
 * oxtmod: a tiny loadable module for the fbt provider's module field
 * (fbt:oxtmod:FUNC:entry, -l 'fbt:oxtmod::'). Reading
 * /proc/oxtmod calls oxtmod_hit(n) once per read with n counting up
 * from 1, and prints "n oxtmod_hit(n)". Its functions are not named oxt_*:
 * the tool refuses those as oxtrace's own (rust/core/probesafe.rs).
 */
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>

static atomic_t oxtmod_reads = ATOMIC_INIT(0);

/* Not inlined, so that it is a function of this module that kprobes can place. */
noinline int oxtmod_hit(int n)
{
	return n * 2;
}

static int oxtmod_show(struct seq_file *m, void *v)
{
	int n = atomic_inc_return(&oxtmod_reads);

	seq_printf(m, "%d %d\n", n, oxtmod_hit(n));
	return 0;
}

static struct proc_dir_entry *oxtmod_entry;

static int __init oxtmod_init(void)
{
	oxtmod_entry = proc_create_single("oxtmod", 0444, NULL, oxtmod_show);
	return oxtmod_entry ? 0 : -ENOMEM;
}

static void __exit oxtmod_exit(void)
{
	proc_remove(oxtmod_entry);
}

module_init(oxtmod_init);
module_exit(oxtmod_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("oxtrace selftest: a module whose functions fbt probes");
