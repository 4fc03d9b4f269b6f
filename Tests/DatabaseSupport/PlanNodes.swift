import HeraldCore

extension JSONValue {
    /// Every scan node of an `EXPLAIN (FORMAT JSON)` plan (this value), its InitPlans, SubPlans and
    /// CTEs included, as the node objects PostgreSQL wrote: `Relation Name`, `Alias`, `Index Cond`,
    /// `Actual Loops`, ….
    package var planScans: [[String: JSONValue]] {
        var scans: [[String: JSONValue]] = []
        func walk(_ value: JSONValue) {
            if case .array(let list) = value { list.forEach(walk); return }
            guard case .object(let node) = value else { return }
            if node["Relation Name"] != nil, node["Node Type"]?.string?.contains("Scan") == true { scans.append(node) }
            node.values.forEach(walk)
        }
        walk(self)
        return scans
    }
}
