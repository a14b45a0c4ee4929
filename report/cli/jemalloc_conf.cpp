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
extern "C" {
const char* malloc_conf = "metadata_thp:always";
}
