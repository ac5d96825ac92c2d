/* SPDX-License-Identifier: MIT */
/*
 * At vm.max_map_count the host backend's import (its anchor mmap) and map
 * (mremap of an anchor, mmap of a created page) fail with -ENOMEM, as they
 * always did, and now log one ERR line that names the limit, the process's
 * count and what to do.  Provoked for real, without root: a child process
 * (so the parent's address space stays as it was) uses up all but a few
 * dozen of its VMAs with a PROT_NONE region split by mprotect of every
 * other page, then imports and maps pages until one fails, imports until
 * that fails too, and tries a map of a created page.  Releasing a few
 * pages and unmapping their slots gives VMAs back, and the backend maps
 * and reads a page again.  A real ENOMEM far from the limit (a child
 * under RLIMIT_AS) keeps the plain "Cannot allocate memory" line.  Skips
 * above a limit of 1,000,000, where using it up would take too long.
 */
#include <sys/mman.h>
#include <sys/resource.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define PAGE (8 * 1024)
#define SLOTS 256 /* the importer's reservation, in pages */
#define HEADROOM 64 /* VMAs left before the import/map loop */
#define MAX_LIMIT 1000000L
#define LIMIT_LINE "vm.max_map_count is "

static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static long count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	long n = 0;
	int c;

	t_assert(f != NULL);
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Lines of the captured log (fd) that say out of mappings, and whether one
 * of them also contains what. */
static int limit_lines(int fd, const char *what, bool *seen)
{
	static char buf[1 << 16];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	int lines = 0;

	t_assert(n >= 0);
	buf[n] = 0;
	*seen = false;
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
		if (!strstr(l, LIMIT_LINE))
			continue;
		t_assert(strstr(l, " ERR "));
		t_assert(strstr(l, ": out of mappings: "));
		t_assert(strstr(l, "sysctl vm.max_map_count=N"));
		t_assert(strstr(l, "fewer or larger pages"));
		lines++;
		if (strstr(l, what))
			*seen = true;
	}
	return lines;
}

/* The log's out-of-mappings lines, on stdout for whoever reads the test's
 * output. */
static void show_limit_lines(int fd)
{
	static char buf[1 << 16];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	t_assert(n >= 0);
	buf[n] = 0;
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
		if (strstr(l, LIMIT_LINE))
			printf("logged: %s\n", l);
}

/* Use up all but headroom of the process's VMAs: one PROT_NONE region with
 * every other page opened, so no two neighbours merge.  No memory is
 * touched, so this costs page tables only. */
static void use_up_vmas(long max, long headroom)
{
	long now = count_maps(), splits = (max - headroom - now) / 2;
	size_t len = (size_t)(2 * splits + 2) * 4096;
	char *p;

	t_assert(splits > 0);
	p = mmap(NULL, len, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	t_assert(p != MAP_FAILED);
	for (long i = 0; i < splits; i++)
		t_ok(mprotect(p + (2 * i + 1) * 4096, 4096, PROT_READ) ?
			     -errno :
			     0);
	now = count_maps();
	t_assert(now <= max - headroom + 4 && now >= max - headroom - 4);
}

static int child(int logfd, long max)
{
	struct vmm_backend *d, *b;
	vmm_handle_t src, own, pages[SLOTS];
	uint64_t va, dva;
	int fd, n = 0, lines, err = 0, mapped = 0, first;
	bool import_failed = false, seen;
	char buf[16];

	t_assert(dup2(logfd, STDERR_FILENO) == STDERR_FILENO);
	vmm_log_set_level(VMM_LOG_ERR);
	d = vt_open_host(PAGE); /* creator: kvmmd's side */
	b = vt_open_host(PAGE); /* importer: a client's side */
	t_ok(d->ops->page_create(d, &src));
	t_ok(d->ops->copy_from_host(d, src, 0, "page", 5));
	t_ok(d->ops->page_create(d, &own));
	t_ok(d->ops->reserve(d, 4 * PAGE, &dva));
	t_ok(b->ops->reserve(b, SLOTS * PAGE, &va));

	use_up_vmas(max, HEADROOM);

	/* Import and map until one of them fails: -ENOMEM, as before. */
	while (n < SLOTS) {
		t_ok(d->ops->page_export(d, src, &fd));
		err = b->ops->page_import(b, fd, &pages[n]);
		close(fd);
		if (err) {
			import_failed = true;
			break;
		}
		n++;
		err = b->ops->map(b, va + (uint64_t)(n - 1) * PAGE,
				  pages[n - 1]);
		if (err)
			break;
		mapped++;
	}
	t_assert_eq(err, -ENOMEM);
	t_assert(n > 4 && n < SLOTS);
	lines = limit_lines(logfd, import_failed ? "import fd" : "map page",
			    &seen);
	t_assert_eq(lines, 1);
	t_assert(seen);
	t_assert(mapped > 8);
	first = n;

	/* The other one fails too: imports until the anchor does not fit
	 * (a map wants more room), then a map of an imported page. */
	while (!import_failed && n < SLOTS) {
		t_ok(d->ops->page_export(d, src, &fd));
		err = b->ops->page_import(b, fd, &pages[n]);
		close(fd);
		if (err)
			break;
		n++;
	}
	t_assert_eq(err, -ENOMEM);
	t_assert_eq(b->ops->map(b, va + (uint64_t)mapped * PAGE, pages[0]),
		    -ENOMEM);
	/* ...and of a created page, mmap of its memfd. */
	t_assert_eq(d->ops->map(d, dva + PAGE, own), -ENOMEM);
	lines = limit_lines(logfd, "import fd", &seen);
	t_assert(seen);
	t_assert_eq(lines, 4 - import_failed);
	limit_lines(logfd, "map page", &seen);
	t_assert(seen);

	/* Give some back: the unmapped pages first, then the last 8 mapped
	 * ones (slots next to the free tail merge into it). */
	while (n > mapped)
		t_ok(b->ops->page_release(b, pages[--n]));
	for (int i = 0; i < 8; i++) {
		t_ok(b->ops->unmap(b, va + (uint64_t)(mapped - 1) * PAGE));
		t_ok(b->ops->page_release(b, pages[--mapped]));
		n--;
	}
	t_ok(d->ops->page_export(d, src, &fd));
	t_ok(b->ops->page_import(b, fd, &pages[n]));
	close(fd);
	t_ok(vmm_map_page(b, va + (uint64_t)mapped * PAGE, pages[n],
			  VMM_PROT_READ));
	t_assert(
		!strcmp((const char *)(uintptr_t)(va + mapped * PAGE), "page"));
	t_ok(vmm_map_page(d, dva + PAGE, own, VMM_PROT_RW));
	t_ok(d->ops->copy_to_host(d, buf, src, 0, 5));
	t_assert(!strcmp(buf, "page"));
	/* Nothing more was logged as out of mappings. */
	t_assert_eq(limit_lines(logfd, "", &seen), 4 - import_failed);
	/* stdout only now: at the limit its buffer might not be allocated. */
	printf("the %s of page %d failed with %d VMAs left below vm.max_map_count %ld\n",
	       import_failed ? "import" : "map", first, HEADROOM, max);
	show_limit_lines(logfd);

	for (int i = 0; i <= mapped; i++)
		t_ok(b->ops->unmap(b, va + (uint64_t)i * PAGE));
	for (int i = 0; i <= n; i++)
		t_ok(b->ops->page_release(b, pages[i]));
	t_ok(d->ops->unmap(d, dva + PAGE));
	t_ok(b->ops->free_range(b, va, SLOTS * PAGE));
	t_ok(d->ops->free_range(d, dva, 4 * PAGE));
	t_ok(d->ops->page_release(d, own));
	t_ok(d->ops->page_release(d, src));
	vmm_backend_close(b);
	vmm_backend_close(d);
	return 0;
}

/* Real ENOMEM far from the limit (RLIMIT_AS at the current size): the old
 * line, strerror's, and no word of vm.max_map_count. */
static int rlimit_as(int logfd, long max)
{
	struct vmm_backend *d, *b;
	vmm_handle_t src, page;
	struct rlimit rl, low;
	char line[256];
	long kb = -1;
	bool seen;
	FILE *f;
	int fd;

	(void)max;
	t_assert(dup2(logfd, STDERR_FILENO) == STDERR_FILENO);
	vmm_log_set_level(VMM_LOG_ERR);
	d = vt_open_host(PAGE);
	b = vt_open_host(PAGE);
	t_ok(d->ops->page_create(d, &src));
	t_ok(d->ops->page_export(d, src, &fd));
	f = fopen("/proc/self/status", "re");
	t_assert(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
			break;
	fclose(f);
	t_assert(kb > 0);
	t_ok(getrlimit(RLIMIT_AS, &rl) ? -errno : 0);
	low = rl;
	low.rlim_cur = (rlim_t)kb * 1024;
	t_ok(setrlimit(RLIMIT_AS, &low) ? -errno : 0);
	t_assert_eq(b->ops->page_import(b, fd, &page), -ENOMEM);
	t_ok(setrlimit(RLIMIT_AS, &rl) ? -errno : 0);
	close(fd);
	t_assert_eq(limit_lines(logfd, "", &seen), 0);
	{
		static char buf[1 << 16];
		ssize_t n = pread(logfd, buf, sizeof(buf) - 1, 0);

		t_assert(n > 0);
		buf[n] = 0;
		t_assert(strstr(buf, "vmm host: import fd ") &&
			 strstr(buf,
				"(map its anchor): Cannot allocate memory"));
	}
	t_ok(d->ops->page_release(d, src));
	vmm_backend_close(b);
	vmm_backend_close(d);
	return 0;
}

/* Run fn(logfd, max) in a child with its stderr in a fresh log file; on
 * failure show that log. */
static void in_child(int (*fn)(int, long), long max)
{
	FILE *log = tmpfile();
	char buf[4096];
	off_t off = 0;
	ssize_t r;
	pid_t pid;
	int st;

	t_assert(log != NULL);
	fflush(stdout);
	pid = fork();
	t_assert(pid >= 0);
	if (!pid)
		exit(fn(fileno(log), max));
	t_assert_eq(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		/* The child's stderr was the log: show it. */
		while ((r = pread(fileno(log), buf, sizeof(buf), off)) > 0) {
			fwrite(buf, 1, (size_t)r, stderr);
			off += r;
		}
		t_fail("child: status %#x", st);
	}
	fclose(log);
}

int main(void)
{
	long max = read_long("/proc/sys/vm/max_map_count");

	if (max <= 0)
		t_skip("cannot read /proc/sys/vm/max_map_count");
	if (max > MAX_LIMIT)
		t_skip("vm.max_map_count is %ld: using it up would take too long",
		       max);
	if (count_maps() + 2 * HEADROOM > max)
		t_skip("vm.max_map_count %ld leaves no room to test", max);
	in_child(child, max);
	in_child(rlimit_as, max);
	printf("ok: out of mappings said so, and recovered; ENOMEM under RLIMIT_AS did not\n");
	return 0;
}
