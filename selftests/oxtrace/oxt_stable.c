// SPDX-License-Identifier: GPL-2.0
/*
 * oxt_stable: workloads with known counts for the stable providers (stable_test.sh).
 *
 *   oxt_stable fork N     fork N children that exit at once (status 0), waiting for each
 *   oxt_stable exec N     N times fork a child that execs "oxt_stable nop a b" (which exits
 *                         0), then once a child that execs a file that does not exist
 *                         (ENOENT; the child exits 127)
 *   oxt_stable signal     fork a child with a SIGUSR1 handler; once it is ready, kill(2)
 *                         it with SIGUSR1; its handler runs once and it exits 0
 *   oxt_stable sigwait    fork a child that blocks SIGUSR2 and waits for it in
 *                         sigwaitinfo(2); once it is blocked, send it SIGUSR2
 *   oxt_stable pipe N     fork a child that reads a pipe one byte at a time, N times; each
 *                         byte is written only once the child has consumed the last one and
 *                         sleeps (state S in /proc/PID/stat), so it blocks N times at least
 *   oxt_stable threads N  start N threads that exit at once, joining each
 *   oxt_stable nice N     set its own nice value to 1, 2, .., N (N <= 19), one
 *                         setpriority(2) each
 *   oxt_stable spin N     fork two children on CPU 0 that spin in user mode until each has
 *                         been switched out while runnable N times (ru_nivcsw)
 *   oxt_stable yield N    on CPU 1, sched_yield(2) until N of them kept it on the CPU (no
 *                         involuntary switch counted across the call)
 *   oxt_stable surrender N  on CPU 0 wake a SCHED_FIFO child on CPU 1 N times through a
 *                         pipe (as pipe N), while another child spins there: each wakeup
 *                         makes CPU 0 tell CPU 1 to reschedule
 *   oxt_stable nop ...    exit 0
 *
 * Nothing waits for a time: every step waits for a condition.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
	handled = sig;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void reap(pid_t pid, int want)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != want) {
		fprintf(stderr, "child %d: status %#x, want exit %d\n", pid, st, want);
		exit(1);
	}
}

/*
 * Whether thread `pid` is off its run queue in a sleep: state S, and a wchan, which
 * the kernel shows only once the thread was dequeued (get_wchan(): not on_rq), so its
 * switch-out is bound to happen. State S alone is set before the sleeper checks its
 * condition once more: a wakeup then would leave it on the CPU, with no sleep at all.
 */
static int sleeping(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open stat");
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		die("read stat");
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] != 'S')
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open wchan");
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		die("read wchan");
	buf[n] = 0;
	return n > 0 && strcmp(buf, "0") != 0;
}

static void *nothing(void *arg)
{
	return arg;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

/* Times this thread was switched out while runnable. */
static long nivcsw(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		die("getrusage");
	return ru.ru_nivcsw;
}

/*
 * Feeds a child blocked on pipe p N times, each byte once it sleeps again (pipe N). With
 * `spins`, the count of a spinner on the child's CPU, each byte also waits for the spinner
 * to run again: the CPU has then finished switching the child out, so the wakeup cannot
 * be handed to that CPU to do (a wakeup of a task still on its CPU is queued there).
 */
static void feed(pid_t pid, int fd, volatile long *done, volatile long *spins, long n)
{
	for (long i = 0; i < n; i++) {
		long s;

		/* The last byte consumed, and the child asleep in its next read. */
		while (__atomic_load_n(done, __ATOMIC_SEQ_CST) != i || !sleeping(pid))
			sched_yield();
		if (spins) {
			s = __atomic_load_n(spins, __ATOMIC_SEQ_CST);
			while (__atomic_load_n(spins, __ATOMIC_SEQ_CST) == s)
				sched_yield();
		}
		if (write(fd, "x", 1) != 1)
			die("write");
	}
}

/* A child that reads pipe p one byte at a time, n times, counting in *done; then exits. */
static void reader(int p[2], volatile long *done, long n)
{
	char c;

	close(p[1]);
	for (long i = 0; i < n; i++) {
		if (read(p[0], &c, 1) != 1)
			_exit(1);
		__atomic_store_n(done, i + 1, __ATOMIC_SEQ_CST);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	long n = argc > 2 ? atol(argv[2]) : 0;
	pid_t pid;

	if (!strcmp(mode, "nop"))
		return 0;
	if (!strcmp(mode, "fork")) {
		for (long i = 0; i < n; i++) {
			pid = fork();
			if (pid < 0)
				die("fork");
			if (!pid)
				_exit(0);
			reap(pid, 0);
		}
		return 0;
	}
	if (!strcmp(mode, "exec")) {
		for (long i = 0; i <= n; i++) {
			pid = fork();
			if (pid < 0)
				die("fork");
			if (!pid) {
				if (i < n)
					execl(argv[0], "oxt_stable", "nop", "a", "b", (char *)0);
				else
					execl("/nonexistent/oxt_stable", "x", (char *)0);
				_exit(127);
			}
			reap(pid, i < n ? 0 : 127);
		}
		return 0;
	}
	if (!strcmp(mode, "signal")) {
		int ready[2];
		char c;

		if (pipe(ready))
			die("pipe");
		pid = fork();
		if (pid < 0)
			die("fork");
		if (!pid) {
			struct sigaction sa = { .sa_handler = on_usr1 };
			sigset_t none;

			sigemptyset(&none);
			if (sigaction(SIGUSR1, &sa, NULL))
				die("sigaction");
			sigset_t usr1;

			sigemptyset(&usr1);
			sigaddset(&usr1, SIGUSR1);
			sigprocmask(SIG_BLOCK, &usr1, NULL);
			if (write(ready[1], "r", 1) != 1)
				die("write");
			while (!handled)
				sigsuspend(&none);
			_exit(handled == SIGUSR1 ? 0 : 1);
		}
		if (read(ready[0], &c, 1) != 1)
			die("read");
		if (kill(pid, SIGUSR1))
			die("kill");
		reap(pid, 0);
		return 0;
	}
	if (!strcmp(mode, "sigwait")) {
		int ready[2];
		char c;
		sigset_t usr2;

		sigemptyset(&usr2);
		sigaddset(&usr2, SIGUSR2);
		if (pipe(ready))
			die("pipe");
		pid = fork();
		if (pid < 0)
			die("fork");
		if (!pid) {
			sigprocmask(SIG_BLOCK, &usr2, NULL);
			if (write(ready[1], "r", 1) != 1)
				die("write");
			_exit(sigwaitinfo(&usr2, NULL) == SIGUSR2 ? 0 : 1);
		}
		if (read(ready[0], &c, 1) != 1)
			die("read");
		/* The child blocked SIGUSR2 before it said it was ready: the signal waits for it. */
		if (kill(pid, SIGUSR2))
			die("kill");
		reap(pid, 0);
		return 0;
	}
	if (!strcmp(mode, "pipe")) {
		volatile long *done = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		int p[2];

		if (done == MAP_FAILED)
			die("mmap");
		if (pipe(p))
			die("pipe");
		pid = fork();
		if (pid < 0)
			die("fork");
		if (!pid)
			reader(p, done, n);
		close(p[0]);
		feed(pid, p[1], done, NULL, n);
		reap(pid, 0);
		return 0;
	}
	if (!strcmp(mode, "nice")) {
		for (long i = 1; i <= n; i++)
			if (setpriority(PRIO_PROCESS, 0, i))
				die("setpriority");
		return 0;
	}
	if (!strcmp(mode, "spin")) {
		pid_t kids[2];

		for (int k = 0; k < 2; k++) {
			kids[k] = fork();
			if (kids[k] < 0)
				die("fork");
			if (!kids[k]) {
				pin(0);
				while (nivcsw() < n)
					;
				_exit(0);
			}
		}
		reap(kids[0], 0);
		reap(kids[1], 0);
		return 0;
	}
	if (!strcmp(mode, "yield")) {
		pin(1);
		for (long kept = 0; kept < n;) {
			long before = nivcsw();

			sched_yield();
			if (nivcsw() == before)
				kept++;
		}
		return 0;
	}
	if (!strcmp(mode, "surrender")) {
		volatile long *done = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		struct sched_param sp = { .sched_priority = 1 };
		pid_t spinner;
		int p[2];

		if (done == MAP_FAILED)
			die("mmap");
		pin(0);
		spinner = fork();
		if (spinner < 0)
			die("fork");
		if (!spinner) {
			pin(1);
			for (;;)
				__atomic_add_fetch(&done[1], 1, __ATOMIC_SEQ_CST);
		}
		if (pipe(p))
			die("pipe");
		pid = fork();
		if (pid < 0)
			die("fork");
		if (!pid) {
			pin(1);
			if (sched_setscheduler(0, SCHED_FIFO, &sp))
				die("sched_setscheduler");
			reader(p, done, n);
		}
		close(p[0]);
		feed(pid, p[1], done, &done[1], n);
		reap(pid, 0);
		kill(spinner, SIGKILL);
		waitpid(spinner, NULL, 0);
		return 0;
	}
	if (!strcmp(mode, "threads")) {
		for (long i = 0; i < n; i++) {
			pthread_t t;

			if (pthread_create(&t, NULL, nothing, NULL) || pthread_join(t, NULL))
				die("pthread");
		}
		return 0;
	}
	fprintf(stderr, "usage: oxt_stable fork|exec|signal|sigwait|pipe|threads|nice|spin|yield|"
			"surrender N | nop\n");
	return 2;
}
