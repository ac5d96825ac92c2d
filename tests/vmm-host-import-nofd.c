/* SPDX-License-Identifier: MIT */
/*
 * An imported host page holds no fd: page_import maps the page once (its
 * PROT_NONE "anchor") and keeps no fd, and map duplicates that anchor at
 * the slot.  A creator backend (the daemon's role) exports a page; an
 * importer backend (the client's) imports it with its own fd count
 * unchanged, maps it at two addresses, writes through one and reads
 * through the other, copies both ways through the handle, unmaps, and
 * releases it: the anchor goes with it (counted in /proc/self/maps), and
 * the released handle is refused everywhere, also after the next import
 * gets an anchor at the same address.  A mapping outlives its handle's
 * release.  300 imports under a soft RLIMIT_NOFILE of 64 open no fd.
 * Export and page_fd of an imported page say -EOPNOTSUPP; a created page
 * and an imported one in the same backend are told apart.
 */
#include <sys/resource.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define PAGE (8 * 1024)
#define MANY 300

struct page_maps {
	int n; /* mappings of the page's memfd */
	int outside; /* ... outside [lo, hi): anchors */
	uint64_t anchor; /* start of the last of those */
	char anchor_perms[8];
};

/* The mappings of memfd:kvmm-page inode ino in /proc/self/maps. */
static struct page_maps page_maps(uint64_t ino, uint64_t lo, uint64_t hi)
{
	struct page_maps m = { 0 };
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];

	t_assert(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, inode;
		char perms[8];

		if (!strstr(line, "memfd:kvmm-page"))
			continue;
		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu", &start, &end,
			   perms, &inode) != 4 ||
		    inode != ino)
			continue;
		t_assert_eq(end - start, PAGE);
		m.n++;
		if (start < lo || start >= hi) {
			m.outside++;
			m.anchor = start;
			strcpy(m.anchor_perms, perms);
		}
	}
	fclose(f);
	return m;
}

static void stale_everywhere(struct vmm_backend *b, vmm_handle_t h, uint64_t va)
{
	char c;
	int fd;

	t_assert_eq(b->ops->page_release(b, h), -EBADF);
	t_assert_eq(b->ops->map(b, va, h), -EBADF);
	t_assert_eq(b->ops->copy_to_host(b, &c, h, 0, 1), -EBADF);
	t_assert_eq(b->ops->copy_from_host(b, h, 0, "x", 1), -EBADF);
	t_assert_eq(b->ops->page_export(b, h, &fd), -EBADF);
	t_assert_eq(b->ops->page_fd(b, h, &fd), -EBADF);
}

int main(void)
{
	struct vmm_backend *d, *b;
	struct vmm_backend_usage u;
	vmm_handle_t src, h, h2, own, many[MANY];
	struct page_maps m;
	struct stat st;
	struct rlimit rl, low;
	volatile char *p0, *p1;
	uint64_t va, end, anchor;
	char buf[32];
	int fd, fds;

	d = vt_open_host(PAGE); /* creator: kvmmd's side */
	b = vt_open_host(PAGE); /* importer: a client's side */
	t_ok(d->ops->page_create(d, &src));
	t_ok(d->ops->copy_from_host(d, src, 0, "from creator", 13));
	t_ok(fstat((int)src, &st));
	t_ok(b->ops->reserve(b, 4 * PAGE, &va));
	end = va + 4 * PAGE;

	/* Import: one anchor, PROT_NONE, outside the reservation; no fd. */
	fds = vt_count_fds();
	t_ok(d->ops->page_export(d, src, &fd));
	t_ok(b->ops->page_import(b, fd, &h));
	t_ok(close(fd));
	t_assert_eq(vt_count_fds(), fds);
	m = page_maps(st.st_ino, va, end);
	t_assert_eq(m.n, 1);
	t_assert_eq(m.outside, 1);
	t_assert(!strcmp(m.anchor_perms, "---s"));
	anchor = m.anchor;
	t_assert_eq(vt_read_faults((char *)(uintptr_t)anchor), 1);
	t_assert_eq(b->ops->page_export(b, h, &fd), -EOPNOTSUPP);
	t_assert_eq(b->ops->page_fd(b, h, &fd), -EOPNOTSUPP);

	/* Mapped at two slots: no access before set_access, then one page. */
	p0 = (volatile char *)(uintptr_t)va;
	p1 = (volatile char *)(uintptr_t)(va + 2 * PAGE);
	t_ok(b->ops->map(b, va, h));
	t_ok(b->ops->map(b, va + 2 * PAGE, h));
	t_assert_eq(b->ops->map(b, va, h), -EBUSY);
	t_assert_eq(vt_read_faults(p0), 1);
	t_assert_eq(vt_read_faults(p1), 1);
	t_ok(b->ops->set_access(b, va, PAGE, VMM_PROT_RW));
	t_ok(b->ops->set_access(b, va + 2 * PAGE, PAGE, VMM_PROT_READ));
	t_assert_eq(vt_read_faults((char *)(uintptr_t)(va + PAGE)), 1);
	t_assert_eq(page_maps(st.st_ino, va, end).n, 3);
	t_assert(!strcmp((const char *)p1, "from creator"));
	strcpy((char *)p0 + 100, "through slot 0");
	t_assert(!strcmp((const char *)p1 + 100, "through slot 0"));
	p0[PAGE - 1] = 'z';
	t_assert_eq(p1[PAGE - 1], 'z');
	/* ...and the creator sees it in the same page. */
	t_ok(d->ops->copy_to_host(d, buf, src, 100, 15));
	t_assert(!strcmp(buf, "through slot 0"));

	/* Copies through the handle (the anchor), mapped or not. */
	t_ok(b->ops->copy_to_host(b, buf, h, 100, 15));
	t_assert(!strcmp(buf, "through slot 0"));
	t_ok(b->ops->copy_from_host(b, h, PAGE - 9, "by copy!", 9));
	t_assert(!strcmp((const char *)p1 + PAGE - 9, "by copy!"));
	t_assert_eq(b->ops->copy_to_host(b, buf, h, PAGE - 8, 16), -EINVAL);
	t_assert_eq(vt_read_faults((char *)(uintptr_t)anchor), 1);

	/* Unmap one: the other still reads; then both gone, anchor stays. */
	t_ok(b->ops->unmap(b, va));
	t_assert_eq(vt_read_faults(p0), 1);
	t_assert(!strcmp((const char *)p1 + 100, "through slot 0"));
	t_ok(b->ops->unmap(b, va + 2 * PAGE));
	t_assert_eq(b->ops->unmap(b, va + 2 * PAGE), -ENOENT);
	m = page_maps(st.st_ino, va, end);
	t_assert_eq(m.n, 1);
	t_assert_eq(m.anchor, anchor);
	t_ok(b->ops->copy_to_host(b, buf, h, PAGE - 9, 9));
	t_assert(!strcmp(buf, "by copy!"));

	/* Release: the anchor goes; the handle is stale. */
	t_ok(b->ops->page_release(b, h));
	t_assert_eq(page_maps(st.st_ino, va, end).n, 0);
	stale_everywhere(b, h, va);
	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, 0);
	t_assert_eq(u.mappings, 0);

	/* The next import may land where the last anchor was: a new handle,
	 * and the old one is still refused. */
	t_ok(d->ops->page_export(d, src, &fd));
	t_ok(b->ops->page_import(b, fd, &h2));
	t_ok(close(fd));
	m = page_maps(st.st_ino, va, end);
	t_assert_eq(m.n, 1);
	if (m.anchor == anchor)
		printf("second anchor at the first one's address %#llx\n",
		       (unsigned long long)anchor);
	t_assert(h2 != h);
	stale_everywhere(b, h, va);
	/* A mapping outlives the release of its handle. */
	t_ok(vmm_map_page(b, va + 3 * PAGE, h2, VMM_PROT_READ));
	t_ok(b->ops->page_release(b, h2));
	t_assert_eq(page_maps(st.st_ino, va, end).n, 1);
	t_assert(!strcmp((const char *)(uintptr_t)(va + 3 * PAGE) + 100,
			 "through slot 0"));
	stale_everywhere(b, h2, va);
	t_ok(b->ops->unmap(b, va + 3 * PAGE));
	t_assert_eq(page_maps(st.st_ino, va, end).n, 0);

	/* A created page and an imported one side by side in one backend. */
	t_ok(b->ops->page_create(b, &own));
	t_ok(d->ops->page_export(d, src, &fd));
	t_ok(b->ops->page_import(b, fd, &h));
	t_ok(close(fd));
	t_assert(own != h);
	t_ok(b->ops->page_fd(b, own, &fd));
	t_assert_eq((vmm_handle_t)fd, own);
	t_ok(b->ops->copy_from_host(b, own, 0, "own", 4));
	t_ok(vmm_map_page(b, va, own, VMM_PROT_READ));
	t_ok(vmm_map_page(b, va + PAGE, h, VMM_PROT_READ));
	t_assert(!strcmp((const char *)(uintptr_t)va, "own"));
	t_assert(!strcmp((const char *)(uintptr_t)(va + PAGE), "from creator"));
	t_ok(b->ops->unmap(b, va));
	t_ok(b->ops->unmap(b, va + PAGE));
	t_ok(b->ops->page_release(b, own));
	t_ok(b->ops->page_release(b, h));
	t_assert_eq(b->ops->page_release(b, own), -EBADF);

	/* Many imports under a soft limit of 64 fds: none kept. */
	t_ok(getrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
	low = rl;
	low.rlim_cur = 64;
	t_ok(setrlimit(RLIMIT_NOFILE, &low) ? -errno : 0);
	fds = vt_count_fds();
	t_assert(fds < 60);
	for (int i = 0; i < MANY; i++) {
		t_ok(d->ops->page_export(d, src, &fd));
		t_ok(b->ops->page_import(b, fd, &many[i]));
		t_ok(close(fd));
		for (int j = 0; j < i; j++)
			t_assert(many[j] != many[i]);
	}
	t_assert_eq(vt_count_fds(), fds);
	t_assert_eq(page_maps(st.st_ino, va, end).n, MANY);
	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, MANY);
	t_ok(b->ops->copy_to_host(b, buf, many[MANY - 1], 0, 13));
	t_assert(!strcmp(buf, "from creator"));
	for (int i = 0; i < MANY; i++)
		t_ok(b->ops->page_release(b, many[i]));
	t_ok(setrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
	t_assert_eq(page_maps(st.st_ino, va, end).n, 0);

	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, 0);
	t_assert_eq(u.mappings, 0);
	t_ok(b->ops->free_range(b, va, 4 * PAGE));
	t_ok(d->ops->page_release(d, src));
	vmm_backend_close(b);
	vmm_backend_close(d);
	printf("ok: imports keep no fd (%d fds before and after %d imports)\n",
	       fds, MANY);
	return 0;
}
