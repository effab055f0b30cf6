// SPDX-License-Identifier: GPL-2.0
/* liboxtdl.so: the shared library oxt_pid loads with dlopen() (pid_test.sh). */
__attribute__((noipa)) long oxt_dl_twice(long x)
{
	return 2 * x;
}
