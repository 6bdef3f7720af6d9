import Glibc
import Synchronization

/// libwebsockets sizes a context's descriptor table by the soft limit on open files when the
/// context is made, and the distribution's build walks the whole table on every socket close (a
/// consistency check, `sanity_assert_no_sockfd_traces`). At a container's usual limit of 1 048 576
/// that is 8 MB read, about a millisecond of the edge's thread, for each connection that ends. So
/// the table is sized by the edge's connection cap, not by whatever the limit happens to be.
enum DescriptorTable {
    /// Descriptors the rest of the process may hold beside the edge's connections unless told
    /// (`EdgeConfiguration.reservedDescriptors`): the event log's files, upstream connections,
    /// the listening socket, the event loop's own.
    static let reserve = 1_024

    /// Setting the process-wide limit and putting it back is one step for all edges made at once.
    private static let limitLock = Mutex(())

    /// The soft limit while the context is made, the soft limit after, and the connections the
    /// table holds.
    struct Plan: Equatable {
        let whileMaking: rlim_t
        let after: rlim_t
        let connections: Int
    }

    /// A limit below what `connections` need is raised for good, up to the hard limit, since the
    /// connections need the descriptors; a limit above it is lowered only while the context is
    /// made, so the rest of the process keeps the operator's limit. Under a hard limit too low
    /// for the cap, the table holds fewer connections than asked.
    static func plan(soft: rlim_t, hard: rlim_t, connections: Int, reserve: Int = reserve) -> Plan {
        let table = min(rlim_t(connections) + rlim_t(reserve), hard)
        let size = Int(clamping: table)
        return Plan(whileMaking: table, after: max(table, soft),
                    connections: max(1, min(connections, size - min(reserve, size / 4))))
    }

    /// Runs `make` (which creates a libwebsockets context) under the plan for `connections`.
    /// Returns what `make` returned and the connections the table holds.
    static func sized<Context>(for connections: Int, reserve: Int = reserve, _ make: () -> Context) -> (Context, connections: Int) {
        limitLock.withLock { _ in
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
            var limit = rlimit()
            guard getrlimit(resource, &limit) == 0 else { return (make(), connections) }
            let plan = plan(soft: limit.rlim_cur, hard: limit.rlim_max, connections: connections, reserve: reserve)
            let original = limit.rlim_cur
            limit.rlim_cur = plan.whileMaking
            guard setrlimit(resource, &limit) == 0 else {
                return (make(), Self.plan(soft: original, hard: original, connections: connections, reserve: reserve).connections)
            }
            let context = make()
            limit.rlim_cur = plan.after
            _ = setrlimit(resource, &limit)
            return (context, plan.connections)
        }
    }
}
