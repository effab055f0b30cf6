/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the oxtrace selftests. */
#ifndef OXT_TEST_H
#define OXT_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/oxtrace.h>

#define OXT_DEV "/dev/" OXT_DEVICE_NAME
#define OXT_KO "/lib/modules/oxtrace.ko"

static inline int oxt_open(void)
{
	return open(OXT_DEV, O_RDWR | O_CLOEXEC);
}

/* VERSION into *v; returns 0 or -errno. */
static inline int oxt_version(int fd, struct oxt_version *v)
{
	memset(v, 0, sizeof(*v));
	v->size = sizeof(*v);
	return ioctl(fd, OXT_IOC_VERSION, v) ? -errno : 0;
}

/* STATUS into *s; returns 0 or -errno. */
static inline int oxt_status(int fd, struct oxt_status *s)
{
	memset(s, 0, sizeof(*s));
	s->size = sizeof(*s);
	return ioctl(fd, OXT_IOC_STATUS, s) ? -errno : 0;
}

#endif
