#if canImport(Glibc)
import Glibc
#endif

/// glibc gives every thread that allocates its own malloc arena (up to 8 per core); with event
/// loops, the cooperative pool and the database thread pool that was a third of the worker's
/// peak RSS. Two arenas, unless `MALLOC_ARENA_MAX` says otherwise (measured with `make
/// bench-worker`: see docs/benchmarks.md). Called first by `herald run` and by `herald-bench`,
/// so the benchmark's figures are the worker's.
package func limitMallocArenas() {
    #if canImport(Glibc)
    // `mallopt` is declared in <malloc.h>, which the Glibc module does not import.
    guard getenv("MALLOC_ARENA_MAX") == nil, let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt")
    else { return }
    typealias MallOpt = @convention(c) (Int32, Int32) -> Int32
    let mArenaMax: Int32 = -8  // M_ARENA_MAX
    _ = unsafeBitCast(symbol, to: MallOpt.self)(mArenaMax, 2)
    #endif
}
