# measured by kvmm-calibrate on NVIDIA H200 (132 SMs) at 2026-12-04T16:57:56Z
# model lines from kvmm/policy/profiles/h200-llama3-8b.profile; NVMe and efficiency not measured
name = h200-llama3-8b-measured
layers = 32
q_heads = 32
kv_heads = 8
head_dim = 128
dtype_bytes = 2
tokens_per_block = 512
linear_flops_per_token = 16.06e9
peak_flops = 989e12
efficiency = 0.55
nvme_bandwidth = 6.5e9
nvme_latency = 120e-6
min_chunk_tokens = 2048
max_chunk_tokens = 16384
ewma_weight = 0.1
gpu_bandwidth = 2.164e+12
gpu_latency = 4.059e-06
host_bandwidth = 5.531e+10
host_latency = 2.739e-06
msa_alpha = 0
# device-to-host: bandwidth 5.528e+10 B/s, latency 1.64e-06 s
# copies: bytes d2d_us h2d_us d2h_us
#   4096 4.06 2.81 1.71
#   65536 4.79 4.03 2.87
#   2097152 5.72 40.70 39.86
#   33554432 18.64 608.94 607.69
#   268435456 128.13 4856.42 4857.24
# msa decode per layer: batch ctx us
#   1 1024 22.15
#   1 4096 28.28
#   1 16384 63.82
#   1 32768 87.56
#   8 1024 26.54
#   8 4096 63.34
#   8 16384 286.24
#   8 32768 517.66
#   32 1024 75.85
#   32 4096 241.28
#   32 16384 825.97
#   32 32768 1618.79
# msa decode, batch 8 x 16384: segments us ratio
#   1 285.49 1.0000
#   2 282.91 0.9910
#   4 281.23 0.9851
#   8 280.58 0.9828
#   16 280.13 0.9812
# msa prefill per layer: chunk ctx us
#   512 4096 2690.43
#   512 16384 10366.20
#   512 32768 20579.55
#   2048 4096 8260.85
#   2048 16384 38939.26
#   2048 32768 79824.08
