/*
 * runtime.c - the FastCGI process: where the listening socket comes from,
 * the threads, and a graceful drain on SIGTERM.
 *
 * The workers share one epoll set: the listening socket and every
 * connection, each registered one-shot, so exactly one worker wakes for a
 * ready socket and owns it until it arms it again.  A worker reads what a
 * connection has without blocking (conns.c) and serves a request only once
 * it is whole; a partial one waits in the set, the worker goes back to
 * waiting.  No thread blocks in accept() or in a read, so neither
 * kept-alive connections (nginx fastcgi_keep_conn) nor slow or idle peers
 * can pin workers; nothing is handed from thread to thread; a stop (an
 * eventfd in the same set, level-triggered) wakes everyone.  At the
 * descriptor limit the listener is paused rather than polled in vain
 * (listener.c).  The main
 * thread waits for a signal and, meanwhile, closes the connections late
 * with their request ([server] read_timeout).
 */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"
#include "heartbeat.h"

#define DRAIN_MS	4500	/* exit within 5 s of SIGTERM, even if busy */

struct runtime {
	idem_app	*app;
	int		 listen_fd;
	int		 ep;		/* epoll: listener, idle connections, stop */
	int		 stop_fd;	/* eventfd, readable once stopping */
	struct idem_listener *lst;	/* listen_fd in the set (listener.c) */
	struct idem_conns *conns;

	pthread_mutex_t	 mu;
	pthread_cond_t	 done;		/* a worker exited */
	unsigned	 running;	/* workers alive */
};

static void *
worker(void *arg)
{
	struct runtime		*rt = arg;
	struct epoll_event	 ev;
	int			 n;

	for (;;) {
		n = epoll_wait(rt->ep, &ev, 1, -1);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			idem_log(IDEM_LOG_ERROR, "runtime: epoll_wait: %s",
			    strerror(errno));
			break;
		}
		if (ev.data.ptr == &rt->stop_fd)
			break;
		switch (idem_listener_tag(rt->lst, ev.data.ptr)) {
		case IDEM_LISTENER_SOCKET:
			/* One connection per wake-up; the listener is armed
			 * again (or paused) before it is read. */
			idem_conns_accept(rt->conns, rt->lst);
			break;
		case IDEM_LISTENER_TIMER:
			idem_listener_timer(rt->lst);
			break;
		case IDEM_LISTENER_OTHER:
			/* A connection has bytes (or its deadline passed). */
			idem_conns_ready(rt->conns, ev.data.ptr);
			break;
		}
	}
	pthread_mutex_lock(&rt->mu);
	rt->running--;
	pthread_cond_signal(&rt->done);
	pthread_mutex_unlock(&rt->mu);
	return NULL;
}

static void
on_signal(int sig)
{
	(void)sig;
}

/* The listening socket: systemd, -l / [server] listen, or fd 0. */
static int
listen_socket(const idem_app *app, const char *addr)
{
	const char	*pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");

	if (pid != NULL && fds != NULL && atol(pid) == (long)getpid() &&
	    atoi(fds) >= 1) {
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDS");
		return 3;	/* SD_LISTEN_FDS_START */
	}
	if (addr != NULL)
		return idem_listen_addr(addr, app->cfg.socket_mode,
		    app->cfg.socket_group);
	if (!FCGX_IsCGI())
		return 0;
	idem_log(IDEM_LOG_ERROR, "runtime: not started by a web server "
	    "(no listening socket on fd 0); use -l ADDR");
	return -1;
}

/*
 * Bodies, canonical forms and their trees are large and short-lived.
 * glibc raises its mmap threshold after the first large free, and each
 * worker thread's arena then keeps up to twice that: with N threads, N
 * copies of max_body-sized garbage stay resident.  Fixed thresholds (and
 * few arenas) give large blocks back to the system when a request ends.
 */
static void
bound_heap(void)
{
#ifdef M_MMAP_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	mallopt(M_TRIM_THRESHOLD, 128 * 1024);
	mallopt(M_ARENA_MAX, 2);
#endif
}

/* Our handlers (before FCGX_Init, so libfcgi keeps its own away);
 * SIGTERM and SIGINT blocked in *set, awaited by the main thread. */
static void
signals_init(sigset_t *set)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	pthread_sigmask(SIG_BLOCK, set, NULL);	/* inherited by threads */
}

/* The listening socket, the epoll set with the stop and the listener. */
static int
runtime_open(struct runtime *rt, idem_app *app, const char *addr)
{
	struct epoll_event ev;
	int		 fl;

	memset(rt, 0, sizeof(*rt));
	rt->app = app;
	if ((rt->listen_fd = listen_socket(app, addr)) < 0 ||
	    idem_metrics_listen(app) == -1)
		return -1;
	fl = fcntl(rt->listen_fd, F_GETFL);
	/* Several processes may share the socket: never block in accept. */
	fcntl(rt->listen_fd, F_SETFL, fl | O_NONBLOCK);
	if ((rt->ep = epoll_create1(EPOLL_CLOEXEC)) == -1 ||
	    (rt->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1 ||
	    (rt->conns = idem_conns_new(app, rt->ep)) == NULL)
		return -1;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;		/* level-triggered: wakes every worker */
	ev.data.ptr = &rt->stop_fd;
	if (epoll_ctl(rt->ep, EPOLL_CTL_ADD, rt->stop_fd, &ev) == -1 ||
	    (rt->lst = idem_listener_new(app, rt->ep, rt->listen_fd)) == NULL)
		return -1;
	pthread_mutex_init(&rt->mu, NULL);
	pthread_cond_init(&rt->done, NULL);
	return 0;
}

/* The workers (*np of them started, into th) and the background threads. */
static int
threads_start(struct runtime *rt, pthread_t *th, unsigned *np)
{
	idem_app	*app = rt->app;
	unsigned	 i, n = *np;

	for (i = 0; i < n; i++) {
		if (pthread_create(&th[i], NULL, worker, rt) != 0)
			break;
		rt->running++;
	}
	*np = n = i;
	/* Leases live as long as this process does (heartbeat.c). */
	app->heartbeat = idem_heartbeat_start(app,
	    idem_heartbeat_interval(idem_cfg_lease_min(&app->cfg)),
	    n + IDEM_HEARTBEAT_SPARE);
	if (n == 0 || app->heartbeat == NULL ||
	    idem_janitor_start(app) == -1 ||
	    idem_dispatcher_start(app) == -1 || idem_log_gather_start() == -1) {
		idem_log(IDEM_LOG_ERROR, "runtime: cannot start threads");
		return -1;
	}
	return 0;
}

/*
 * The janitor has its own thread: this one waits for a stop and
 * closes late connections meanwhile, sleeping until the next
 * deadline (at most the shorter of read_timeout and write_timeout:
 * a connection queued meanwhile is due later than that).
 */
static int
wait_for_stop(struct runtime *rt, const sigset_t *set)
{
	struct timespec	 tick;
	long long	 wait_ms;
	int		 sig;

	do {
		wait_ms = idem_conns_expire(rt->conns);
		tick.tv_sec = wait_ms / 1000;
		tick.tv_nsec = (wait_ms % 1000) * 1000000 + 1000000;
		if (tick.tv_nsec >= 1000000000) {
			tick.tv_sec++;
			tick.tv_nsec -= 1000000000;
		}
		sig = sigtimedwait(set, NULL, &tick);
	} while (sig != SIGTERM && sig != SIGINT);
	return sig;
}

/* Stops the threads by dl; 1 when all stopped, 0 when one is stuck. */
static int
drain(struct runtime *rt, const struct timespec *dl)
{
	idem_app	*app = rt->app;
	uint64_t	 one = 1;
	int		 drained = 1;

	atomic_store(&app->stopping, 1);
	/* No new connection; busy workers finish their request first. */
	idem_listener_stop(rt->lst);
	if (write(rt->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		idem_log(IDEM_LOG_ERROR, "runtime: cannot wake the workers: "
		    "%s", strerror(errno));
	/* Stops between batches; the drain's deadline bounds the wait. */
	if (idem_janitor_stop(app, dl) == -1)
		drained = 0;
	/* Stops between deliveries; one in flight ends within the drain
	 * or is left to its hold (taken, due again later). */
	if (idem_dispatcher_stop(app, dl) == -1)
		drained = 0;
	idem_metrics_listen_stop(app);

	pthread_mutex_lock(&rt->mu);
	while (rt->running > 0)
		if (pthread_cond_timedwait(&rt->done, &rt->mu, dl) ==
		    ETIMEDOUT) {
			drained = 0;
			break;
		}
	pthread_mutex_unlock(&rt->mu);
	return drained;
}

/* A handler is stuck: leave without freeing what it uses. */
static void
exit_undrained(struct runtime *rt)
{
	idem_log(IDEM_LOG_WARN, "runtime: %u requests (or the janitor) "
	    "still running after %d ms; exiting", rt->running, DRAIN_MS);
	/*
	 * Exit here: returning would let the caller free the
	 * application (idem_app_free) and exit() run its handlers
	 * while the stuck thread still uses them (ASan saw the
	 * use after free).  Nothing of the process is needed after.
	 */
	idem_log_flush();
	fflush(NULL);
	_exit(IDEM_EXIT_UNDRAINED);
}

/* All threads stopped: frees what the run held. */
static void
runtime_close(struct runtime *rt, pthread_t *th, unsigned n,
    const struct timespec *dl)
{
	unsigned	 i;

	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	free(th);
	idem_heartbeat_stop(rt->app->heartbeat);
	rt->app->heartbeat = NULL;
	/* Idle kept-alive or half-read connections carry no request;
	 * answers still waiting for their peer get what is left of the
	 * drain. */
	idem_conns_free(rt->conns, (dl->tv_sec - time(NULL)) * 1000);
	idem_listener_free(rt->lst);
	close(rt->stop_fd);
	close(rt->ep);
	pthread_mutex_destroy(&rt->mu);
	pthread_cond_destroy(&rt->done);
}

int
idem_runtime_run(idem_app *app, const char *addr)
{
	struct runtime	 rt;
	sigset_t	 set;
	pthread_t	*th;
	struct timespec	 dl;
	unsigned	 n = app->cfg.threads;
	int		 sig;

	signals_init(&set);
	bound_heap();
	if (FCGX_Init() != 0)
		return 1;
	if (runtime_open(&rt, app, addr) == -1)
		return 1;
	if ((th = calloc(n, sizeof(*th))) == NULL)
		return 1;
	if (threads_start(&rt, th, &n) == -1)
		return 1;
	idem_log(IDEM_LOG_INFO, "runtime: %u workers, pool of %u, pid %ld",
	    n, app->cfg.pool_size, (long)getpid());

	sig = wait_for_stop(&rt, &set);
	idem_log(IDEM_LOG_INFO, "runtime: signal %d, draining", sig);
	idem_deadline(CLOCK_REALTIME, DRAIN_MS, &dl);
	if (!drain(&rt, &dl))
		exit_undrained(&rt);
	runtime_close(&rt, th, n, &dl);
	idem_log_gather_stop();
	idem_log(IDEM_LOG_INFO, "runtime: drained, exiting");
	return 0;
}
