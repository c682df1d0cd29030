// Which threads run the kernels' parallel loops: the OpenMP team of the calling thread (default)
// or the Halide runtime's own pool.
//
// Every kernel's parallel loop is a halide_do_par_for call into the shared Halide runtime;
// Registry::runtime_handle points it at openmp_do_par_for unless OPFORGE_THREAD_POOL=halide.
// Why OpenMP: the processes opforge serves (PyTorch, DeepSpeed) already run an OpenMP team whose
// idle workers spin for milliseconds after each region (libgomp's default wait policy). Halide's
// pool then competes with them for the cores: apply_adam at 2 threads and 1e6 elements, called
// right after DeepSpeed's CPUAdam in one process, took 257 us on Halide's pool and 146 us on the
// shared team (AMD EPYC, 2 vCPUs; scripts/BENCHMARKS.md). Alone, the team's static split keeps
// each thread on the same part of an L2-resident tensor from call to call (1e5: 14 vs 17 us),
// and after an idle gap libgomp's wake-up beat the Halide pool's (1e6: 154 vs 378 us).
#pragma once

#include <cstdint>
#include <string>

namespace opforge::thread_pool {

enum class Kind { openmp, halide };

// From OPFORGE_THREAD_POOL (openmp | halide; unset: openmp); throws naming a bad value.
Kind from_environment();
const char* name(Kind k);

// halide_do_par_for_t on the calling thread's OpenMP team: tasks [min, min + size) split
// statically, nothing in parallel when one thread is asked for or when called from inside a
// parallel region (nested regions are serial in libgomp's default); returns the first non-zero
// task result.
using Task = int (*)(void* user_context, int task, uint8_t* closure);
int openmp_do_par_for(void* user_context, Task task, int min, int size, uint8_t* closure);

// Threads of openmp_do_par_for's regions; 0: the team's default (OMP_NUM_THREADS, or what the
// host set with omp_set_num_threads, e.g. torch.set_num_threads).
void set_openmp_threads(int n);
int openmp_threads();  // what a region gets now; 1 in a forked child

// A forked child does not inherit libgomp's team: after the parent's parallel calls, a kernel's
// parallel loop in the child waited for the parent's workers forever (torch's own ops hang in
// such a child too, GNU libgomp's known limit). Halide's own pool mostly recovers, but a worker
// holding its mutex at the fork leaves it locked in the child. Registers, once, a
// pthread_atfork child handler that makes openmp_do_par_for serial and installs it through
// `set_par_for` (halide_set_custom_do_par_for), with either pool, so the child's kernels run
// on the calling thread.
using ParFor = int (*)(void*, Task, int, int, uint8_t*);
void run_serially_after_fork(ParFor (*set_par_for)(ParFor));

}  // namespace opforge::thread_pool
