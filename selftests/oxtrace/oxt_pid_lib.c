// SPDX-License-Identifier: GPL-2.0
/* liboxtpid.so: the shared library oxt_pid is linked with (pid_test.sh). */
__attribute__((noipa)) int oxt_lib_square(int x)
{
	return x * x;
}
