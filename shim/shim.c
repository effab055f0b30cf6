// SPDX-License-Identifier: GPL-2.0
/*
 * The C shim of oxtrace: the misc device and its file_operations (owner =
 * THIS_MODULE, so an open consumer pins the module), and wrappers for static
 * inlines and macros.  No logic lives here; see rust/.
 */
#include <linux/capability.h>
#include <linux/cpumask.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/timekeeping.h>
#include <asm/cpufeature.h>
#include <uapi/linux/oxtrace.h>

#include "shim.h"

static const struct oxt_file_ops *oxt_ops;

static int oxt_fop_open(struct inode *inode, struct file *file)
{
	return oxt_ops->open(file);
}

static int oxt_fop_release(struct inode *inode, struct file *file)
{
	return oxt_ops->release(file);
}

static long oxt_fop_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	return oxt_ops->ioctl(file, cmd, arg);
}

static const struct file_operations oxt_fops = {
	.owner = THIS_MODULE,
	.open = oxt_fop_open,
	.release = oxt_fop_release,
	.unlocked_ioctl = oxt_fop_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice oxt_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = OXT_DEVICE_NAME,
	.fops = &oxt_fops,
	.mode = 0600,
};

int oxt_misc_register(const struct oxt_file_ops *ops)
{
	/* Set before the device is visible; never changes while registered. */
	oxt_ops = ops;
	return misc_register(&oxt_misc);
}

void oxt_misc_deregister(void)
{
	misc_deregister(&oxt_misc);
}

void *oxt_file_private(const struct file *file)
{
	return file->private_data;
}

void oxt_file_set_private(struct file *file, void *data)
{
	file->private_data = data;
}

bool oxt_perfmon_capable(void)
{
	return perfmon_capable();
}

unsigned int oxt_num_possible_cpus(void)
{
	return num_possible_cpus();
}

bool oxt_cpu_has_intel_pt(void)
{
	return boot_cpu_has(X86_FEATURE_INTEL_PT);
}

u64 oxt_ktime_get_ns(void)
{
	return ktime_get_ns();
}
