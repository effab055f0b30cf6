// SPDX-License-Identifier: GPL-2.0
/*
 * The target uattack_test.sh attacks with pid probes.  What it prints on stdout
 * and its exit status depend on its arguments alone, so a traced run must print
 * and return exactly what an untraced one does.
 *
 *   oxt_uattack GO MODE N [LIB]
 *
 * prints "ready" on stderr, then (GO other than "-") waits until file GO
 * exists, then:
 *
 *   calls    call oxt_ua_fn N times; exit 7
 *   threads  4 threads call oxt_ua_fn N times each; each is sent SIGUSR1 N
 *            times, one at a time, and its handler calls oxt_ua_fn; the main
 *            thread raises SIGUSR1 N times as well; exit 0
 *   fork     call oxt_ua_fn N times, then a child calls it N times and exits 3
 *            (the breakpoints it inherits must not harm it); exit 0
 *   exec     call oxt_ua_fn N times, then exec this program as "- calls N"
 *   dl       (LIB loaded before "ready") unload LIB, then N times: load it,
 *            call its oxt_dl_twice three times, unload it (its pages unmapped);
 *            exit 0
 *   big      call oxt_ua_big, a function of more than 10,000 instructions, N
 *            times; exit 0
 *   quit     exit 5 at once
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS 4

volatile long oxt_ua_sink;

__attribute__((noinline, used)) long oxt_ua_fn(long a, long b)
{
	/* atomic: threads and signal handlers call it at once */
	__atomic_add_fetch(&oxt_ua_sink, a + b, __ATOMIC_SEQ_CST);
	return a + b;
}

/* 10,000 one-byte instructions and a ret: 10,002 offset probes, entry and return. */
__attribute__((noinline, used)) void oxt_ua_big(void)
{
	__asm__ volatile(".rept 10000\n\tnop\n\t.endr" ::: "memory");
}

static long handled[NTHREADS + 1];
static volatile int release;

static void on_usr1(int sig)
{
	(void)sig;
	oxt_ua_fn(1, 2);
}

struct worker {
	int i;
	long n;
};

static __thread int my_slot;

static void on_usr1_counted(int sig)
{
	on_usr1(sig);
	__atomic_add_fetch(&handled[my_slot], 1, __ATOMIC_SEQ_CST);
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	sigset_t usr1;

	/* blocked until this thread knows its slot (created with SIGUSR1 blocked) */
	my_slot = w->i;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	for (long k = 0; k < w->n; k++)
		oxt_ua_fn(w->i, k);
	while (!__atomic_load_n(&release, __ATOMIC_SEQ_CST))
		usleep(100);
	return NULL;
}

static int threads(long n)
{
	pthread_t t[NTHREADS];
	struct worker w[NTHREADS];
	struct sigaction sa;
	sigset_t usr1;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1_counted;
	sigaction(SIGUSR1, &sa, NULL);
	my_slot = NTHREADS;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ i, n };
		if (pthread_create(&t[i], NULL, worker, &w[i]))
			return 1;
	}
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	/* one signal at a time: each handled before the next is sent */
	for (long k = 0; k < n; k++) {
		for (int i = 0; i < NTHREADS; i++) {
			pthread_kill(t[i], SIGUSR1);
			while (__atomic_load_n(&handled[i], __ATOMIC_SEQ_CST) != k + 1)
				usleep(100);
		}
		raise(SIGUSR1);
	}
	__atomic_store_n(&release, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	printf("threads calls=%ld handled=%ld sink=%ld\n", 2 * NTHREADS * n + n,
	       handled[0] + handled[1] + handled[2] + handled[3] + handled[NTHREADS], oxt_ua_sink);
	return 0;
}

static long calls(long n)
{
	for (long k = 0; k < n; k++)
		oxt_ua_fn(k, 1);
	return oxt_ua_sink;
}

int main(int argc, char **argv)
{
	const char *go, *mode;
	void *lib = NULL;
	char nbuf[32];
	long n;
	int st;

	if (argc < 4) {
		fprintf(stderr, "usage: oxt_uattack GO MODE N [LIB]\n");
		return 2;
	}
	go = argv[1];
	mode = argv[2];
	n = atol(argv[3]);
	setvbuf(stdout, NULL, _IONBF, 0);
	if (!strcmp(mode, "dl")) {
		lib = dlopen(argc > 4 ? argv[4] : "liboxtdl.so", RTLD_NOW);
		if (!lib) {
			fprintf(stderr, "oxt_uattack: %s\n", dlerror());
			return 2;
		}
	}
	fprintf(stderr, "ready\n");
	if (strcmp(go, "-"))
		while (access(go, F_OK))
			usleep(1000);
	if (!strcmp(mode, "calls")) {
		printf("calls sink=%ld\n", calls(n));
		return 7;
	}
	if (!strcmp(mode, "threads"))
		return threads(n);
	if (!strcmp(mode, "fork")) {
		pid_t c;

		calls(n);
		c = fork();
		if (c < 0)
			return 3;
		if (!c) {
			printf("child sink=%ld\n", calls(n));
			_exit(3);
		}
		if (waitpid(c, &st, 0) != c)
			return 4;
		printf("parent sink=%ld child status=%d\n", oxt_ua_sink, WEXITSTATUS(st));
		return 0;
	}
	if (!strcmp(mode, "exec")) {
		printf("before exec sink=%ld\n", calls(n));
		snprintf(nbuf, sizeof(nbuf), "%ld", n);
		execl("/proc/self/exe", argv[0], "-", "calls", nbuf, (char *)NULL);
		return 5;
	}
	if (!strcmp(mode, "dl")) {
		long (*twice)(long);
		long sum = 0;

		dlclose(lib);
		for (long k = 0; k < n; k++) {
			lib = dlopen(argc > 4 ? argv[4] : "liboxtdl.so", RTLD_NOW);
			twice = lib ? (long (*)(long))dlsym(lib, "oxt_dl_twice") : NULL;
			if (!twice)
				return 6;
			for (int j = 1; j <= 3; j++)
				sum += twice(j);
			dlclose(lib);
		}
		printf("dl sum=%ld\n", sum);
		return 0;
	}
	if (!strcmp(mode, "big")) {
		for (long k = 0; k < n; k++)
			oxt_ua_big();
		printf("big calls=%ld\n", n);
		return 0;
	}
	if (!strcmp(mode, "quit"))
		return 5;
	return 2;
}
