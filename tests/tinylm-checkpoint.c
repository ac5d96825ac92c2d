/* SPDX-License-Identifier: MIT */
/*
 * tinylm reads and writes llama2.c checkpoints (run.c format): a small
 * model saved to a file loads back with the same config and weight bits,
 * with a shared classifier (positive vocab_size) and an unshared one
 * (negative vocab_size, after the skipped freq_cis tables), and runs to
 * the same logits.  Truncated files and nonsense headers are refused with
 * an error, not loaded.
 */
#include <unistd.h>

#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "tools/tinylm/kv-private.c"
#include "tools/tinylm/model.c"

static uint64_t run_sum(const struct tlm_model *m)
{
	struct tlm_state *s;
	struct tlm_kv *kv;
	int toks[10] = { 1, 5, 9, 2, 7, 3, 3, 8, 1, 4 };
	float *lg = malloc(m->cfg.vocab_size * sizeof(float));

	t_ok(tlm_state_create(m, 4, &s));
	t_ok(tlm_kv_private_create(m, 1, 10, &kv));
	t_ok(tlm_forward(m, s, kv, 0, toks, 0, 10, lg, false));
	uint64_t sum = tlm_checksum(lg, m->cfg.vocab_size);
	kv->ops->destroy(kv);
	tlm_state_destroy(s);
	free(lg);
	return sum;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	t_assert(f);
	t_assert_eq(fwrite(p, 1, n, f), n);
	t_assert_eq(fclose(f), 0);
}

int main(void)
{
	char dir[64], path[96], err[256];
	struct tlm_config cfg = { .dim = 32,
				  .hidden_dim = 80,
				  .n_layers = 2,
				  .n_heads = 4,
				  .n_kv_heads = 2,
				  .vocab_size = 50,
				  .seq_len = 16 };

	td_tmp_path("tinylm-ckpt-XXXXXX", dir, sizeof(dir));
	t_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/model.bin", dir);

	for (int shared = 0; shared < 2; shared++) {
		struct tlm_model a, b;
		t_ok(tlm_model_generate(&a, &cfg, shared, 3));
		t_ok(tlm_model_save(&a, path));

		/* The file is exactly llama2.c's layout. */
		FILE *f = fopen(path, "rb");
		int32_t hdr[7];
		t_assert(f);
		t_assert_eq(fread(hdr, sizeof(int32_t), 7, f), 7);
		fseek(f, 0, SEEK_END);
		long size = ftell(f);
		fclose(f);
		t_assert_eq(hdr[0], 32);
		t_assert_eq(hdr[5], shared ? 50 : -50);
		t_assert_eq(hdr[6], 16);
		size_t freq = 16 * 8;
		t_assert_eq(size, 28 + (a.data_floats + freq) * 4);

		t_ok(tlm_model_load(&b, path, err, sizeof(err)));
		t_assert(!memcmp(&a.cfg, &b.cfg, sizeof(cfg)));
		t_assert_eq(b.shared_classifier, shared);
		t_assert_eq(a.data_floats, b.data_floats);
		t_assert(!memcmp(a.data, b.data, a.data_floats * 4));
		t_assert(b.w.wcls == (shared ? b.w.token_embedding : b.w.wcls));
		t_assert_eq(run_sum(&a), run_sum(&b));
		tlm_model_free(&b);

		/* Truncated: refused with the sizes in the message. */
		t_assert_eq(truncate(path, shared ? size / 2 : size - 4), 0);
		t_assert_eq(tlm_model_load(&b, path, err, sizeof(err)),
			    -EINVAL);
		t_assert(strstr(err, "bytes"));
		tlm_model_free(&a);
	}

	/* Nonsense header: heads that do not divide dim. */
	int32_t bad[7] = { 30, 64, 1, 4, 2, 10, 8 };
	struct tlm_model c;
	write_file(path, bad, sizeof(bad));
	t_assert_eq(tlm_model_load(&c, path, err, sizeof(err)), -EINVAL);
	t_assert(strstr(err, "heads"));
	/* Too short for a header, and missing. */
	write_file(path, bad, 5);
	t_assert_eq(tlm_model_load(&c, path, err, sizeof(err)), -EINVAL);
	unlink(path);
	t_assert_eq(tlm_model_load(&c, path, err, sizeof(err)), -ENOENT);
	rmdir(dir);
	printf("ok\n");
	return 0;
}
