# kernels/: CUDA kernels and their CPU reference implementations.
KERNELS_SRCS := $(wildcard kernels/*.c)
$(eval $(call archive_rule,$(BUILD)/libkernels.a,$(KERNELS_SRCS)))
ARCHIVES += $(BUILD)/libkernels.a
