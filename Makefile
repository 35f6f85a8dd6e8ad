# memsplit — build, test, demo, bench.
#   make             build/memsplit (installs missing Debian -dev packages first)
#   make test        the include floors and the CPU tests (what CI runs)
#   make test-gpu    GPU tests (on a machine with a GPU; built here, run there)
#   make sanitize    the CPU tests under AddressSanitizer + UBSan
#   make demo        the main job (see README)
#   make bench       benchmarks (GPU)
#   build/memsplit-rank  the MPI rank binary (mpirun/srun); build/memsplit never needs libmpi
CUDA      ?= /usr/local/cuda
BUILD     ?= build
CC        ?= gcc
NVCC      ?= $(CUDA)/bin/nvcc
OPT       ?= -O2
SAN       ?=
PKGS       = jansson inih sqlite3

# sm_90 machine code plus compute_90 PTX (built here, run on the H200: README, `make gpu-pack`)
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# attention.cu is built as sm_90a machine code (its warpgroup-MMA kernels,
# which a probe at run time confirms) plus the compute_90 PTX: a 9.0 device
# runs the sm_90a code, any later one the PTX, which has no wgmma and keeps
# the mma.sync kernels (sm_90 code beside it would double the module)
ATTN_ARCH ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90

DEPS_STAMP = $(BUILD)/.deps
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
CFLAGS    += -std=c11 $(OPT) -g -Wall -Wextra -Werror -D_GNU_SOURCE -I. -I$(CUDA)/include $(PKG_CFLAGS) $(SAN)
NVFLAGS   += -O3 -std=c++17 $(CUDA_ARCH) -I. -Xcompiler -Wall,-Wextra,-Werror -lineinfo
# Small Debian libraries are linked statically so the binary runs on the GPU
# machine, which has the CUDA runtime libraries but no Debian -dev packages.
# MPI (Debian's OpenMPI, shared only) goes into build/memsplit-rank alone, so
# that build/memsplit starts where no libmpi is installed.
MPI_PKG    ?= $(shell pkg-config --exists ompi-c 2>/dev/null && echo ompi-c || echo mpi)
MPI_CFLAGS  = $(shell pkg-config --cflags $(MPI_PKG) 2>/dev/null)
MPI_LIBS    = $(shell pkg-config --libs $(MPI_PKG) 2>/dev/null)
STATIC_LIBS = -Wl,-Bstatic -ljansson -linih -lsqlite3 -Wl,-Bdynamic
CUDA_LIBS   = -L$(CUDA)/lib64 -lcudart_static -lcublasLt -lcupti -lnccl -Wl,-rpath,$(CUDA)/lib64
LDLIBS     += $(STATIC_LIBS) $(CUDA_LIBS) -lstdc++ -lz -lm -ldl -lpthread -lrt
LDFLAGS    += -Wl,-rpath,'$$ORIGIN/lib' $(SAN)

HOST_SRC  = $(wildcard vocab/*.c kernels/cpu/*.c trainer/*.c profiler/*.c bridge/*.c bridge/host/*.c planner/*.c reports/*.c run/*.c cli/*.c)
HOST_SRC := $(filter-out cli/main.c cli/rank_main.c,$(HOST_SRC))
CU_SRC    = $(wildcard kernels/cuda/*.cu)
HOST_OBJ  = $(HOST_SRC:%.c=$(BUILD)/obj/%.o)
CU_OBJ    = $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
LIB       = $(BUILD)/libmemsplit.a

UNIT_SRC  = $(wildcard tests/unit/test_*.c)
UNIT_BIN  = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
GPU_SRC   = $(wildcard tests/gpu/test_*.c)
GPU_BIN   = $(GPU_SRC:tests/gpu/%.c=$(BUILD)/tests/gpu_%)
TEST_HELP = $(wildcard tests/common/*.c)

.PHONY: all test test-gpu sanitize demo demo-builtin bench clean deps tests-build gpu-build check-floors
# keep the test objects (pattern-chained intermediates) so rebuilds stay incremental
.SECONDARY:
all: $(BUILD)/memsplit $(BUILD)/memsplit-rank bridge

# The PyTorch bridge's half inside the user's program (docs/bridge.md):
# libmemsplit_bridge.so (loaded by the Python package through ctypes; no
# CUDA link dependency), libmemsplit_inject.so (CUDA_INJECTION64_PATH;
# CUPTI), and the Python package, all under $(BUILD)/bridge/ where
# build/memsplit finds them.
BRIDGE_DIR   = $(BUILD)/bridge
BRIDGE_SRC   = bridge/ledger.c bridge/layers.c bridge/child/msb.c bridge/child/ballast.c vocab/addr_map.c vocab/errf.c
INJECT_SRC   = bridge/inject/inject.c profiler/cupti_trace.c profiler/cupti_ledger.c
BRIDGE_PY    = $(shell find bridge/python -name '*.py' 2>/dev/null)
BRIDGE_PY_OUT = $(BRIDGE_PY:bridge/python/%=$(BRIDGE_DIR)/python/%)
# no sanitizers here: these load into a Python that has no sanitizer
# runtime (the same sources run under ASan in the unit tests, via $(LIB))
PIC_CFLAGS   = $(filter-out $(PKG_CFLAGS) $(SAN),$(CFLAGS)) -fPIC -fvisibility=default
.PHONY: bridge
bridge: $(BRIDGE_DIR)/libmemsplit_bridge.so $(BRIDGE_DIR)/libmemsplit_inject.so $(BRIDGE_PY_OUT)
$(BUILD)/pic/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(PIC_CFLAGS) -MMD -MP -c $< -o $@
$(BRIDGE_DIR)/libmemsplit_bridge.so: $(BRIDGE_SRC:%.c=$(BUILD)/pic/%.o)
	@mkdir -p $(dir $@)
	$(CC) -shared $^ -o $@ -ldl -lpthread
$(BRIDGE_DIR)/libmemsplit_inject.so: $(INJECT_SRC:%.c=$(BUILD)/pic/%.o) $(BRIDGE_DIR)/libmemsplit_bridge.so
	$(CC) -shared $(filter %.o,$^) -o $@ -L$(BRIDGE_DIR) -lmemsplit_bridge -Wl,-rpath,'$$ORIGIN' \
	    -L$(CUDA)/lib64 -lcupti -Wl,-rpath,$(CUDA)/lib64 -ldl -lpthread
$(BRIDGE_DIR)/python/%.py: bridge/python/%.py
	@mkdir -p $(dir $@)
	cp $< $@

deps: $(DEPS_STAMP)
$(DEPS_STAMP): scripts/deps.sh
	@mkdir -p $(BUILD)
	@scripts/deps.sh
	@touch $@

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/kernels/cuda/attention.o: CUDA_ARCH = $(ATTN_ARCH)
$(BUILD)/obj/%.o: %.cu | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(HOST_OBJ) $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/memsplit: $(BUILD)/obj/cli/main.o $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# mpi/: the MPI transport and the launch checks, the only code that
# includes mpi.h; memsplit-rank's front end is cli/rank_main.c
RANK_SRC  = $(wildcard mpi/*.c)
RANK_OBJ  = $(RANK_SRC:%.c=$(BUILD)/obj/%.o)
$(BUILD)/obj/mpi/%.o: mpi/%.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/memsplit-rank: $(BUILD)/obj/cli/rank_main.o $(RANK_OBJ) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(MPI_LIBS)

# cmocka has no static library in Debian: copy the shared one beside the
# tests ($ORIGIN/lib) so the build folder can travel to the GPU machine.
$(BUILD)/tests/lib/.cmocka: | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@cp -L $$(ls /usr/lib/*/libcmocka.so.0 | head -1) $(dir $@)
	@touch $@

TEST_HELP_OBJ = $(TEST_HELP:%.c=$(BUILD)/obj/%.o)
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(TEST_HELP_OBJ) $(LIB) $(BUILD)/tests/lib/.cmocka
	$(CC) $(LDFLAGS) $(filter %.o %.a,$^) -o $@ $(LDLIBS) -L$(BUILD)/tests/lib -l:libcmocka.so.0
$(BUILD)/tests/gpu_%: $(BUILD)/obj/tests/gpu/%.o $(TEST_HELP_OBJ) $(LIB) $(BUILD)/tests/lib/.cmocka
	$(CC) $(LDFLAGS) $(filter %.o %.a,$^) -o $@ $(LDLIBS) -L$(BUILD)/tests/lib -l:libcmocka.so.0

# tests/mpi/: run under mpirun by tests/mpi/run.sh
MPI_TEST_BIN = $(BUILD)/tests/mpi_ranks
$(BUILD)/obj/tests/mpi/%.o: tests/mpi/%.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/tests/mpi_ranks: $(BUILD)/obj/tests/mpi/test_ranks.o $(BUILD)/obj/mpi/mpi_dist.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(MPI_LIBS)

tests-build: $(UNIT_BIN) $(BUILD)/memsplit $(BUILD)/memsplit-rank $(MPI_TEST_BIN) bridge
gpu-build: $(GPU_BIN) $(BUILD)/memsplit $(BUILD)/memsplit-rank

# scripts/check_floors.py: no #include runs up or sideways (README's layout)
test: tests-build fuzz-build
	MEMSPLIT=$(abspath $(BUILD)/memsplit) FUZZ_BIN=$(abspath $(FUZZ_BUILD)/fuzz) \
	    tests/run.sh scripts/check_floors.py $(UNIT_BIN) tests/cli/run.sh tests/cli/reliability.sh tests/bridge/run.sh tests/bridge/shapes.sh tests/bridge/untrusted.sh tests/mpi/run.sh \
	    tests/browser/render.sh tests/fuzz/ci.sh

check-floors:
	scripts/check_floors.py

test-gpu: gpu-build
	MEMSPLIT=$(abspath $(BUILD)/memsplit) TEST_TIMEOUT_S=$${TEST_TIMEOUT_S:-1200} tests/run.sh $(GPU_BIN) tests/gpu/track_cpu.sh tests/gpu/recover_gpu.sh tests/gpu/bridge.sh

sanitize:
	$(MAKE) BUILD=build-san OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test

demo: $(BUILD)/memsplit bridge
	scripts/demo.sh $(BUILD)/memsplit
demo-builtin: $(BUILD)/memsplit
	scripts/demo_builtin.sh $(BUILD)/memsplit

BENCH_TOOLS = $(BUILD)/plan_bench $(BUILD)/nccl_bw $(BUILD)/gemm_rate $(BUILD)/kernel_times
bench: $(BUILD)/memsplit $(BENCH_TOOLS)
	bench/run.sh $(BUILD)/memsplit

$(BUILD)/plan_bench: bench/plan_bench.c $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(LIB) -o $@ $(LDLIBS)

# Issue 15's attention tuning harness (bench/attn_tune.cu): every candidate
# configuration of the bf16 kernels, timed and checked against the kernels of
# ATTN_REF (the commit before the tuning). Static cudart: runs on the GPU
# machine as is. Not part of `bench` (it is a developer's tool).
ATTN_REF ?= 04c9cea
$(BUILD)/attn_tune: CUDA_ARCH = $(ATTN_ARCH)
$(BUILD)/attn_tune: bench/attn_tune.cu bench/attn_ref.cu kernels/cuda/attention.cu kernels/cuda/attention_cuda.h \
		kernels/cuda/attention_wgmma.cuh kernels/cuda/wgmma_ops.cuh
	@mkdir -p $(BUILD)/bench
	git show $(ATTN_REF):kernels/cuda/attention.cu > $(BUILD)/bench/attn_ref_src.cu
	$(NVCC) $(NVFLAGS) -Xptxas -v -DATTN_REF_SRC='"$(BUILD)/bench/attn_ref_src.cu"' bench/attn_tune.cu bench/attn_ref.cu \
		-cudart static -o $@ 2> $(BUILD)/bench/attn_tune.ptxas.txt || { cat $(BUILD)/bench/attn_tune.ptxas.txt; exit 1; }
attn-tune: $(BUILD)/attn_tune
.PHONY: attn-tune

# The matmul's timed pick against the heuristic's first, on a bf16 step's
# products (bench/gemm_pick.c); a developer's tool like attn_tune.
$(BUILD)/gemm_pick: bench/gemm_pick.c bench/fill_uniform.h $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(LIB) -o $@ $(LDLIBS)
# Other cuBLASLt choices on the same products, called directly (bench/gemm_alts.c).
$(BUILD)/gemm_alts: bench/gemm_alts.c bench/fill_uniform.h | $(DEPS_STAMP)
	$(CC) $(CFLAGS) $(LDFLAGS) $< -o $@ $(LDLIBS)
gemm-pick: $(BUILD)/gemm_pick $(BUILD)/gemm_alts
# The fused softmax cross-entropy alone, on the LM head's chunk (bench/sx_time.c).
$(BUILD)/sx_time: bench/sx_time.c bench/fill_uniform.h $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(LIB) -o $@ $(LDLIBS)
.PHONY: gemm-pick

$(BUILD)/nccl_bw: bench/nccl_bw.c
	$(CC) $(CFLAGS) $(LDFLAGS) $< -o $@ $(LDLIBS)

# the matrix rate MFU divides by, and the per-family sum of torch's kernels
$(BUILD)/gemm_rate: bench/gemm_rate.c | $(DEPS_STAMP)
	$(CC) $(CFLAGS) $(LDFLAGS) $< -o $@ $(LDLIBS)
$(BUILD)/kernel_times: bench/kernel_times.c $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(LIB) -o $@ $(LDLIBS)

# ---- fuzzing (tests/fuzz/README.md) ---------------------------------------
# libFuzzer harnesses, built by clang with ASan + UBSan into their own folder
# from the few host sources they reach (no CUDA): `make fuzz-build` builds
# them, `make fuzz` fuzzes each for FUZZ_SECONDS, `make test` replays the
# corpora and then fuzzes each with a fixed seed and run count (tests/fuzz/ci.sh).
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_CPU_SECONDS ?=
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_NAMES    = $(patsubst tests/fuzz/fuzz_%.c,%,$(filter-out tests/fuzz/fuzz_util.c,$(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_BIN      = $(FUZZ_NAMES:%=$(BUILD)/fuzz/%)
FUZZ_LIB_SRC  = $(wildcard vocab/*.c reports/*.c) trainer/config.c trainer/config_ini.c trainer/config_table.c \
                trainer/checkpoint.c trainer/crc32c.c trainer/job.c \
                bridge/trace.c bridge/rows.c bridge/record.c bridge/ledger.c bridge/steps.c $(wildcard bridge/host/*.c) \
                planner/record_replay.c run/undo_files.c
FUZZ_LIB      = $(BUILD)/libfuzzdeps.a

$(FUZZ_LIB): $(FUZZ_LIB_SRC:%.c=$(BUILD)/obj/%.o)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/fuzz/%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/fuzz_util.o $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=fuzzer $(FUZZ_SAN) $(filter %.o %.a,$^) -o $@ $(STATIC_LIBS) -lm -lpthread
fuzz-bins: $(FUZZ_BIN)

# The sanitizers go into every object through SAN; fuzzer-no-link adds the
# coverage instrumentation libFuzzer steers by, and only the harness link
# brings libFuzzer's main.
fuzz-build:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang OPT=-O1 SAN="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" fuzz-bins
fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_CPU_SECONDS=$(FUZZ_CPU_SECONDS) tests/fuzz/long.sh $(abspath $(FUZZ_BUILD)/fuzz) $(FUZZ)
.PHONY: fuzz fuzz-build fuzz-bins

clean:
	rm -rf build build-san build-fuzz

-include $(HOST_OBJ:.o=.d) $(CU_OBJ:.o=.d) $(RANK_OBJ:.o=.d) $(BUILD)/obj/cli/main.d $(BUILD)/obj/cli/rank_main.d $(wildcard $(BUILD)/obj/tests/*/*.d) $(wildcard $(BUILD)/pic/*/*.d $(BUILD)/pic/*/*/*.d)

# The GPU machine has the CUDA runtime but no Debian -dev packages and no
# room for the whole build folder: pack stripped binaries to carry there,
# then run them with `make test-gpu-run` (no build step).
PACK ?= gpu-pack
gpu-pack: all gpu-build $(BENCH_TOOLS)
	rm -rf $(PACK) && mkdir -p $(PACK)/tests/lib
	cp $(BUILD)/memsplit $(BUILD)/memsplit-rank $(BENCH_TOOLS) $(PACK)/
	strip $(PACK)/memsplit $(PACK)/memsplit-rank $(BENCH_TOOLS:$(BUILD)/%=$(PACK)/%)
	cp -r $(BRIDGE_DIR) $(PACK)/bridge
	cp $(GPU_BIN) $(PACK)/tests/ && strip $(PACK)/tests/gpu_*
	cp $(BUILD)/tests/lib/libcmocka.so.0 $(PACK)/tests/lib/
	@du -sh $(PACK)
# the bridge's GPU suite needs torch (and Lightning, transformers) there;
# GPU_BRIDGE= leaves it out (a machine with a per-call limit runs its
# SECTIONS apart: tests/gpu/bridge.sh says which)
GPU_BRIDGE ?= tests/gpu/bridge.sh
test-gpu-run:
	MEMSPLIT=$(abspath $(PACK)/memsplit) TEST_TIMEOUT_S=$${TEST_TIMEOUT_S:-1200} tests/run.sh $(wildcard $(PACK)/tests/gpu_*) tests/gpu/track_cpu.sh tests/gpu/recover_gpu.sh $(GPU_BRIDGE)
.PHONY: gpu-pack test-gpu-run
