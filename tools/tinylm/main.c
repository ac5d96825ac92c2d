/* SPDX-License-Identifier: MIT */
/*
 * tinylm command line: build or load a model, pick a KV cache (private
 * memory or kvmm), and run either one prompt or a slice of the generated
 * multi-turn workload.  Every generated token is printed with a checksum of
 * the logit vector it was sampled from, so two runs can be compared
 * bitwise with diff; the last line is one JSON object of counters.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "kvmm/lib/client.h"
#include "tinylm.h"

int tlm_kvmm_print_tier_stats(const char *socket_path, FILE *f);

static const char usage[] =
	"usage: tinylm [OPTIONS]\n"
	"A small Llama-style decoder (RMSNorm, RoPE, GQA, SwiGLU) whose KV cache\n"
	"lives in private memory (the reference) or in a kvmm region.  Prints one\n"
	"line per generated token:  tok CONV TURN INDEX TOKEN LOGIT-CHECKSUM\n"
	"then one JSON line of counters.\n"
	"\n"
	"Model (weights generated from --seed unless --checkpoint is given):\n"
	"  --seed N              weight seed (default 1)\n"
	"  --checkpoint FILE     load a llama2.c checkpoint (run.c format)\n"
	"  --save-checkpoint F   write the model as a llama2.c checkpoint and exit\n"
	"  --dim N               residual width (default 256)\n"
	"  --hidden N            MLP width (default 768)\n"
	"  --layers N            decoder layers (default 4)\n"
	"  --heads N             query heads (default 8; head dim = dim / heads)\n"
	"  --kv-heads N          key/value heads, must divide heads (default 2)\n"
	"  --vocab N             vocabulary size (default 2048)\n"
	"  --max-tokens N        max tokens per sequence (default: what the\n"
	"                        workload needs, at most the model's seq_len)\n"
	"  --shared-classifier   generated model reuses the embedding as its\n"
	"                        classifier (llama2.c's shared weights; default\n"
	"                        is a separate classifier matrix)\n"
	"\n"
	"Inference:\n"
	"  --chunk N             prefill chunk size in tokens (default 64); the\n"
	"                        output is bitwise the same for every N\n"
	"  --temperature T       0 = greedy (default); > 0 samples, seeded\n"
	"  --sample-seed N       sampling seed (default 1)\n"
	"  --kv private|kvmm     where the KV cache lives (default private)\n"
	"  --socket PATH         kvmmd socket for --kv kvmm\n"
	"                        (default $KVMM_SOCKET or /run/kvmm/kvmm.sock)\n"
	"  --max-seqs N          sequences in the KV region (default 4)\n"
	"  --prefix-segments     --kv kvmm: also reuse the cached blocks after\n"
	"                        a block the cache lost (the hole is recomputed\n"
	"                        at its positions; kvmmd ABI 1.6); with kvmmd\n"
	"                        ABI 1.8 the open returns before its reloads\n"
	"                        are done and holes are recomputed meanwhile\n"
	"  --no-prefix-early     with --prefix-segments: wait for every reload\n"
	"                        before recomputing (the baseline of the overlap)\n"
	"  --step-delay-ms N     sleep N ms after every forward pass, like a\n"
	"                        slower accelerator would (tests use it to land\n"
	"                        revocations mid-run; default 0)\n"
	"\n"
	"Workload (multi-turn conversations over shared system prompts):\n"
	"  --prompt \"IDS\"        run one prompt of token ids instead\n"
	"  --workload-seed N     (default 1)\n"
	"  --conversations N     (default 8)\n"
	"  --turns N             turns per conversation (default 3)\n"
	"  --system-prompts N    distinct system prompts (default 2)\n"
	"  --system-tokens N     system prompt length (default 192)\n"
	"  --user-tokens N       user message length per turn (default 24)\n"
	"  --gen-tokens N        tokens generated per turn (default 16)\n"
	"  --repeat-every N      every Nth turn is asked twice, the same prompt\n"
	"                        (a regenerate or a retry; default 0: none),\n"
	"                        sampled anew; the conversation goes on from\n"
	"                        the second answer\n"
	"  --client I --clients C  run conversations c with c mod C == I\n"
	"  --print-workload      print the prompts' token ids and exit\n"
	"\n"
	"Other:\n"
	"  --bench               measure prefill and decode tokens/s and exit\n"
	"  --kvmm-stats          print kvmmd's block-cache counters (shared,\n"
	"                        demoted, restored per tier) as JSON and exit\n"
	"  --quiet               only the final JSON line\n"
	"  --help                this text\n"
	"\n"
	"make demo (tools/demo.sh) runs several tinylm clients on kvmmd and on\n"
	"private memory and compares them; its knobs are environment variables:\n"
	"  DEMO_CLIENTS (3), DEMO_CONVERSATIONS (12), DEMO_TURNS (4),\n"
	"  DEMO_SYSTEM_TOKENS (256), DEMO_USER_TOKENS (32), DEMO_GEN_TOKENS (16),\n"
	"  DEMO_MODEL (tinylm model options), pressure: DEMO_GPU_MEM (4M),\n"
	"  DEMO_CACHE_GPU_BLOCKS (48), DEMO_HOST_MEM (1M), DEMO_NVME_SIZE (64M),\n"
	"  DEMO_PAGE_SIZE (4096), DEMO_POLICY (kvmmd --cache-policy, asym),\n"
	"  DEMO_REPEAT_EVERY (7: every 7th turn asked twice).\n"
	"See Documentation/tinylm.md.\n";

enum {
	OPT_SEED = 256,
	OPT_CHECKPOINT,
	OPT_SAVE,
	OPT_DIM,
	OPT_HIDDEN,
	OPT_LAYERS,
	OPT_HEADS,
	OPT_KV_HEADS,
	OPT_VOCAB,
	OPT_MAX_TOKENS,
	OPT_SHARED,
	OPT_CHUNK,
	OPT_TEMPERATURE,
	OPT_SAMPLE_SEED,
	OPT_KV,
	OPT_SOCKET,
	OPT_MAX_SEQS,
	OPT_STEP_DELAY,
	OPT_PREFIX_SEGMENTS,
	OPT_NO_PREFIX_EARLY,
	OPT_PROMPT,
	OPT_WSEED,
	OPT_CONVS,
	OPT_TURNS,
	OPT_SYSPROMPTS,
	OPT_SYSTOKENS,
	OPT_USERTOKENS,
	OPT_REPEAT_EVERY,
	OPT_GENTOKENS,
	OPT_CLIENT,
	OPT_CLIENTS,
	OPT_PRINT_WORKLOAD,
	OPT_BENCH,
	OPT_KVMM_STATS,
	OPT_QUIET,
	OPT_HELP,
};

static const struct option long_opts[] = {
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "checkpoint", required_argument, NULL, OPT_CHECKPOINT },
	{ "save-checkpoint", required_argument, NULL, OPT_SAVE },
	{ "dim", required_argument, NULL, OPT_DIM },
	{ "hidden", required_argument, NULL, OPT_HIDDEN },
	{ "layers", required_argument, NULL, OPT_LAYERS },
	{ "heads", required_argument, NULL, OPT_HEADS },
	{ "kv-heads", required_argument, NULL, OPT_KV_HEADS },
	{ "vocab", required_argument, NULL, OPT_VOCAB },
	{ "max-tokens", required_argument, NULL, OPT_MAX_TOKENS },
	{ "shared-classifier", no_argument, NULL, OPT_SHARED },
	{ "chunk", required_argument, NULL, OPT_CHUNK },
	{ "temperature", required_argument, NULL, OPT_TEMPERATURE },
	{ "sample-seed", required_argument, NULL, OPT_SAMPLE_SEED },
	{ "kv", required_argument, NULL, OPT_KV },
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "max-seqs", required_argument, NULL, OPT_MAX_SEQS },
	{ "step-delay-ms", required_argument, NULL, OPT_STEP_DELAY },
	{ "prefix-segments", no_argument, NULL, OPT_PREFIX_SEGMENTS },
	{ "no-prefix-early", no_argument, NULL, OPT_NO_PREFIX_EARLY },
	{ "prompt", required_argument, NULL, OPT_PROMPT },
	{ "workload-seed", required_argument, NULL, OPT_WSEED },
	{ "conversations", required_argument, NULL, OPT_CONVS },
	{ "turns", required_argument, NULL, OPT_TURNS },
	{ "system-prompts", required_argument, NULL, OPT_SYSPROMPTS },
	{ "system-tokens", required_argument, NULL, OPT_SYSTOKENS },
	{ "user-tokens", required_argument, NULL, OPT_USERTOKENS },
	{ "repeat-every", required_argument, NULL, OPT_REPEAT_EVERY },
	{ "gen-tokens", required_argument, NULL, OPT_GENTOKENS },
	{ "client", required_argument, NULL, OPT_CLIENT },
	{ "clients", required_argument, NULL, OPT_CLIENTS },
	{ "print-workload", no_argument, NULL, OPT_PRINT_WORKLOAD },
	{ "bench", no_argument, NULL, OPT_BENCH },
	{ "kvmm-stats", no_argument, NULL, OPT_KVMM_STATS },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

static const char *opt_name(int id)
{
	for (const struct option *o = long_opts; o->name; o++)
		if (o->val == id)
			return o->name;
	return "?";
}

static void die_usage(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "tinylm: ");
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, "\nTry 'tinylm --help'.\n");
	exit(2);
}

static long parse_long(int id, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < min || v > max) {
		char range[64];
		snprintf(range, sizeof(range), "%ld..%ld", min, max);
		fprintf(stderr,
			"tinylm: --%s: '%s' is not an integer in %s\n"
			"Try 'tinylm --help'.\n",
			opt_name(id), s, range);
		exit(2);
	}
	return v;
}

static uint64_t parse_u64(int id, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-')
		die_usage("--%s: '%s' is not an unsigned integer", opt_name(id),
			  s);
	return v;
}

static int parse_prompt(const char *s, int **out)
{
	int n = 0, cap = 16;
	int *v = malloc(cap * sizeof(int));

	if (!v)
		return -ENOMEM;
	while (*s) {
		char *end;
		while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		errno = 0;
		long t = strtol(s, &end, 10);
		if (end == s || errno || t < 0 || t > INT_MAX)
			die_usage("--prompt: '%s' is not a list of token ids",
				  s, NULL);
		if (n == cap) {
			int *nv = realloc(v, 2 * cap * sizeof(int));
			if (!nv) {
				free(v); /* not the prompt cut short */
				return -ENOMEM;
			}
			v = nv;
			cap *= 2;
		}
		v[n++] = (int)t;
		s = end;
	}
	*out = v;
	return n;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int run_bench(const struct tlm_model *m, int chunk)
{
	struct tlm_state *s;
	struct tlm_kv *kv;
	int n = m->cfg.seq_len < 256 ? m->cfg.seq_len : 256, ret;
	int *toks = malloc(n * sizeof(int));
	float *logits = malloc(m->cfg.vocab_size * sizeof(float));

	if (!toks || !logits) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (int i = 0; i < n; i++)
		toks[i] = 1 + i % (m->cfg.vocab_size - 1);
	ret = tlm_state_create(m, chunk, &s);
	if (ret)
		goto out_free;
	ret = tlm_kv_private_create(m, 1, n, &kv);
	if (ret)
		goto out_state;
	double t0 = now_s();
	tlm_forward(m, s, kv, 0, toks, 0, n, logits, false);
	double t1 = now_s();
	for (int i = 0; i < n; i++)
		tlm_forward(m, s, kv, 0, toks + i, i, 1, logits, false);
	double t2 = now_s();
	double pre = n / (t1 - t0), dec = n / (t2 - t1);
	printf("prefill %d tokens in chunks of %d: %.0f tokens/s\n", n, chunk,
	       pre);
	printf("decode  %d tokens one by one:    %.0f tokens/s "
	       "(prefill/decode ratio %.2f)\n",
	       n, dec, pre / dec);
	printf("{\"dim\":%d,\"layers\":%d,\"heads\":%d,\"kv_heads\":%d,"
	       "\"vocab\":%d,\"params\":%zu,\"prefill_tokens_per_s\":%.1f,"
	       "\"decode_tokens_per_s\":%.1f,\"ratio\":%.3f}\n",
	       m->cfg.dim, m->cfg.n_layers, m->cfg.n_heads, m->cfg.n_kv_heads,
	       m->cfg.vocab_size, m->data_floats, pre, dec, pre / dec);
	kv->ops->destroy(kv);
out_state:
	tlm_state_destroy(s);
out_free:
	free(toks);
	free(logits);
	return ret;
}

int main(int argc, char **argv)
{
	struct tlm_config cfg;
	struct tlm_workload_params wl;
	struct tlm_engine_opts eo = { .size = sizeof(eo) };
	const char *checkpoint = NULL, *save = NULL, *prompt = NULL;
	const char *kv_kind = "private", *socket_path = NULL;
	uint64_t seed = 1;
	bool shared = false, print_workload = false, bench = false;
	bool kvmm_stats = false, no_early = false;
	int max_tokens = 0, chunk = 64, max_seqs = 4, client = 0, clients = 1;
	char err[256];
	int c, ret;

	/* Line-buffered even into a file: the demo shows progress live. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	tlm_config_default(&cfg);
	tlm_workload_default(&wl);
	eo.temperature = 0.0f;
	eo.sample_seed = 1;
	eo.out = stdout;

	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_SEED:
			seed = parse_u64(c, optarg);
			break;
		case OPT_CHECKPOINT:
			checkpoint = optarg;
			break;
		case OPT_SAVE:
			save = optarg;
			break;
		case OPT_DIM:
			cfg.dim = parse_long(c, optarg, 2, 8192);
			break;
		case OPT_HIDDEN:
			cfg.hidden_dim = parse_long(c, optarg, 1, 32768);
			break;
		case OPT_LAYERS:
			cfg.n_layers = parse_long(c, optarg, 1, 256);
			break;
		case OPT_HEADS:
			cfg.n_heads = parse_long(c, optarg, 1, 1024);
			break;
		case OPT_KV_HEADS:
			cfg.n_kv_heads = parse_long(c, optarg, 1, 1024);
			break;
		case OPT_VOCAB:
			cfg.vocab_size = parse_long(c, optarg, 2, 1 << 20);
			break;
		case OPT_MAX_TOKENS:
			max_tokens = parse_long(c, optarg, 1, 1 << 20);
			break;
		case OPT_SHARED:
			shared = true;
			break;
		case OPT_CHUNK:
			chunk = parse_long(c, optarg, 1, 4096);
			break;
		case OPT_TEMPERATURE: {
			char *end;
			eo.temperature = strtof(optarg, &end);
			/* written so that nan is out of range too (every
			 * comparison with it is false: "< 0 || > 100" took it) */
			if (end == optarg || *end ||
			    !(eo.temperature >= 0 && eo.temperature <= 100))
				die_usage("--temperature: '%s' is not a number "
					  "in 0..100%s",
					  optarg, "");
			break;
		}
		case OPT_SAMPLE_SEED:
			eo.sample_seed = parse_u64(c, optarg);
			break;
		case OPT_KV:
			if (strcmp(optarg, "private") && strcmp(optarg, "kvmm"))
				die_usage("--kv: '%s' is not one of: private, "
					  "kvmm%s",
					  optarg, "");
			kv_kind = optarg;
			break;
		case OPT_SOCKET:
			socket_path = optarg;
			break;
		case OPT_MAX_SEQS:
			max_seqs = parse_long(c, optarg, 1, 4096);
			break;
		case OPT_PREFIX_SEGMENTS:
			eo.prefix_segments = true;
			break;
		case OPT_NO_PREFIX_EARLY:
			no_early = true;
			break;
		case OPT_STEP_DELAY:
			eo.step_delay_us =
				parse_long(c, optarg, 0, 10000) * 1000;
			break;
		case OPT_PROMPT:
			prompt = optarg;
			break;
		case OPT_WSEED:
			wl.seed = parse_u64(c, optarg);
			break;
		case OPT_CONVS:
			wl.conversations = parse_long(c, optarg, 1, 1 << 20);
			break;
		case OPT_TURNS:
			wl.turns = parse_long(c, optarg, 1, 1024);
			break;
		case OPT_SYSPROMPTS:
			wl.system_prompts = parse_long(c, optarg, 1, 1 << 20);
			break;
		case OPT_SYSTOKENS:
			wl.system_tokens = parse_long(c, optarg, 0, 1 << 20);
			break;
		case OPT_USERTOKENS:
			wl.user_tokens = parse_long(c, optarg, 1, 1 << 20);
			break;
		case OPT_REPEAT_EVERY:
			wl.repeat_every = parse_long(c, optarg, 0, 1 << 20);
			break;
		case OPT_GENTOKENS:
			wl.gen_tokens = parse_long(c, optarg, 1, 1 << 20);
			break;
		case OPT_CLIENT:
			client = parse_long(c, optarg, 0, 1 << 20);
			break;
		case OPT_CLIENTS:
			clients = parse_long(c, optarg, 1, 1 << 20);
			break;
		case OPT_PRINT_WORKLOAD:
			print_workload = true;
			break;
		case OPT_BENCH:
			bench = true;
			break;
		case OPT_KVMM_STATS:
			kvmm_stats = true;
			break;
		case OPT_QUIET:
			eo.quiet = true;
			break;
		case OPT_HELP:
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'tinylm --help'.\n");
			return 2;
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind], NULL);
	if (client >= clients)
		die_usage("--client must be below --clients%s%s", "", "");
	if (eo.prefix_segments && strcmp(kv_kind, "kvmm"))
		die_usage("--prefix-segments needs --kv kvmm%s%s", "", "");
	if (no_early && !eo.prefix_segments)
		die_usage("--no-prefix-early needs --prefix-segments%s%s", "",
			  "");
	eo.prefix_early = eo.prefix_segments && !no_early;

	if (kvmm_stats) {
		ret = tlm_kvmm_print_tier_stats(socket_path, stdout);
		if (ret) {
			fprintf(stderr, "tinylm: --kvmm-stats: %s: %s\n",
				socket_path ? socket_path : kc_default_socket(),
				strerror(-ret));
			return 1;
		}
		return 0;
	}

	struct tlm_model model;
	if (checkpoint) {
		ret = tlm_model_load(&model, checkpoint, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "tinylm: --checkpoint: %s\n", err);
			return 1;
		}
	} else {
		if (tlm_config_check(&cfg, err, sizeof(err)))
			die_usage("bad model shape: %s%s", err, "");
		ret = tlm_model_generate(&model, &cfg, shared, seed);
		if (ret) {
			fprintf(stderr, "tinylm: generating weights: %s\n",
				strerror(-ret));
			return 1;
		}
	}
	if (save) {
		ret = tlm_model_save(&model, save);
		if (ret) {
			fprintf(stderr, "tinylm: --save-checkpoint %s: %s\n",
				save, strerror(-ret));
			tlm_model_free(&model);
			return 1;
		}
		tlm_model_free(&model);
		return 0;
	}
	int status = 0, *prompt_ids = NULL, prompt_len = 0;
	if (bench) {
		status = run_bench(&model, chunk) ? 1 : 0;
		goto out_model;
	}

	wl.vocab = model.cfg.vocab_size;
	if (prompt) {
		prompt_len = parse_prompt(prompt, &prompt_ids);
		if (prompt_len < 0) {
			fprintf(stderr, "tinylm: --prompt: %s\n",
				strerror(-prompt_len));
			status = 1;
			goto out_model;
		}
		if (!prompt_len)
			die_usage("--prompt: no token ids in '%s'%s", prompt,
				  "");
		for (int i = 0; i < prompt_len; i++)
			if (prompt_ids[i] >= model.cfg.vocab_size)
				die_usage("--prompt: token id out of the "
					  "vocabulary in '%s'%s",
					  prompt, "");
	}
	int need = prompt ? prompt_len + wl.gen_tokens :
			    tlm_workload_max_tokens(&wl);
	if (!max_tokens)
		max_tokens = need;
	if (max_tokens > model.cfg.seq_len || need > max_tokens) {
		fprintf(stderr,
			"tinylm: the workload needs %d tokens per sequence; "
			"--max-tokens is %d and the model's seq_len is %d\n"
			"Try 'tinylm --help'.\n",
			need, max_tokens, model.cfg.seq_len);
		status = 2;
		goto out_model;
	}
	if (print_workload) {
		tlm_workload_print(&wl, stdout);
		goto out_model;
	}

	struct tlm_engine *eng;
	eo.model = &model;
	eo.chunk = chunk;
	eo.max_seqs = max_seqs;
	eo.max_tokens = max_tokens;
	eo.kv_kind = kv_kind;
	eo.socket_path = socket_path;
	ret = tlm_engine_create(&eo, &eng, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "tinylm: %s\n", err);
		status = 1;
		goto out_model;
	}
	double t0 = now_s();
	if (prompt)
		ret = tlm_engine_run_prompt(eng, prompt_ids, prompt_len,
					    wl.gen_tokens);
	else
		ret = tlm_engine_run_workload(eng, &wl, client, clients);
	double wall = now_s() - t0;
	if (ret) {
		fprintf(stderr, "tinylm: %s\n", tlm_engine_error(eng));
		status = 1;
	} else {
		tlm_engine_print_stats(eng, wall, stdout);
	}
	tlm_engine_destroy(eng);
out_model:
	tlm_model_free(&model);
	free(prompt_ids);
	return status;
}
