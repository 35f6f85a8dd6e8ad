/* test_step_graph_gpu.c — the CPU test (tests/unit/test_step_graph.c) on
 * cuda:0, where every run with use_graph must replay graphs. Tolerances:
 * fp32 1e-4 relative per step and per weight (float atomics sum in another
 * order from run to run, and AdamW carries that over 6 steps, as in
 * test_pipeline_gpu.c); bf16 and fp16 2e-3. */
#define GRAPH_DEVICE "cuda:0"
#define GRAPH_TOL 1e-4
#define GRAPH_TOL16 2e-3
#define GRAPH_ON_GPU 1
#include "tests/unit/test_step_graph.c"
