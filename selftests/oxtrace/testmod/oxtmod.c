// SPDX-License-Identifier: GPL-2.0
/*
 * oxtmod: a tiny loadable module for the fbt provider's module field
 * (fbt:oxtmod:FUNC:entry, -l 'fbt:oxtmod::'). Reading
 * /proc/oxtmod calls oxtmod_hit(n) once per read with n counting up
 * from 1, and prints "n oxtmod_hit(n)"; reading /proc/oxtmod_many calls a
 * thousand functions once each. Its functions are not named oxt_*:
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

/*
 * oxtmod_f000 .. oxtmod_f999: a thousand functions, each called once per read of
 * /proc/oxtmod_many (fbt_scale_test.sh), so that a glob of them has an exact
 * expected count of entries and returns.  Called through a table, which keeps
 * the compiler from inlining them.
 */
#define OXTMOD_10(M, p) M(p##0) M(p##1) M(p##2) M(p##3) M(p##4) \
	M(p##5) M(p##6) M(p##7) M(p##8) M(p##9)
#define OXTMOD_100(M, p) OXTMOD_10(M, p##0) OXTMOD_10(M, p##1) OXTMOD_10(M, p##2) \
	OXTMOD_10(M, p##3) OXTMOD_10(M, p##4) OXTMOD_10(M, p##5) OXTMOD_10(M, p##6) \
	OXTMOD_10(M, p##7) OXTMOD_10(M, p##8) OXTMOD_10(M, p##9)
#define OXTMOD_1000(M) OXTMOD_100(M, 0) OXTMOD_100(M, 1) OXTMOD_100(M, 2) \
	OXTMOD_100(M, 3) OXTMOD_100(M, 4) OXTMOD_100(M, 5) OXTMOD_100(M, 6) \
	OXTMOD_100(M, 7) OXTMOD_100(M, 8) OXTMOD_100(M, 9)
#define OXTMOD_FUNC(n) static noinline int oxtmod_f##n(int x) { return x + 1; }
#define OXTMOD_PTR(n) oxtmod_f##n,

OXTMOD_1000(OXTMOD_FUNC)

static int (*oxtmod_fs[])(int) = { OXTMOD_1000(OXTMOD_PTR) };

static int oxtmod_many_show(struct seq_file *m, void *v)
{
	int i, x = 0;

	for (i = 0; i < ARRAY_SIZE(oxtmod_fs); i++)
		x = READ_ONCE(oxtmod_fs[i])(x);
	seq_printf(m, "%d\n", x);
	return 0;
}

static struct proc_dir_entry *oxtmod_entry, *oxtmod_many;

static int __init oxtmod_init(void)
{
	oxtmod_entry = proc_create_single("oxtmod", 0444, NULL, oxtmod_show);
	if (!oxtmod_entry)
		return -ENOMEM;
	oxtmod_many = proc_create_single("oxtmod_many", 0444, NULL, oxtmod_many_show);
	if (!oxtmod_many) {
		proc_remove(oxtmod_entry);
		return -ENOMEM;
	}
	return 0;
}

static void __exit oxtmod_exit(void)
{
	proc_remove(oxtmod_many);
	proc_remove(oxtmod_entry);
}

module_init(oxtmod_init);
module_exit(oxtmod_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("oxtrace selftest: a module whose functions fbt probes");
