# Reference profile: H200 + Llama-3-8B, the parameters of issue #8 so
# replay figures are comparable everywhere.  Do not tune; copy instead.
name = h200-llama3-8b-ref
layers = 32
q_heads = 32
kv_heads = 8
head_dim = 128
dtype_bytes = 2                 # bf16: 128 KiB of KV per token
tokens_per_block = 512          # 64 MiB per block
linear_flops_per_token = 13.96e9  # 2 x 6.98e9 non-embedding parameters
peak_flops = 989e12             # H200 dense bf16
efficiency = 0.6
gpu_bandwidth = 4.8e12          # HBM, device-to-device
gpu_latency = 0
host_bandwidth = 55e9           # PCIe 5 x16, pinned host memory
host_latency = 10e-6
nvme_bandwidth = 7e9            # one Gen4 NVMe, O_DIRECT
nvme_latency = 100e-6
msa_alpha = 0.05                # +5% attention time per extra segment
min_chunk_tokens = 2048
max_chunk_tokens = 16384
ewma_weight = 0.1
