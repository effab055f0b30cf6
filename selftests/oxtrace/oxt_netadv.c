// SPDX-License-Identifier: GPL-2.0
/*
 * oxt_netadv PORT [PHASE...]: an adversary of `oxtrace --listen 127.0.0.1:PORT`
 * (exporter_test.sh); every phase below in turn, or only those named.
 *
 * Each phase attacks, then checks that the exporter still answers a scrape (200 and the
 * OpenMetrics "# EOF" line), then waits for the exporter to close every attacking
 * connection (end of file or reset: a condition, never a time). It prints one line per
 * phase, "NAME ok DETAIL" or "NAME FAIL DETAIL", and exits 1 if any failed:
 *
 *   flood    1000 connections at once, each with half a request line
 *   slow     8 clients trickling an endless header, one byte at a time
 *   long     a request line of 100 MiB without a newline
 *   garbage  100 connections of random bytes
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#define FLOOD 1000
#define SLOW 8
#define LONG_LINE (100u << 20)
#define GARBAGE 100

static int port;
static int failed;

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("oxt_netadv: connect");
		exit(2);
	}
	return fd;
}

static void put(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		p = (const char *)p + w;
		n -= w;
	}
}

/* One scrape: 1 if it got 200 and the whole exposition. */
static int scrape(void)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	static char buf[1 << 20];
	size_t got = 0;
	ssize_t r;
	int fd = dial();

	put(fd, req, sizeof(req) - 1);
	while (got < sizeof(buf) - 1 && (r = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += r;
	close(fd);
	buf[got] = 0;
	return !strncmp(buf, "HTTP/1.1 200", 12) && strstr(buf, "# EOF\n");
}

/* Waits until the exporter has closed fd (end of file or reset); discards what it sends. */
static void wait_closed(int fd)
{
	char buf[4096];

	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r == 0 || (r < 0 && errno != EINTR))
			return;
	}
}

static void report(const char *phase, int ok, const char *detail)
{
	printf("%s %s %s\n", phase, ok ? "ok" : "FAIL", detail);
	fflush(stdout);
	failed |= !ok;
}

static void flood(void)
{
	static int fds[FLOOD];
	static const char half[] = "GET /metr";
	char d[128];
	int i, scraped;

	for (i = 0; i < FLOOD; i++) {
		fds[i] = dial();
		put(fds[i], half, sizeof(half) - 1);
	}
	scraped = scrape();
	for (i = 0; i < FLOOD; i++) {
		wait_closed(fds[i]);
		close(fds[i]);
	}
	snprintf(d, sizeof(d), "%d connections closed by the exporter, scrape %s", FLOOD,
		 scraped ? "answered" : "refused");
	report("flood", scraped, d);
}

static void slow(void)
{
	static const char head[] = "GET /metrics HTTP/1.1\r\nX-Slow: ";
	int fds[SLOW], open = SLOW, i, scraped = 0;
	long bytes = 0;
	char d[128];

	for (i = 0; i < SLOW; i++) {
		fds[i] = dial();
		put(fds[i], head, sizeof(head) - 1);
	}
	/* One byte per client per round until the exporter has closed them all. */
	while (open) {
		struct pollfd p[SLOW];

		for (i = 0; i < SLOW; i++) {
			p[i].fd = fds[i];
			p[i].events = POLLIN;
		}
		/* A pace for the trickle, not a bound: the loop ends on a condition. */
		poll(p, SLOW, 100);
		for (i = 0; i < SLOW; i++) {
			if (fds[i] < 0)
				continue;
			if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) ||
			    send(fds[i], "x", 1, MSG_NOSIGNAL) != 1) {
				wait_closed(fds[i]);
				close(fds[i]);
				fds[i] = -1;
				open--;
				continue;
			}
			bytes++;
		}
		if (!scraped)
			scraped = scrape();
	}
	snprintf(d, sizeof(d), "%d trickling clients closed after %ld bytes, scrape %s", SLOW,
		 bytes, scraped ? "answered" : "refused");
	report("slow", scraped, d);
}

static void long_line(void)
{
	static char chunk[64 << 10];
	size_t sent = 0;
	char d[128];
	int fd = dial(), ok;

	memset(chunk, 'A', sizeof(chunk));
	put(fd, "GET /", 5);
	while (sent < LONG_LINE) {
		ssize_t w = send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL);

		if (w <= 0)
			break;
		sent += w;
	}
	wait_closed(fd);
	close(fd);
	ok = sent < LONG_LINE && scrape();
	snprintf(d, sizeof(d), "the exporter closed after %zu of %u bytes", sent, LONG_LINE);
	report("long", ok, d);
}

static void garbage(void)
{
	static char junk[4096];
	unsigned int x = 12345;
	int i, j, ok;
	char d[128];

	for (i = 0; i < GARBAGE; i++) {
		int fd = dial();

		for (j = 0; j < (int)sizeof(junk); j++) {
			x = x * 1103515245 + 12345;
			junk[j] = x >> 16;
		}
		put(fd, junk, sizeof(junk));
		wait_closed(fd);
		close(fd);
	}
	ok = scrape();
	snprintf(d, sizeof(d), "%d connections of random bytes, scrape %s", GARBAGE,
		 ok ? "answered" : "refused");
	report("garbage", ok, d);
}

static const struct {
	const char *name;
	void (*run)(void);
} phases[] = {
	{ "flood", flood },
	{ "slow", slow },
	{ "long", long_line },
	{ "garbage", garbage },
};

int main(int argc, char **argv)
{
	struct rlimit rl = { FLOOD + 64, FLOOD + 64 };
	unsigned int i;
	int a;

	if (argc < 2 || !(port = atoi(argv[1]))) {
		fprintf(stderr, "usage: oxt_netadv PORT [flood|slow|long|garbage]...\n");
		return 2;
	}
	if (setrlimit(RLIMIT_NOFILE, &rl))
		perror("oxt_netadv: RLIMIT_NOFILE");
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		int named = argc == 2;

		for (a = 2; a < argc; a++)
			named |= !strcmp(argv[a], phases[i].name);
		if (named)
			phases[i].run();
	}
	return failed;
}
