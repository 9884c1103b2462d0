/*
 * receiver.c - the webhook receiver of the outbox benchmark (tests/bench/run,
 * BENCH_TESTS=outbox): answers every POST 200 at once and records when it
 * arrived and its webhook-id, so that the dispatcher, not the receiver, is
 * what is measured.  Built by the run into its temp dir, never installed;
 * one thread, one connection at a time (each delivery is a connection of
 * its own), no signature check (the suite checks signatures).  With
 * DELAY_MS, each connection is served by a thread of its own that answers
 * DELAY_MS after the request was read (a network's round trip), so that
 * concurrent deliveries are answered concurrently.
 *
 *   receiver PORTFILE LOGFILE [DELAY_MS]
 *
 * Listens on 127.0.0.1 (a free port, written to PORTFILE once it
 * accepts); appends "SECONDS.MICROSECONDS WEBHOOK-ID" (CLOCK_REALTIME, the
 * request read whole) per delivery to LOGFILE, flushed whenever no
 * connection has come for 50 ms and at SIGTERM.
 */
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define REQ_MAX		65536

static volatile sig_atomic_t stop;
static pthread_mutex_t	log_mu = PTHREAD_MUTEX_INITIALIZER;
static const char	ok[] = "HTTP/1.1 200 OK\r\n"
    "Content-Length: 0\r\nConnection: close\r\n\r\n";
static const char	bad[] = "HTTP/1.1 400 Bad Request\r\n"
    "Content-Length: 0\r\nConnection: close\r\n\r\n";

static void
on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* The value of header name in the head (up to its blank line), copied
 * into out; 0 if found. */
static int
header(const char *head, const char *name, char *out, size_t outlen)
{
	const char	*p = head, *v, *e;
	size_t		 n = strlen(name), len;

	while ((p = strstr(p, "\r\n")) != NULL) {
		p += 2;
		if (strncmp(p, "\r\n", 2) == 0)
			break;
		if (strncasecmp(p, name, n) != 0 || p[n] != ':')
			continue;
		for (v = p + n + 1; *v == ' ' || *v == '\t'; v++)
			continue;
		if ((e = strstr(v, "\r\n")) == NULL)
			return -1;
		len = (size_t)(e - v);
		if (len >= outlen)
			len = outlen - 1;
		memcpy(out, v, len);
		out[len] = '\0';
		return 0;
	}
	return -1;
}

/* Read one request from fd and record it: 0, or -1 when it is not a whole
 * request. */
static int
serve(int fd, FILE *log, char *buf)
{
	struct timespec	 now;
	char		 id[256], cl[32];
	const char	*end = NULL;
	size_t		 got = 0, want = 0;
	ssize_t		 n;

	for (;;) {
		if (got == REQ_MAX ||
		    (n = read(fd, buf + got, REQ_MAX - got)) <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = '\0';
		if (end == NULL && (end = strstr(buf, "\r\n\r\n")) != NULL) {
			want = (size_t)(end - buf) + 4;
			if (header(buf, "Content-Length", cl, sizeof(cl)) == 0)
				want += strtoul(cl, NULL, 10);
		}
		if (end != NULL && got >= want)
			break;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	if (header(buf, "webhook-id", id, sizeof(id)) == -1)
		snprintf(id, sizeof(id), "-");
	pthread_mutex_lock(&log_mu);
	fprintf(log, "%lld.%06ld %s\n", (long long)now.tv_sec,
	    now.tv_nsec / 1000, id);
	pthread_mutex_unlock(&log_mu);
	return 0;
}

/* A connection served in a thread of its own, answered delay ms late. */
struct late {
	int	 fd;
	FILE	*log;
	long	 delay_ms;
};

static void *
serve_late(void *arg)
{
	struct late	*l = arg;
	struct timespec	 d = { l->delay_ms / 1000, l->delay_ms % 1000 * 1000000 };
	char		*buf = malloc(REQ_MAX + 1);
	const char	*a = buf != NULL && serve(l->fd, l->log, buf) == 0 ?
			    ok : bad;

	nanosleep(&d, NULL);
	if (write(l->fd, a, strlen(a)) == -1)
		a = NULL;
	close(l->fd);
	free(buf);
	free(l);
	return NULL;
}

int
main(int argc, char *argv[])
{
	static char		 buf[REQ_MAX + 1];
	struct sockaddr_in	 sa;
	struct late		*l;
	pthread_t		 th;
	long			 delay_ms = 0;
	struct sigaction	 act;
	struct timeval		 tv = { 5, 0 };
	struct pollfd		 pfd;
	socklen_t		 slen = sizeof(sa);
	FILE			*log, *pf;
	const char		*a;
	int			 s, c, one = 1;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: receiver PORTFILE LOGFILE [DELAY_MS]\n");
		return 2;
	}
	if (argc == 4)
		delay_ms = strtol(argv[3], NULL, 10);
	memset(&act, 0, sizeof(act));
	act.sa_handler = on_term;	/* no SA_RESTART: poll returns */
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((log = fopen(argv[2], "a")) == NULL) {
		perror(argv[2]);
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((s = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
	    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(s, (struct sockaddr *)&sa, sizeof(sa)) == -1 ||
	    listen(s, 1024) == -1 ||
	    getsockname(s, (struct sockaddr *)&sa, &slen) == -1) {
		perror("listen");
		return 1;
	}
	if ((pf = fopen(argv[1], "w")) == NULL) {
		perror(argv[1]);
		return 1;
	}
	fprintf(pf, "%d\n", ntohs(sa.sin_port));
	fclose(pf);
	pfd.fd = s;
	pfd.events = POLLIN;
	while (!stop) {
		/* Idle: what was recorded is readable. */
		if (poll(&pfd, 1, 50) <= 0) {
			pthread_mutex_lock(&log_mu);
			fflush(log);
			pthread_mutex_unlock(&log_mu);
			continue;
		}
		if ((c = accept(s, NULL, NULL)) == -1)
			continue;
		/* A client that stalls holds no one up for long. */
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (delay_ms > 0) {
			if ((l = malloc(sizeof(*l))) == NULL) {
				close(c);
				continue;
			}
			*l = (struct late){ c, log, delay_ms };
			if (pthread_create(&th, NULL, serve_late, l) != 0) {
				free(l);
				close(c);
			} else
				pthread_detach(th);
			continue;
		}
		a = serve(c, log, buf) == 0 ? ok : bad;
		/* Closed just after: a failed write changes nothing. */
		if (write(c, a, strlen(a)) == -1)
			a = NULL;
		close(c);
	}
	fclose(log);
	close(s);
	return 0;
}
