/*
 * service.h - a background thread's start, stop and wait (the janitor's,
 * the dispatcher's, the heartbeat's): one piece of code for the three.
 */
#ifndef IDEM_SERVICE_H
#define IDEM_SERVICE_H

#include <pthread.h>
#include <time.h>

/*
 * The thread's controls, where its owner keeps them: the fields th, mu,
 * cv, stop and done of the owner's own struct (IDEM_SERVICE_OF), so each
 * owner keeps its struct and its loop reads them as before.
 */
struct idem_service {
	pthread_t	*th;
	pthread_mutex_t	*mu;
	pthread_cond_t	*cv;
	int		*stop;		/* set by idem_service_stop */
	int		*done;		/* set by idem_service_exit */
	clockid_t	 clock;		/* of cv's timed waits */
};

#define IDEM_SERVICE_OF(o, clk) ((struct idem_service){ &(o)->th,	\
	&(o)->mu, &(o)->cv, &(o)->stop, &(o)->done, (clk) })

/* Initialise mu and cv, then run fn(arg) on th; -1 (nothing left) when
 * the thread cannot be created. */
int	idem_service_start(struct idem_service s, void *(*fn)(void *),
	    void *arg);
/* Ask the thread to stop and wait for its idem_service_exit until
 * deadline (s.clock; NULL: no bound); then join it and destroy mu and cv.
 * -1 when it is still running at the deadline (then nothing is freed). */
int	idem_service_stop(struct idem_service s,
	    const struct timespec *deadline);
/* In the thread: wait until until (s.clock) or a stop; 1 on a stop. */
int	idem_service_wait(struct idem_service s, const struct timespec *until);
/* In the thread, last: say it has returned. */
void	idem_service_exit(struct idem_service s);

#endif
