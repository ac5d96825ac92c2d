# kernels/: CUDA kernels and their CPU reference implementations.
#
# kernels/*.c (CPU references, planning, conversions, test cases) go into
# libkernels.a, which every program links.  kernels/*.cu (the CUDA
# kernels) go into libkernels_cuda.a only when nvcc is present; it is NOT
# in ARCHIVES, so the rest of the tree links without libcudart.  The GPU
# test/bench programs (kernels/gpu/*.c -> build/kernels/NAME) and the
# calibration tool (tools/kvmm-calibrate -> build/kvmm-calibrate) link it
# and libcudart explicitly.
KERNELS_SRCS := $(wildcard kernels/*.c)
$(eval $(call archive_rule,$(BUILD)/libkernels.a,$(KERNELS_SRCS)))
ARCHIVES += $(BUILD)/libkernels.a

ifeq ($(HAVE_NVCC),1)
# sm_90 machine code plus compute_80 PTX that the driver JITs elsewhere.
NVCC_GENCODE ?= -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_80,code=compute_80
NVCCFLAGS := -std=c++17 -O3 -g $(NVCC_GENCODE) -I. -Ikvmm/include \
	-Xcompiler -Wall,-Wextra,-fPIC -Werror all-warnings $(EXTRA_NVCCFLAGS)
KERNELS_CU := $(wildcard kernels/*.cu)
KERNELS_CU_OBJS := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(KERNELS_CU))
KERNELS_CUDA_LINK := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 \
	-lcudart -lstdc++

$(BUILD)/obj/kernels/%.cu.o: kernels/%.cu
	@mkdir -p $(@D)
	$(call msg,NVCC,$<)
	$(Q)$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

$(BUILD)/libkernels_cuda.a: $(KERNELS_CU_OBJS)
	@mkdir -p $(@D)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# $(call kernels_gpu_program,BINARY,SOURCES)
define kernels_gpu_program
$(call objs,$(2)): CPPFLAGS += -I$(CUDA_HOME)/include
$(1): $(call objs,$(2)) $(BUILD)/libkernels_cuda.a $$(ARCHIVES)
	@mkdir -p $$(@D)
	$$(call msg,LD,$$@)
	$(Q)$$(CC) $$(LDFLAGS) -o $$@ $(call objs,$(2)) \
		$(BUILD)/libkernels_cuda.a $$(LINK_GROUP) $$(KERNELS_CUDA_LINK)
endef

KERNELS_GPU_SRCS := $(wildcard kernels/gpu/gpu-*.c)
KERNELS_GPU_COMMON := $(filter-out $(KERNELS_GPU_SRCS),$(wildcard kernels/gpu/*.c))
KERNELS_GPU_BINS := $(patsubst kernels/gpu/%.c,$(BUILD)/kernels/%,$(KERNELS_GPU_SRCS))
$(foreach s,$(KERNELS_GPU_SRCS),$(eval $(call kernels_gpu_program,$(patsubst kernels/gpu/%.c,$(BUILD)/kernels/%,$(s)),$(s) $(KERNELS_GPU_COMMON))))
$(eval $(call kernels_gpu_program,$(BUILD)/kvmm-calibrate,$(wildcard tools/kvmm-calibrate/*.c) $(KERNELS_GPU_COMMON)))

PROGRAMS += $(BUILD)/libkernels_cuda.a $(KERNELS_GPU_BINS) $(BUILD)/kvmm-calibrate
INSTALL_BINS += $(BUILD)/kvmm-calibrate
endif

# CUDA emulation (kernels/emu): the same kernels/*.cu and GPU test sources
# built as C++/C against kernels/emu's runtime, which runs each block's
# threads as fibers on the CPU.  Always built (no nvcc needed), so
# `make check` executes the CUDA code here too (tests/kernels-emulated.sh).
EMU_CPPFLAGS = -Ikernels/emu $(CPPFLAGS)
EMU_CXXFLAGS = -std=gnu++17 -O2 -g -fPIC -pthread $(WARN) -Wno-unknown-pragmas -fno-strict-aliasing \
	$(filter -fsanitize% -fno-sanitize% -fno-omit-frame-pointer -O1,$(CFLAGS))
EMU_CU_OBJS := $(patsubst %.cu,$(BUILD)/obj/emu/%.o,$(wildcard kernels/*.cu)) \
	$(BUILD)/obj/emu/kernels/emu/emu.o
EMU_GPU_COMMON := $(patsubst %.c,$(BUILD)/obj/emu/%.o,$(wildcard kernels/gpu/gpu_*.c))

$(BUILD)/obj/emu/kernels/%.o: kernels/%.cu $(BUILD)/config.h
	@mkdir -p $(@D)
	$(call msg,CXX,$<)
	$(Q)$(CXX) -x c++ $(EMU_CPPFLAGS) $(EMU_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/emu/kernels/emu/%.o: kernels/emu/%.cc $(BUILD)/config.h
	@mkdir -p $(@D)
	$(call msg,CXX,$<)
	$(Q)$(CXX) $(EMU_CPPFLAGS) $(EMU_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/emu/kernels/gpu/%.o: kernels/gpu/%.c $(BUILD)/config.h
	@mkdir -p $(@D)
	$(call msg,CC,$<)
	$(Q)$(CC) $(EMU_CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# $(call kernels_emu_program,NAME): build/kernels/emu-NAME from gpu-NAME.c
define kernels_emu_program
$(BUILD)/kernels/emu-$(1): $(BUILD)/obj/emu/kernels/gpu/gpu-$(1).o \
		$(EMU_GPU_COMMON) $(EMU_CU_OBJS) $$(ARCHIVES)
	@mkdir -p $$(@D)
	$$(call msg,LD,$$@)
	$(Q)$$(CXX) $$(LDFLAGS) -o $$@ $$< $(EMU_GPU_COMMON) $(EMU_CU_OBJS) \
		$$(LINK_GROUP)
endef
$(eval $(call kernels_emu_program,test-msa))
$(eval $(call kernels_emu_program,test-copy-merge))
$(eval $(call kernels_emu_program,bench-msa))

# kvmm-calibrate under the emulator: tests/kernels-calibrate-profile runs
# it with --tiny and loads the profile it writes with the policy's parser.
$(BUILD)/obj/emu/tools/kvmm-calibrate/%.o: tools/kvmm-calibrate/%.c $(BUILD)/config.h
	@mkdir -p $(@D)
	$(call msg,CC,$<)
	$(Q)$(CC) $(EMU_CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
EMU_CALIBRATE_OBJS := $(patsubst %.c,$(BUILD)/obj/emu/%.o,$(wildcard tools/kvmm-calibrate/*.c))
$(BUILD)/kernels/emu-calibrate: $(EMU_CALIBRATE_OBJS) $(EMU_GPU_COMMON) \
		$(EMU_CU_OBJS) $(ARCHIVES)
	@mkdir -p $(@D)
	$(call msg,LD,$@)
	$(Q)$(CXX) $(LDFLAGS) -o $@ $(EMU_CALIBRATE_OBJS) $(EMU_GPU_COMMON) \
		$(EMU_CU_OBJS) $(LINK_GROUP)

KERNELS_EMU_BINS := $(BUILD)/kernels/emu-test-msa \
	$(BUILD)/kernels/emu-test-copy-merge $(BUILD)/kernels/emu-calibrate \
	$(BUILD)/kernels/emu-bench-msa
PROGRAMS += $(KERNELS_EMU_BINS)
