// jemalloc's options for the laggard CLI (linked in only with jemalloc, report/CMakeLists.txt).
// jemalloc reads this global at its first allocation, before MALLOC_CONF from the environment,
// which still overrides any of it.
//
// metadata_thp:always: jemalloc's own metadata (an extent record per slab and per large block,
// about 12 MB at 10,000 ranks of summaries) on transparent huge pages. Those records are read
// before they are first written, so each fresh 4 KiB page of them took two faults (the zero page,
// then a copy) and a TLB shootdown of the other core: je_base_alloc_edata was 3.7 % of all
// samples at 10,000 ranks. Measured on 2026-11-28 (docs/performance.md), alternating with the
// default: 10,000 summaries 0.87-0.90 s against 0.90-1.07 s (CPU 1.62-1.68 against 1.69-2.01 s,
// 10 pairs), 100,000 and 960 x 903 x 50 about 3 % faster; peak memory 0-5 % higher. The data
// itself stays on 4 KiB pages: huge pages for it cost more in compaction and zeroing than they
// saved here (docs/performance.md, "The allocator").
//
// percpu_arena:percpu: one arena per CPU, a thread allocating from the arena of the CPU it runs on.
// The analyses started short-lived threads for each parallel step (parallel.h; since 2026-11-29
// they keep theirs, the reader still starts its own); by default each new thread took the arena
// with the fewest threads, so memory one stage freed on one arena was often not reused by the next
// stage's thread on another. 960 x 903 x 50 peaked at 1,990-2,026 MiB in 11 runs of 14 (1,892-
// 1,895 MiB in the others), up to 22 MiB under the 2 GiB goal; with this setting at 1,891-1,895 MiB
// in 6 runs of 6, at the same speed and 1-3 % fewer page faults (2026-11-28, docs/performance.md).
// No fixed arena count: a many-core machine still has one arena per core.
extern "C" {
const char* malloc_conf = "metadata_thp:always,percpu_arena:percpu";
}
