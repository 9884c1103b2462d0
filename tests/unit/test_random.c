/*
 * test_random.c - idem_random_id(): its bounds, its output, and that no
 * id is handed out twice (by one thread, by two, by a forked child).
 */
#include <sys/wait.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "idem.h"
#include "tap.h"

static const struct {
	size_t	 outlen, nbytes;
	int	 want;
} bounds[] = {
	{ 25, 12, 0 },
	{ 24, 12, -1 },		/* no room for the NUL */
	{ 129, 64, 0 },
	{ 200, 65, -1 },	/* over 64 bytes */
	{ 10, 0, -1 },		/* nothing to draw */
	{ 3, 1, 0 },
};

static int
is_hex(const char *s, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (strchr("0123456789abcdef", s[i]) == NULL || s[i] == '\0')
			return 0;
	return s[n] == '\0';
}

static void *
draw(void *arg)
{
	idem_random_id(arg, 33, 16);
	return NULL;
}

int
main(void)
{
	char		 out[200], a[33], b[33], child[33];
	size_t		 i;
	pthread_t	 th;
	int		 p[2], st;
	pid_t		 pid;

	for (i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		memset(out, 'x', sizeof(out));
		TAP_OK(idem_random_id(out, bounds[i].outlen,
		    bounds[i].nbytes) == bounds[i].want,
		    "outlen %zu, nbytes %zu -> %d", bounds[i].outlen,
		    bounds[i].nbytes, bounds[i].want);
		if (bounds[i].want == 0)
			TAP_OK(is_hex(out, 2 * bounds[i].nbytes),
			    "  %zu lowercase hex digits and a NUL",
			    2 * bounds[i].nbytes);
		else
			TAP_OK(out[0] == 'x', "  out not written");
	}
	TAP_OK(idem_random_id(NULL, 33, 16) == -1, "NULL out -> -1");

	idem_random_id(a, sizeof(a), 16);
	idem_random_id(b, sizeof(b), 16);
	TAP_OK(strcmp(a, b) != 0, "two ids differ: %s %s", a, b);
	pthread_create(&th, NULL, draw, b);
	pthread_join(th, NULL);
	TAP_OK(is_hex(b, 32) && strcmp(a, b) != 0,
	    "another thread's id differs: %s", b);

	/* A child must not hand out what its parent's buffer holds next. */
	if (pipe(p) == -1 || (pid = fork()) == -1)
		return 1;
	if (pid == 0) {
		idem_random_id(child, sizeof(child), 16);
		(void)!write(p[1], child, sizeof(child));
		_exit(0);
	}
	waitpid(pid, &st, 0);
	memset(child, 0, sizeof(child));
	(void)!read(p[0], child, sizeof(child) - 1);
	idem_random_id(a, sizeof(a), 16);
	TAP_OK(is_hex(child, 32) && strcmp(a, child) != 0,
	    "a forked child's next id differs from the parent's: %s %s",
	    child, a);
	return TAP_DONE();
}
