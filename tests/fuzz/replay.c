/*
 * replay.c - runs a fuzz harness's LLVMFuzzerTestOneInput() on files, with
 * no fuzzer: make check builds each harness with it (the compiler at
 * hand, no libFuzzer) and tests/run replays the seed corpus and the
 * minimised crashers of tests/fuzz/regression/NAME through it, so that a
 * crash found once stays fixed.  A harness aborts on a violated property;
 * the exit status is then not 0.
 *
 *   replay_NAME FILE|DIR...     prints "ok N - FILE" per input
 */
#include <sys/stat.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int	LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int	n;

static int
one(const char *path)
{
	FILE		*f;
	unsigned char	*p;
	long		 len;

	if ((f = fopen(path, "rb")) == NULL || fseek(f, 0, SEEK_END) == -1 ||
	    (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) == -1 ||
	    (p = malloc((size_t)len + 1)) == NULL) {
		printf("not ok %d - %s: cannot read\n", ++n, path);
		if (f != NULL)
			fclose(f);
		return -1;
	}
	if (fread(p, 1, (size_t)len, f) != (size_t)len) {
		printf("not ok %d - %s: cannot read\n", ++n, path);
		free(p);
		fclose(f);
		return -1;
	}
	fclose(f);
	/* Flushed first: an abort in the harness must not lose the lines. */
	fflush(stdout);
	LLVMFuzzerTestOneInput(p, (size_t)len);
	free(p);
	printf("ok %d - %s\n", ++n, path);
	return 0;
}

static int
byname(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
walk(const char *path)
{
	struct stat	 st;
	struct dirent	*d;
	DIR		*dir;
	char		**names = NULL, full[4096];
	size_t		 nn = 0, i;
	int		 rc = 0;

	if (stat(path, &st) == -1)
		return 0;	/* an absent folder has nothing to replay */
	if (!S_ISDIR(st.st_mode))
		return one(path);
	if ((dir = opendir(path)) == NULL)
		return -1;
	while ((d = readdir(dir)) != NULL) {
		if (d->d_name[0] == '.' || strcmp(d->d_name, "README") == 0)
			continue;
		names = realloc(names, (nn + 1) * sizeof(*names));
		if (names == NULL || (names[nn] = strdup(d->d_name)) == NULL)
			abort();
		nn++;
	}
	closedir(dir);
	/* In name order, so that a report names the same input each run. */
	if (nn > 0)
		qsort(names, nn, sizeof(*names), byname);
	for (i = 0; i < nn; i++) {
		snprintf(full, sizeof(full), "%s/%s", path, names[i]);
		rc |= one(full);
		free(names[i]);
	}
	free(names);
	return rc;
}

int
main(int argc, char *argv[])
{
	int	i, rc = 0;

	if (LLVMFuzzerInitialize != NULL)
		LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++)
		rc |= walk(argv[i]);
	printf("1..%d\n", n);
	return rc == 0 ? 0 : 1;
}
