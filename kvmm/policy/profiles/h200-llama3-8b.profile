# H200 + Llama-3-8B, starting values for a calibrated profile: the
# daemon corrects bandwidths and the achieved FLOP rate online from
# measured transfers (pol_cost_observe_*); `kvmmctl calibrate` writes a
# measured copy of this file.  Differs from the -ref profile where
# practice differs from the datasheet: 8.03e9 parameters including the
# LM head, a lower achieved rate for short chunks, measured-style link
# rates.
name = h200-llama3-8b
layers = 32
q_heads = 32
kv_heads = 8
head_dim = 128
dtype_bytes = 2
tokens_per_block = 512
linear_flops_per_token = 16.06e9
peak_flops = 989e12
efficiency = 0.55
gpu_bandwidth = 4.0e12
gpu_latency = 5e-6
host_bandwidth = 50e9
host_latency = 15e-6
nvme_bandwidth = 6.5e9
nvme_latency = 120e-6
msa_alpha = 0.05
min_chunk_tokens = 2048
max_chunk_tokens = 16384
ewma_weight = 0.1
