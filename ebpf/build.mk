# ebpf/: BPF programs (*.bpf.c), their skeletons and the loader.
EBPF_SRCS := $(wildcard ebpf/*.c)
EBPF_SRCS := $(filter-out %.bpf.c,$(EBPF_SRCS))
$(eval $(call archive_rule,$(BUILD)/libkvmmebpf.a,$(EBPF_SRCS)))
ARCHIVES += $(BUILD)/libkvmmebpf.a
