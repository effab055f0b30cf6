/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C shim of oxtrace: what Rust can't reach through bindings in 6.12
 * (static inlines, macros, structs whose layout depends on Kconfig).
 * rust/shim.rs declares the same functions; keep the two in step.
 */
#ifndef OXTRACE_SHIM_H
#define OXTRACE_SHIM_H

#include <linux/types.h>

struct file;

/* Callbacks of the device, implemented in Rust (rust/miscdev.rs). */
struct oxt_file_ops {
	int (*open)(struct file *file);
	int (*release)(struct file *file);
	long (*ioctl)(struct file *file, unsigned int cmd, unsigned long arg);
};

int oxt_misc_register(const struct oxt_file_ops *ops);
void oxt_misc_deregister(void);
void *oxt_file_private(const struct file *file);
void oxt_file_set_private(struct file *file, void *data);

bool oxt_perfmon_capable(void);
unsigned int oxt_num_possible_cpus(void);
bool oxt_cpu_has_intel_pt(void);
u64 oxt_ktime_get_ns(void);

#endif /* OXTRACE_SHIM_H */
