# vmm/: virtual/physical memory backends (host memfd, cuda Driver API VMM),
# the physical page pool and the fault injector.  Linked by the daemon, the
# client library and the tests.
VMM_SRCS := $(wildcard vmm/*.c)
ifeq ($(HAVE_CUDA_H),1)
$(call objs,$(filter vmm/cuda%.c,$(VMM_SRCS))): CPPFLAGS += -I$(CUDA_HOME)/include
endif
$(eval $(call archive_rule,$(BUILD)/libvmm.a,$(VMM_SRCS)))
ARCHIVES += $(BUILD)/libvmm.a
