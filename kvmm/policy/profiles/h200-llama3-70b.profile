# 2 x H200 (tensor parallel 2) + Llama-3-70B: 80 layers, 64 query heads,
# 8 KV heads, head dim 128, bf16 = 320 KiB of KV per token (160 MiB per
# 512-token block).  Rates are for the pair: twice the FLOP rate and
# two host links; the NVMe is shared.
name = h200-llama3-70b
layers = 80
q_heads = 64
kv_heads = 8
head_dim = 128
dtype_bytes = 2
tokens_per_block = 512
linear_flops_per_token = 137.9e9  # 2 x 68.95e9 non-embedding parameters
peak_flops = 1978e12
efficiency = 0.55
gpu_bandwidth = 9.6e12
gpu_latency = 0
host_bandwidth = 110e9
host_latency = 10e-6
nvme_bandwidth = 7e9
nvme_latency = 100e-6
msa_alpha = 0.05
min_chunk_tokens = 2048
max_chunk_tokens = 16384
ewma_weight = 0.1
