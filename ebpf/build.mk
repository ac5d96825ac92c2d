# ebpf/: BPF programs (*.bpf.c), their skeletons and the loader.
#
# With HAVE_BPF=1 each ebpf/NAME.bpf.c is compiled by clang -target bpf
# (with BTF, -g) into $(BUILD)/ebpf/NAME.bpf.o and turned into a skeleton
# $(BUILD)/ebpf/NAME.skel.h by bpftool; the loader objects depend on the
# skeletons explicitly so a parallel make orders them.  With HAVE_BPF=0 the
# loader compiles without them and reports BPF as unavailable.
EBPF_SRCS := $(wildcard ebpf/*.c)
EBPF_SRCS := $(filter-out %.bpf.c,$(EBPF_SRCS))
$(eval $(call archive_rule,$(BUILD)/libkvmmebpf.a,$(EBPF_SRCS)))
ARCHIVES += $(BUILD)/libkvmmebpf.a

ifeq ($(HAVE_BPF),1)
BPF_PROGS := $(wildcard ebpf/*.bpf.c)
BPF_OBJS := $(patsubst ebpf/%.bpf.c,$(BUILD)/ebpf/%.bpf.o,$(BPF_PROGS))
BPF_SKELS := $(patsubst ebpf/%.bpf.c,$(BUILD)/ebpf/%.skel.h,$(BPF_PROGS))
BPF_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' \
	-e 's/ppc64le/powerpc/' -e 's/s390x/s390/' -e 's/riscv64/riscv/')
# <asm/types.h> lives in the multiarch directory, which -target bpf does
# not search by itself.
BPF_MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -I. \
	-I$(BUILD)/ebpf $(if $(BPF_MULTIARCH),-idirafter /usr/include/$(BPF_MULTIARCH))

$(BUILD)/ebpf/%.bpf.o: ebpf/%.bpf.c $(BUILD)/config.h
	@mkdir -p $(@D)
	$(call msg,BPF,$<)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -MF $@.d -c $< -o $@

$(BUILD)/ebpf/%.skel.h: $(BUILD)/ebpf/%.bpf.o
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf >$@.tmp
	$(Q)mv $@.tmp $@

$(call objs,$(EBPF_SRCS)): $(BPF_SKELS)
# Keep the objects: bpftool and the docs' recipes use them.
.SECONDARY: $(BPF_OBJS)
-include $(wildcard $(BUILD)/ebpf/*.d)
endif
