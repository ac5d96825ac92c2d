/* SPDX-License-Identifier: MIT */
/*
 * The client processes of the tests of page fds in replies
 * (daemon-client-nofile, daemon-reply-fds-*): what such a process holds
 * (its open fds, its kvmm page VMAs) and a lower soft RLIMIT_NOFILE; the
 * bytes it writes into and reads back from the pages of a 2-layer region
 * on 4 KiB host pages (4 pages per block: K and V of each layer); a
 * publisher of a prefix; and the run of these processes, each a child of
 * the test, against a real kvmmd.
 */
#ifndef KVMM_TESTS_CLIENT_FDS_H
#define KVMM_TESTS_CLIENT_FDS_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/client_seq.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define CF_PAGE 4096
#define CF_PPB 4 /* 2 layers x K,V */
#define CF_TPB 32 /* tokens per block */

/*
 * The region these helpers assume: 2 layers of one KV head of 64 dims in
 * 2-byte elements, so a block of 4 KiB pages holds CF_TPB tokens; room
 * for 4 sequences of `blocks` blocks.
 */
#define CF_REGION(blocks, region_salt)                                \
	{                                                             \
		.size = sizeof(struct kvmm_region_opts), .layers = 2, \
		.kv_heads = 1, .head_dim = 64, .dtype_bytes = 2,      \
		.max_seqs = 4, .max_tokens = CF_TPB * (blocks),       \
		.salt = (region_salt)                                 \
	}

/* A connection without map-ahead: it maps only the pages asked for. */
#define CF_CONNECT(conn_name)                                                  \
	{                                                                      \
		.size = sizeof(struct kvmm_connect_opts), .name = (conn_name), \
		.map_ahead_set = 1, .map_ahead_blocks = 0                      \
	}

/* The fds this process holds (not counting the one that lists them). */
static inline int cf_count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	t_assert(dir != NULL);
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n - 1; /* the DIR's own */
}

/* Mappings in /proc/self/maps, and (*pages) how many are kvmm pages:
 * one anchor per imported page, one per mapping. */
static inline int cf_count_maps(int *pages)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	t_assert(f != NULL);
	*pages = 0;
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, "memfd:kvmm-page"))
			(*pages)++;
	}
	fclose(f);
	return n;
}

/* kvmm page VMAs alone. */
static inline int cf_page_vmas(void)
{
	int pages;

	cf_count_maps(&pages);
	return pages;
}

/* Lower this process's soft RLIMIT_NOFILE to soft; *old gets the limits
 * it had. */
static inline void cf_set_nofile(rlim_t soft, struct rlimit *old)
{
	struct rlimit rl;

	t_ok(getrlimit(RLIMIT_NOFILE, old) ? -errno : 0);
	rl = *old;
	rl.rlim_cur = soft;
	t_ok(setrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0);
}

/* Page i (K of layer i / 2 if i is even, else V) of block b of s. */
static inline uint8_t *cf_page(struct kvmm_region *r, uint32_t s, uint32_t i,
			       uint32_t b)
{
	uint64_t base = (i & 1) ? kvmm_seq_v_ptr(r, s, i / 2) :
				  kvmm_seq_k_ptr(r, s, i / 2);

	return (uint8_t *)(uintptr_t)(base + (uint64_t)b * CF_PAGE);
}

/* The byte `who` writes into page i of block b. */
static inline uint8_t cf_val(uint32_t who, uint32_t i, uint32_t b)
{
	return (uint8_t)(who * 101 + i * 37 + b * 7 + 1);
}

/* Fill blocks from..to-1 of s with who's bytes. */
static inline void cf_fill(struct kvmm_region *r, uint32_t s, uint32_t from,
			   uint32_t to, uint32_t who)
{
	for (uint32_t b = from; b < to; b++)
		for (uint32_t i = 0; i < CF_PPB; i++)
			memset(cf_page(r, s, i, b), cf_val(who, i, b), CF_PAGE);
}

/* Blocks from..to-1 of s hold who's bytes (every 61st and the last). */
static inline void cf_check(struct kvmm_region *r, uint32_t s, uint32_t from,
			    uint32_t to, uint32_t who)
{
	for (uint32_t b = from; b < to; b++)
		for (uint32_t i = 0; i < CF_PPB; i++) {
			const uint8_t *p = cf_page(r, s, i, b);

			for (int o = 0; o < CF_PAGE; o += 61)
				t_assert_eq(p[o], cf_val(who, i, b));
			t_assert_eq(p[CF_PAGE - 1], cf_val(who, i, b));
		}
}

/* The hashes of an n-block prefix: hash0, hash0 + 1, ... */
static inline void cf_hashes(uint64_t *h, uint32_t n, uint64_t hash0)
{
	for (uint32_t i = 0; i < n; i++)
		h[i] = hash0 + i;
}

#define CF_MAX_PREFIX 256

/*
 * Over a connection of its own (co), fill n blocks (at most
 * CF_MAX_PREFIX) of a fresh sequence of region ro with who's bytes,
 * publish them under cf_hashes(hash0), and close it all again: the
 * daemon's cache keeps the blocks.
 */
static inline void cf_publish(const struct kvmm_connect_opts *co,
			      const struct kvmm_region_opts *ro, uint64_t hash0,
			      uint32_t n, uint32_t who)
{
	uint64_t hashes[CF_MAX_PREFIX];
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;

	t_assert(n <= CF_MAX_PREFIX);
	cf_hashes(hashes, n, hash0);
	cs_open(co, ro, &c, &r, &s);
	t_ok(kvmm_seq_extend(r, s, n * kvmm_region_tokens_per_block(r)));
	cf_fill(r, s, 0, n, who);
	t_assert_eq(kvmm_block_publish(r, s, 0, n, 0, hashes), n);
	t_ok(kvmm_seq_close(r, s));
	t_ok(kvmm_region_destroy(r));
	kvmm_disconnect(c);
}

/* Run fn in a child process; fail (with d's log) unless it returns 0. */
static inline void cf_run(const struct td_daemon *d, int (*fn)(void),
			  const char *what)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		exit(fn());
	t_assert_eq(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		td_dump_log(d);
		t_fail("%s failed (status %#x)", what, status);
	}
}

/*
 * Start kvmmd into d with args, run publisher (if not NULL) and then
 * client against it, each in a child process, check that nothing is
 * mapped and no sequence open once they are gone (the cache keeps owning
 * what was published, so pages stay allocated), and stop d cleanly.
 */
static inline void cf_run_daemon(struct td_daemon *d, const char *const *args,
				 int (*publisher)(void), int (*client)(void))
{
	struct kvmm_status_reply st;
	int err;

	err = td_start(d, args);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	if (publisher)
		cf_run(d, publisher, "publisher");
	cf_run(d, client, "client");
	for (int i = 0; i < 500; i++) {
		t_ok(td_status(d, &st));
		if (!st.pages_mapped && !st.sequences && st.sessions == 1)
			break;
		usleep(10000);
	}
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.sequences, 0);
	t_assert_eq(td_stop(d), 0);
}

#endif
