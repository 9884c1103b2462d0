/*
 * runtime.c - the FastCGI process: where the listening socket comes from,
 * the threads, and a graceful drain on SIGTERM.
 *
 * One dispatcher thread polls the listening socket and every idle
 * kept-alive connection; worker threads take ready connections from a
 * queue and run one request each.  No thread ever blocks in accept() or
 * in a read of an idle connection, so kept-alive connections (nginx
 * fastcgi_keep_conn) cannot pin workers, and a stop wakes everyone.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"

#define MAX_IDLE	1024	/* kept-alive connections watched at once */
#define QUEUE_LEN	1024
#define DRAIN_MS	4500	/* exit within 5 s of SIGTERM, even if busy */

struct runtime {
	idem_app	*app;
	int		 listen_fd;
	int		 wake[2];	/* to the dispatcher */

	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;		/* queue not empty, or closing */
	pthread_cond_t	 done;		/* a worker exited */
	int		 queue[QUEUE_LEN];
	size_t		 qhead, qlen;
	int		 closing;
	unsigned	 running;	/* workers alive */
	int		 back[MAX_IDLE];	/* kept-alive fds handed back */
	size_t		 nback;
};

static void
rt_push(struct runtime *rt, int fd)
{
	pthread_mutex_lock(&rt->mu);
	if (rt->qlen == QUEUE_LEN) {
		pthread_mutex_unlock(&rt->mu);
		close(fd);	/* the web server sees a reset and retries */
		idem_log(IDEM_LOG_WARN, "runtime: queue full, dropped a "
		    "connection");
		return;
	}
	rt->queue[(rt->qhead + rt->qlen++) % QUEUE_LEN] = fd;
	pthread_cond_signal(&rt->cv);
	pthread_mutex_unlock(&rt->mu);
}

static void
rt_wake(struct runtime *rt)
{
	ssize_t	n;

	do
		n = write(rt->wake[1], "x", 1);
	while (n == -1 && errno == EINTR);
}

static void *
dispatcher(void *arg)
{
	struct runtime	*rt = arg;
	struct pollfd	 pfd[2 + MAX_IDLE];
	int		 idle[MAX_IDLE];
	size_t		 nidle = 0, npolled, i, n;
	char		 drain[64];
	int		 fd;

	for (;;) {
		pfd[0].fd = rt->wake[0];
		pfd[0].events = POLLIN;
		pfd[1].fd = nidle < MAX_IDLE ? rt->listen_fd : -1;
		pfd[1].events = POLLIN;
		for (i = 0; i < nidle; i++) {
			pfd[2 + i].fd = idle[i];
			pfd[2 + i].events = POLLIN;
		}
		if (poll(pfd, 2 + nidle, -1) == -1) {
			if (errno == EINTR)
				continue;
			idem_log(IDEM_LOG_ERROR, "runtime: poll: %s",
			    strerror(errno));
			break;
		}
		/* Only the connections just polled have results. */
		npolled = nidle;
		if (pfd[0].revents) {
			while (read(rt->wake[0], drain, sizeof(drain)) > 0)
				continue;
			pthread_mutex_lock(&rt->mu);
			for (i = 0; i < rt->nback; i++) {
				if (nidle < MAX_IDLE)
					idle[nidle++] = rt->back[i];
				else
					close(rt->back[i]);
			}
			rt->nback = 0;
			pthread_mutex_unlock(&rt->mu);
			if (atomic_load(&rt->app->stopping))
				break;
		}
		/* Ready idle connections go to the workers. */
		for (i = 0, n = nidle, nidle = 0; i < n; i++) {
			if (i < npolled && pfd[2 + i].revents)
				rt_push(rt, idle[i]);
			else
				idle[nidle++] = idle[i];
		}
		if (pfd[1].revents & POLLIN)
			while ((fd = accept4(rt->listen_fd, NULL, NULL,
			    SOCK_CLOEXEC)) >= 0)
				rt_push(rt, fd);
	}
	/* Stopping: idle connections carry no request; close them. */
	for (i = 0; i < nidle; i++)
		close(idle[i]);
	pthread_mutex_lock(&rt->mu);
	rt->closing = 1;
	pthread_cond_broadcast(&rt->cv);
	pthread_mutex_unlock(&rt->mu);
	return NULL;
}

static void *
worker(void *arg)
{
	struct runtime	*rt = arg;
	FCGX_Request	 req;
	int		 fd;

	/* listen_sock -1: libfcgi must never accept by itself. */
	FCGX_InitRequest(&req, -1, 0);
	for (;;) {
		pthread_mutex_lock(&rt->mu);
		while (rt->qlen == 0 && !rt->closing)
			pthread_cond_wait(&rt->cv, &rt->mu);
		if (rt->qlen == 0) {
			pthread_mutex_unlock(&rt->mu);
			break;
		}
		fd = rt->queue[rt->qhead];
		rt->qhead = (rt->qhead + 1) % QUEUE_LEN;
		rt->qlen--;
		pthread_mutex_unlock(&rt->mu);

		/* keepConnection stops FCGX_Accept_r closing our fd. */
		req.ipcFd = fd;
		req.keepConnection = 1;
		if (FCGX_Accept_r(&req) < 0) {
			/* Peer closed or spoke garbage; libfcgi closed it. */
			if (req.ipcFd >= 0) {
				close(req.ipcFd);
				req.ipcFd = -1;
			}
			continue;
		}
		idem_request_handle(rt->app, &req);
		if (atomic_load(&rt->app->stopping))
			req.keepConnection = 0;
		FCGX_Finish_r(&req);
		if (req.ipcFd >= 0) {
			fd = req.ipcFd;
			req.ipcFd = -1;
			pthread_mutex_lock(&rt->mu);
			if (rt->nback < MAX_IDLE && !rt->closing)
				rt->back[rt->nback++] = fd;
			else
				close(fd);
			pthread_mutex_unlock(&rt->mu);
			rt_wake(rt);
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
listen_socket(const char *addr)
{
	const char	*pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");

	if (pid != NULL && fds != NULL && atol(pid) == (long)getpid() &&
	    atoi(fds) >= 1) {
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDS");
		return 3;	/* SD_LISTEN_FDS_START */
	}
	if (addr != NULL)
		return idem_listen_addr(addr);
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

int
idem_runtime_run(idem_app *app, const char *addr)
{
	struct runtime	 rt;
	struct sigaction sa;
	sigset_t	 set;
	pthread_t	 disp, *th;
	struct timespec	 dl;
	unsigned	 i, n = app->cfg.threads;
	int		 sig, fl, drained = 1;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	/* Ours before FCGX_Init, so libfcgi keeps its own away. */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);	/* inherited by threads */

	bound_heap();
	if (FCGX_Init() != 0)
		return 1;
	memset(&rt, 0, sizeof(rt));
	rt.app = app;
	if ((rt.listen_fd = listen_socket(addr)) < 0 ||
	    idem_metrics_listen(app) == -1)
		return 1;
	fl = fcntl(rt.listen_fd, F_GETFL);
	/* Several processes may share the socket: never block in accept. */
	fcntl(rt.listen_fd, F_SETFL, fl | O_NONBLOCK);
	if (pipe2(rt.wake, O_CLOEXEC | O_NONBLOCK) == -1)
		return 1;
	pthread_mutex_init(&rt.mu, NULL);
	pthread_cond_init(&rt.cv, NULL);
	pthread_cond_init(&rt.done, NULL);
	if ((th = calloc(n, sizeof(*th))) == NULL)
		return 1;
	for (i = 0; i < n; i++) {
		if (pthread_create(&th[i], NULL, worker, &rt) != 0)
			break;
		rt.running++;
	}
	n = i;
	if (n == 0 || pthread_create(&disp, NULL, dispatcher, &rt) != 0 ||
	    idem_janitor_start(app) == -1) {
		idem_log(IDEM_LOG_ERROR, "runtime: cannot start threads");
		return 1;
	}
	idem_log(IDEM_LOG_INFO, "runtime: %u workers, pool of %u, pid %ld",
	    n, app->cfg.pool_size, (long)getpid());

	/* The janitor has its own thread: this one only waits for a stop. */
	do
		sig = sigwaitinfo(&set, NULL);
	while (sig != SIGTERM && sig != SIGINT);
	idem_log(IDEM_LOG_INFO, "runtime: signal %d, draining", sig);
	idem_deadline(CLOCK_REALTIME, DRAIN_MS, &dl);
	atomic_store(&app->stopping, 1);
	rt_wake(&rt);
	pthread_join(disp, NULL);
	/* Stops between batches; the drain's deadline bounds the wait. */
	if (idem_janitor_stop(app, &dl) == -1)
		drained = 0;
	idem_metrics_listen_stop(app);

	pthread_mutex_lock(&rt.mu);
	while (rt.running > 0)
		if (pthread_cond_timedwait(&rt.done, &rt.mu, &dl) ==
		    ETIMEDOUT) {
			drained = 0;
			break;
		}
	pthread_mutex_unlock(&rt.mu);
	if (!drained) {
		/* A handler is stuck: leave without freeing what it uses. */
		idem_log(IDEM_LOG_WARN, "runtime: %u requests (or the janitor) "
		    "still running after %d ms; exiting", rt.running, DRAIN_MS);
		return 0;
	}
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	free(th);
	close(rt.wake[0]);
	close(rt.wake[1]);
	pthread_mutex_destroy(&rt.mu);
	pthread_cond_destroy(&rt.cv);
	pthread_cond_destroy(&rt.done);
	idem_log(IDEM_LOG_INFO, "runtime: drained, exiting");
	return 0;
}
