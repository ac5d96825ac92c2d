// SPDX-License-Identifier: MIT
/*
 * libkvmm: the pages a reply brings, imported as their fds arrive.
 *
 * A SEQ_EXTEND or PREFIX_OPEN reply lists page ids; those without
 * KVMM_PAGE_HELD come with one fd each, in the order of the ids, spread
 * over the reply message and its KVMM_CMD_FDS continuations (at most
 * KVMM_MSG_MAX_FDS each).  kc_import is the fd sink of such a request:
 * it imports each message's fds into c->pages[] and closes them before
 * the next message is received, so however many pages a reply brings
 * (up to KVMM_EXTEND_MAX_PAGES), the process holds one message's fds at
 * most, and an imported page holds none.  A page imported here is
 * *staged* until kc_map_blocks() maps it; kc_import_end() releases every
 * staged page of the reply left unmapped, so a reply that fails at any
 * point (a bad fd, a short or malformed reply, an import or map error)
 * leaves no page imported and no fd open.
 */
#include <errno.h>
#include <unistd.h>

#include "kvmm/lib/client.h"

/* The body is the caller's to check; then count the pages it brings. */
static int import_body(struct kc_fd_sink *s, const void *body, size_t len)
{
	struct kc_import *im = (struct kc_import *)s;
	int err = im->check(im, body, len);

	if (err)
		return err;
	im->body_ok = true; /* what the reply did (opened) is known */
	im->nr_new = 0;
	for (uint32_t k = 0; k < im->nr_ids; k++)
		if (!(im->ids[k] & KVMM_PAGE_HELD))
			im->nr_new++;
	return im->nr_new == im->nr_fds ? 0 : -EPROTO;
}

/* Import one message's fds into the next new ids (lock taken per batch:
 * the page table is c->lock's). */
static int import_fds(struct kc_fd_sink *s, int *fds, unsigned int n)
{
	struct kc_import *im = (struct kc_import *)s;
	struct kvmm_conn *c = im->c;
	struct vmm_backend *b = c->backend;
	unsigned int i;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < n; i++) {
		struct kc_page *p;
		uint32_t id;

		while (im->next < im->nr_ids &&
		       (im->ids[im->next] & KVMM_PAGE_HELD))
			im->next++;
		if (im->next >= im->nr_ids) {
			err = -EPROTO; /* more fds than new pages */
			break;
		}
		id = im->ids[im->next];
		if (id >= c->nr_pages) {
			err = -EPROTO;
			break;
		}
		p = &c->pages[id];
		/* a page we hold comes with KVMM_PAGE_HELD, and each new
		 * page once */
		if (p->refs || p->staged) {
			err = -EPROTO;
			break;
		}
		err = b->ops->page_import(b, fds[i], &p->handle);
		if (err)
			break;
		close(fds[i]);
		fds[i] = -1;
		p->staged = true;
		im->next++;
		im->imported++;
		c->st.pages_imported++;
	}
	pthread_mutex_unlock(&c->lock);
	kw_close_fds(fds + i, n - i);
	return err;
}

void kc_import_init(struct kc_import *im, struct kvmm_conn *c,
		    int (*check)(struct kc_import *im, const void *body,
				 size_t len),
		    void *arg)
{
	*im = (struct kc_import){ .sink.body = import_body,
				  .sink.fds = import_fds,
				  .c = c,
				  .check = check,
				  .arg = arg };
}

int kc_import_request(struct kc_import *im, uint16_t cmd, const void *req,
		      size_t req_len, void *reply, size_t reply_cap,
		      size_t *reply_len)
{
	int err = kc_request_sink(im->c, cmd, req, req_len, reply, reply_cap,
				  reply_len, &im->sink);

	if (!err && !im->body_ok)
		err = -EPROTO;
	if (!err && im->imported != im->nr_new)
		err = -EPROTO; /* fewer fds than the body announced */
	return err;
}

/*
 * The request was answered "pending" (ABI 1.16, 1.17: the daemon parked
 * it, or a restore runs): sleep on the ring's notify word without the
 * socket, so the connection's other threads go on, then ask for the
 * reply with cmd (PREFIX_COLLECT, SEQ_COLLECT) naming ref, until it is
 * there.  Its pages are imported as the request's would have been.
 * sock_lock held on entry and on return; seen: the notify word as read
 * before the request was sent.
 */
int kc_import_collect(struct kc_import *im, uint16_t cmd,
		      const struct kvmm_region_ref *ref, uint32_t seen,
		      void *reply, size_t reply_cap, size_t *reply_len)
{
	struct kvmm_conn *c = im->c;
	int err;

	do {
		/* from here on what the reply says is this request's */
		kc_import_init(im, c, im->check, im->arg);
		pthread_mutex_unlock(&c->sock_lock);
		err = kc_notify_wait(c, seen);
		pthread_mutex_lock(&c->sock_lock);
		if (err)
			break;
		seen = kc_notify_seen(c); /* before the daemon looks */
		err = kc_import_request(im, cmd, ref, sizeof(*ref), reply,
					reply_cap, reply_len);
	} while (err == -EAGAIN && !im->body_ok);
	return err;
}

void kc_import_end(struct kc_import *im)
{
	struct kvmm_conn *c = im->c;
	uint32_t seen = 0;

	/* The first `imported` new ids are the pages staged, in order. */
	for (uint32_t k = 0; k < im->nr_ids && seen < im->imported; k++) {
		struct kc_page *p;

		if (im->ids[k] & KVMM_PAGE_HELD)
			continue;
		seen++;
		p = &c->pages[im->ids[k]];
		if (p->staged) {
			c->backend->ops->page_release(c->backend, p->handle);
			p->staged = false;
		}
	}
	im->imported = 0;
}
