import Delivery
import Foundation
import HeraldCore
import HeraldMetrics
import Settings
import Testing

/// The deployment files (deploy/) checked against the code: a dashboard, alert rule or
/// manifest that names a metric Herald does not export, a probe on a path the worker does not
/// serve, or a grace period shorter than the drain deadline fails here. No database needed.
/// `scripts/validate-deploy.sh` runs the same checks with promtool and kubernetes-validate.
@Suite("Deployment files")
struct DeployManifestTests {
    static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url
    }()
    static let deploy = root.appendingPathComponent("deploy")

    static func read(_ relative: String) throws -> String {
        try String(contentsOf: deploy.appendingPathComponent(relative), encoding: .utf8)
    }

    /// Every regular file under deploy/, as (path relative to the repository, contents).
    static func deployFiles() throws -> [(path: String, text: String)] {
        let manager = FileManager.default
        guard let subpaths = manager.subpaths(atPath: deploy.path), !subpaths.isEmpty else {
            throw ManifestError("cannot list \(deploy.path)")
        }
        var files: [(String, String)] = []
        for subpath in subpaths.sorted() {
            var isDirectory: ObjCBool = false
            let url = deploy.appendingPathComponent(subpath)
            guard manager.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            files.append(("deploy/" + subpath, try String(contentsOf: url, encoding: .utf8)))
        }
        return files
    }

    /// The metric a `herald_…` token refers to, allowing the series a histogram exposes.
    static func metric(for token: String) -> MetricNames.Metric? {
        if let metric = MetricNames.all.first(where: { $0.name == token }) { return metric }
        for suffix in ["_bucket", "_sum", "_count"] where token.hasSuffix(suffix) {
            let base = String(token.dropLast(suffix.count))
            if let metric = MetricNames.all.first(where: { $0.name == base }), metric.kind == .histogram {
                return metric
            }
        }
        return nil
    }

    static func metricTokens(in text: String) -> [String] {
        text.matches(of: #/\bherald_[a-z_]+/#).map { String($0.output) }
    }

    // MARK: - Metric names

    @Test("every herald_* metric named in deploy/ is exported (histograms: _bucket, _sum, _count)")
    func metricNamesExist() throws {
        let files = try Self.deployFiles()
        #expect(files.contains { $0.path == "deploy/grafana/herald-dashboard.json" })
        #expect(files.contains { $0.path == "deploy/prometheus/alerts.yaml" })
        var referenced: Set<String> = []
        for file in files {
            for token in Self.metricTokens(in: file.text) {
                let metric = Self.metric(for: token)
                #expect(metric != nil, "\(file.path) names \(token), which Sources/Metrics/MetricNames.swift does not export")
                if let metric { referenced.insert(metric.name) }
            }
        }
        // Not vacuous: the dashboard and the alerts between them cover every exported metric.
        let unreferenced = Set(MetricNames.all.map(\.name)).subtracting(referenced)
        #expect(unreferenced.isEmpty, "no panel or alert shows \(unreferenced.sorted())")
    }

    @Test("the metric-name check rejects names the worker does not export")
    func metricCheckRejects() {
        #expect(Self.metric(for: "herald_outbox_lag_seconds") != nil)
        #expect(Self.metric(for: "herald_claim_duration_seconds_bucket") != nil)
        #expect(Self.metric(for: "herald_jobs_claimed_total_count") == nil)  // a counter has no _count
        #expect(Self.metric(for: "herald_outbox_lag") == nil)
        #expect(Self.metricTokens(in: #"rate(herald_jobs_claimed_total{job="x"}[5m])"#) == ["herald_jobs_claimed_total"])
    }

    @Test("alerts cover lag, dead letters, circuit, credentials, readiness and leadership")
    func alertsCoverTheIssue() throws {
        let alerts = try Self.read("prometheus/alerts.yaml")
        for needle in [
            "herald_outbox_lag_seconds", "herald_jobs_dead_lettered_total",
            "min_over_time(herald_provider_circuit_state[5m])) >= 1",
            #"outcome="credentials_broken""#, "absent(herald_ready)", "sum(herald_maintenance_leader) == 0",
        ] {
            #expect(alerts.contains(needle), "alerts.yaml has no rule with \(needle)")
        }
        let rules = alerts.components(separatedBy: "- alert: ").dropFirst()
        #expect(rules.count >= 6)
        for rule in rules {
            let name = rule.prefix { !$0.isNewline }
            #expect(rule.contains("for: "), "\(name) has no for:")
            #expect(rule.contains("severity: warning") || rule.contains("severity: critical"), "\(name): severity")
            for key in ["summary:", "description:", "runbook:"] {
                #expect(rule.contains(key), "\(name) has no \(key)")
            }
            #expect(rule.contains("`herald "), "\(name): the runbook names no herald command")
        }
    }

    // MARK: - Dashboard

    @Test("the Grafana dashboard is valid JSON with panels that query exported metrics")
    func dashboardParses() throws {
        let data = Data(try Self.read("grafana/herald-dashboard.json").utf8)
        let object = try JSONSerialization.jsonObject(with: data)
        let dashboard = try #require(object as? [String: Any])
        #expect(dashboard["schemaVersion"] as? Int ?? 0 >= 36)
        let variables = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        #expect(variables.contains { $0["name"] as? String == "datasource" && $0["type"] as? String == "datasource" })

        func flatten(_ panels: [[String: Any]]) -> [[String: Any]] {
            panels.flatMap { [$0] + flatten($0["panels"] as? [[String: Any]] ?? []) }
        }
        let panels = flatten(try #require(dashboard["panels"] as? [[String: Any]]))
        let queryPanels = panels.filter { $0["type"] as? String != "row" }
        #expect(queryPanels.count >= 15)
        let ids = panels.compactMap { $0["id"] as? Int }
        #expect(ids.count == panels.count && Set(ids).count == ids.count, "panel ids must be present and unique")
        for panel in queryPanels {
            let title = panel["title"] as? String ?? "?"
            let targets = panel["targets"] as? [[String: Any]] ?? []
            #expect(!targets.isEmpty, "panel \(title) has no query")
            for target in targets {
                let expr = target["expr"] as? String ?? ""
                let tokens = Self.metricTokens(in: expr)
                #expect(!tokens.isEmpty, "panel \(title) queries no herald metric: \(expr)")
                #expect(tokens.allSatisfy { Self.metric(for: $0) != nil }, "panel \(title): \(expr)")
            }
        }
    }

    // MARK: - Kubernetes

    static func kubernetesDocuments() throws -> [YAMLNode] {
        let base = deploy.appendingPathComponent("kubernetes/base")
        let names = try FileManager.default.contentsOfDirectory(atPath: base.path).filter { $0.hasSuffix(".yaml") }.sorted()
        return try names.flatMap { name in
            try MiniYAML.parseDocuments(try String(contentsOf: base.appendingPathComponent(name), encoding: .utf8))
        }
    }

    static func resource(_ kind: String, in docs: [YAMLNode]) throws -> YAMLNode {
        try #require(docs.first { $0["kind"]?.string == kind }, "no \(kind) in deploy/kubernetes/base")
    }

    @Test("the worker's probes hit /readyz and /healthz on the port named http")
    func probes() throws {
        let docs = try Self.kubernetesDocuments()
        let pod = try #require(try Self.resource("Deployment", in: docs)["spec"]?["template"]?["spec"])
        let worker = try #require(pod["containers"]?.array?.first { $0["name"]?.string == "herald" })
        #expect(worker["readinessProbe"]?["httpGet"]?["path"]?.string == "/readyz")
        #expect(worker["readinessProbe"]?["httpGet"]?["port"]?.string == "http")
        #expect(worker["livenessProbe"]?["httpGet"]?["path"]?.string == "/healthz")
        #expect(worker["livenessProbe"]?["httpGet"]?["port"]?.string == "http")

        // One port: the container's `http` port, the Service and the Dockerfile all use the
        // value the worker reads (HERALD_HTTP_PORT), which kustomize copies into the Deployment.
        let port = try #require(try Self.resource("ConfigMap", in: docs)["data"]?["HERALD_HTTP_PORT"]?.string)
        let http = worker["ports"]?.array?.first { $0["name"]?.string == "http" }
        #expect(http?["containerPort"]?.string == port)
        let service = try Self.resource("Service", in: docs)
        let servicePort = service["spec"]?["ports"]?.array?.first { $0["name"]?.string == "http" }
        #expect(servicePort?["targetPort"]?.string == "http")
        #expect(servicePort?["port"]?.string == port)
        #expect(try Self.read("Dockerfile").contains("\nEXPOSE \(port)\n"))
        let kustomization = try Self.read("kubernetes/base/kustomization.yaml")
        #expect(kustomization.contains("fieldPath: data.HERALD_HTTP_PORT"))
        #expect(kustomization.contains("ports.[name=http].containerPort"))
    }

    @Test("terminationGracePeriodSeconds exceeds the drain deadline")
    func gracePeriod() throws {
        let docs = try Self.kubernetesDocuments()
        let pod = try #require(try Self.resource("Deployment", in: docs)["spec"]?["template"]?["spec"])
        let grace = try #require(pod["terminationGracePeriodSeconds"]?.string.flatMap { Int($0) })
        let configured = try Self.resource("ConfigMap", in: docs)["data"]?["HERALD_SHUTDOWN_DEADLINE_SECONDS"]?.string
        let deadline = try #require(Int(configured ?? "25"))
        #expect(grace > 25, "the default drain deadline is 25 s")
        #expect(grace > deadline)
        let unit = try Self.read("systemd/herald.service")
        let stop = unit.split(separator: "\n").first { $0.hasPrefix("TimeoutStopSec=") }
        #expect(stop.flatMap { Int($0.dropFirst("TimeoutStopSec=".count)) } ?? 0 > 25)
    }

    @Test("every container runs as a non-root user with all capabilities dropped")
    func containersAreLockedDown() throws {
        let docs = try Self.kubernetesDocuments()
        let workloads = docs.filter { ["Deployment", "Job", "StatefulSet", "DaemonSet"].contains($0["kind"]?.string ?? "") }
        #expect(workloads.count >= 2, "the worker Deployment and the migration Job")
        var containers = 0
        for workload in workloads {
            let pod = try #require(workload["spec"]?["template"]?["spec"])
            let podContext = pod["securityContext"]
            let all = (pod["initContainers"]?.array ?? []) + (pod["containers"]?.array ?? [])
            for container in all {
                containers += 1
                let name = "\(workload["kind"]?.string ?? "?") \(container["name"]?.string ?? "?")"
                let context = container["securityContext"]
                let nonRoot = context?["runAsNonRoot"]?.string ?? podContext?["runAsNonRoot"]?.string
                let user = context?["runAsUser"]?.string ?? podContext?["runAsUser"]?.string
                #expect(nonRoot == "true", "\(name): runAsNonRoot")
                #expect(user.flatMap { Int($0) }.map { $0 > 0 } == true, "\(name): numeric non-root runAsUser")
                #expect(context?["capabilities"]?["drop"]?.array?.contains { $0.string == "ALL" } == true, "\(name): drop ALL")
                #expect(context?["allowPrivilegeEscalation"]?.string == "false", "\(name): allowPrivilegeEscalation")
                #expect(context?["readOnlyRootFilesystem"]?.string == "true", "\(name): readOnlyRootFilesystem")
                let seccomp = context?["seccompProfile"]?["type"]?.string ?? podContext?["seccompProfile"]?["type"]?.string
                #expect(seccomp == "RuntimeDefault", "\(name): seccomp")
            }
        }
        #expect(containers >= 2)
        // The image itself runs as a numeric non-root user.
        let users = try Self.read("Dockerfile").split(separator: "\n").filter { $0.hasPrefix("USER ") }
        let uid = users.last.flatMap { Int($0.dropFirst(5).prefix { $0.isNumber }) }
        #expect(uid.map { $0 > 0 } == true, "the Dockerfile's final USER must be a numeric non-root uid")
    }

    @Test("the database URL comes from a Secret and the example holds placeholders only")
    func secrets() throws {
        let docs = try Self.kubernetesDocuments()
        let pod = try #require(try Self.resource("Deployment", in: docs)["spec"]?["template"]?["spec"])
        let worker = try #require(pod["containers"]?.array?.first)
        let url = worker["env"]?.array?.first { $0["name"]?.string == "HERALD_DATABASE_URL" }
        #expect(url?["valueFrom"]?["secretKeyRef"]?["key"]?.string == "HERALD_DATABASE_URL")
        #expect(try Self.resource("ConfigMap", in: docs)["data"]?["HERALD_DATABASE_URL"] == nil)
        let kustomization = try #require(
            try MiniYAML.parseDocuments(try Self.read("kubernetes/base/kustomization.yaml")).first)
        let resources = try #require(kustomization["resources"]?.array).compactMap(\.string)
        #expect(resources.contains("deployment.yaml"))
        #expect(!resources.contains("secret.example.yaml"), "an apply must never overwrite the real Secret")
        let secrets = try MiniYAML.parseDocuments(try Self.read("kubernetes/base/secret.example.yaml"))
        #expect(secrets.map { $0["metadata"]?["name"]?.string } == ["herald", "herald-provider-credentials"])
        for secret in secrets {
            #expect(secret["kind"]?.string == "Secret")
            #expect(secret["data"] == nil, "placeholders go in stringData, readable")
            guard case .mapping(let values)? = secret["stringData"] else {
                Issue.record("no stringData in \(secret["metadata"]?["name"]?.string ?? "?")")
                continue
            }
            for (key, value) in values {
                #expect(value.string?.contains("REPLACE") == true, "\(key) must be a placeholder")
            }
        }
    }

    /// The environment variables Herald reads, as patterns, from its one settings table
    /// (`app.<id>.apns.private_key[_file]` becomes `HERALD_APP_[A-Z0-9_]+_APNS_PRIVATE_KEY(?:_FILE)?`).
    static func configurationKeyPatterns() throws -> [Regex<Substring>] {
        try Setting.all.map { try Regex<Substring>($0.environmentPattern) }
    }

    @Test("every HERALD_* setting in the ConfigMaps and herald.env.example is one Herald reads")
    func settingsAreKnown() throws {
        let patterns = try Self.configurationKeyPatterns()
        func known(_ name: String) -> Bool { patterns.contains { name.wholeMatch(of: $0) != nil } }
        #expect(known("HERALD_APP_FOODSHARE_APNS_PRIVATE_KEY_FILE"))
        #expect(known("HERALD_PACING_EXPO_PER_SECOND"))
        #expect(!known("HERALD_APP_MAIN_APNS_PRIVATE_KEY_PATH"))

        let docs = try Self.kubernetesDocuments()
        var names: [String] = []
        for map in docs where map["kind"]?.string == "ConfigMap" {
            guard case .mapping(let data)? = map["data"] else { continue }
            names += data.map(\.0)
        }
        let env = try Self.read("systemd/herald.env.example").split(separator: "\n")
            .filter { $0.hasPrefix("HERALD_") }.map { String($0.prefix { $0 != "=" }) }
        #expect(env.count >= 30)
        for name in names + env where name != "HERALD_DATABASE_URL" {
            #expect(known(name), "\(name) is not a setting Herald reads")
        }
        #expect(!names.contains("HERALD_DATABASE_URL"), "the database URL belongs in the Secret")
    }

    @Test("the push providers are live and every credential file is a key of the mounted Secret")
    func providerCredentials() throws {
        let docs = try Self.kubernetesDocuments()
        let providers = try #require(docs.first { $0["metadata"]?["name"]?.string == "herald-providers" }?["data"])
        for kind in ["APNS", "FCM", "EXPO", "WEBPUSH"] {
            #expect(providers["HERALD_PROVIDERS_\(kind)"]?.string == "live", "HERALD_PROVIDERS_\(kind)")
        }
        let apps = try #require(providers["HERALD_APP_IDS"]?.string).split(separator: ",").map { $0.uppercased() }
        #expect(!apps.isEmpty)

        // The worker reads both ConfigMaps and mounts the Secret where the _FILE settings point;
        // the migration Job reads only herald-config and sees no provider credentials.
        let worker = try #require(
            try Self.resource("Deployment", in: docs)["spec"]?["template"]?["spec"]?["containers"]?.array?.first)
        let maps = worker["envFrom"]?.array?.compactMap { $0["configMapRef"]?["name"]?.string } ?? []
        #expect(maps == ["herald-config", "herald-providers"])
        let mount = worker["volumeMounts"]?.array?.first { $0["mountPath"]?.string == "/etc/herald/credentials" }
        #expect(mount?["readOnly"]?.string == "true")
        let volumes = try Self.resource("Deployment", in: docs)["spec"]?["template"]?["spec"]?["volumes"]?.array ?? []
        let volume = volumes.first { $0["name"]?.string == mount?["name"]?.string }
        #expect(volume?["secret"]?["secretName"]?.string == "herald-provider-credentials")
        let job = try #require(try Self.resource("Job", in: docs)["spec"]?["template"]?["spec"]?["containers"]?.array?.first)
        #expect(job["envFrom"]?.array?.compactMap { $0["configMapRef"]?["name"]?.string } == ["herald-config"])

        let secrets = try MiniYAML.parseDocuments(try Self.read("kubernetes/base/secret.example.yaml"))
        let credentials = try #require(secrets.first { $0["metadata"]?["name"]?.string == "herald-provider-credentials" })
        guard case .mapping(let values)? = credentials["stringData"] else {
            Issue.record("herald-provider-credentials has no stringData")
            return
        }
        let keys = Set(values.map(\.0))
        guard case .mapping(let settings) = providers else { return }
        var referenced: Set<String> = []
        for (name, value) in settings where name.hasSuffix("_FILE") {
            #expect(apps.contains { name.hasPrefix("HERALD_APP_\($0)_") }, "\(name): its app is not in HERALD_APP_IDS")
            let path = try #require(value.string)
            #expect(path.hasPrefix("/etc/herald/credentials/"), "\(name) points outside the mounted Secret")
            let key = String(path.dropFirst("/etc/herald/credentials/".count))
            #expect(keys.contains(key), "\(name) reads \(key), which secret.example.yaml does not have")
            referenced.insert(key)
        }
        #expect(referenced == keys, "Secret keys no setting reads: \(keys.subtracting(referenced).sorted())")
        for kind in ["APNS_PRIVATE_KEY", "FCM_SERVICE_ACCOUNT", "EXPO_ACCESS_TOKEN", "WEBPUSH_PRIVATE_KEY"] {
            #expect(settings.contains { $0.0.hasSuffix("_\(kind)_FILE") }, "no \(kind)_FILE setting")
        }
    }

    @Test("KEDA scales the worker on outbox lag, authenticated from the Secret")
    func keda() throws {
        let docs = try Self.kubernetesDocuments()
        let scaled = try Self.resource("ScaledObject", in: docs)
        #expect(scaled["apiVersion"]?.string == "keda.sh/v1alpha1")
        #expect(scaled["spec"]?["scaleTargetRef"]?["name"]?.string == "herald")
        let triggers = try #require(scaled["spec"]?["triggers"]?.array)
        #expect(!triggers.isEmpty)
        for trigger in triggers {
            #expect(trigger["type"]?.string == "postgresql")
            #expect(trigger["metadata"]?["query"]?.string?.contains("herald.outbox") == true)
            #expect(trigger["metadata"]?["targetQueryValue"]?.string.flatMap { Double($0) } != nil)
            #expect(trigger["authenticationRef"]?["name"]?.string == "herald-postgresql")
        }
        let auth = try Self.resource("TriggerAuthentication", in: docs)
        let ref = auth["spec"]?["secretTargetRef"]?.array?.first
        #expect(ref?["parameter"]?.string == "connection")
        #expect(ref?["name"]?.string == "herald")
    }

    // MARK: - The YAML reader itself

    @Test("the YAML reader handles the forms the manifests use and refuses others")
    func miniYAML() throws {
        let docs = try MiniYAML.parseDocuments(
            """
            # comment
            a: 1
            b:
              c: "x # not a comment"
              d: [ALL, 'it''s']
            list:
            - name: one
              value: 1
            -   name: two
            nested:
              - - deep
            block: |
              line one
                line two
            ---
            k: v  # trailing
            """)
        #expect(docs.count == 2)
        #expect(docs[0]["a"]?.string == "1")
        #expect(docs[0]["b"]?["c"]?.string == "x # not a comment")
        #expect(docs[0]["b"]?["d"]?.array?.map(\.string) == ["ALL", "it's"])
        #expect(docs[0]["list"]?.array?.count == 2)
        #expect(docs[0]["list"]?.array?.last?["name"]?.string == "two")
        #expect(docs[0]["nested"]?.array?.first?.array?.first?.string == "deep")
        #expect(docs[0]["block"]?.string == "line one\n  line two\n")
        #expect(docs[1]["k"]?.string == "v")
        #expect(throws: ManifestError.self) { try MiniYAML.parseDocuments("a: &anchor 1\n") }
        #expect(throws: ManifestError.self) { try MiniYAML.parseDocuments("a: {b: 1}\n") }
        #expect(throws: ManifestError.self) { try MiniYAML.parseDocuments("a:\n  b: 1\n c: 2\n") }
    }
}

struct ManifestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A parsed YAML value: scalars stay strings (the tests compare them as written).
indirect enum YAMLNode: Sendable, Equatable {
    case scalar(String)
    case sequence([YAMLNode])
    case mapping([(String, YAMLNode)])
    case null

    var string: String? { if case .scalar(let s) = self { s } else { nil } }
    var array: [YAMLNode]? { if case .sequence(let a) = self { a } else { nil } }
    subscript(key: String) -> YAMLNode? {
        if case .mapping(let pairs) = self { pairs.first { $0.0 == key }?.1 } else { nil }
    }

    static func == (lhs: YAMLNode, rhs: YAMLNode) -> Bool {
        switch (lhs, rhs) {
        case (.scalar(let a), .scalar(let b)): a == b
        case (.sequence(let a), .sequence(let b)): a == b
        case (.mapping(let a), .mapping(let b)): a.map(\.0) == b.map(\.0) && a.map(\.1) == b.map(\.1)
        case (.null, .null): true
        default: false
        }
    }
}

/// Reads the block-style YAML subset the manifests are written in (mappings, sequences, plain and
/// quoted scalars, flow sequences of scalars, `|`/`>` block scalars, comments, `---`). Anything
/// else (anchors, tags, flow mappings, bad indentation) throws rather than being misread, so a
/// test never passes on a document it did not understand.
enum MiniYAML {
    struct Line {
        let number: Int
        let indent: Int
        let text: String  // without indentation and trailing comment
        let raw: String
    }

    static func parseDocuments(_ source: String) throws -> [YAMLNode] {
        var documents: [[String]] = [[]]
        for line in source.components(separatedBy: "\n") {
            if line.hasPrefix("---") { documents.append([]) } else { documents[documents.count - 1].append(line) }
        }
        return try documents.compactMap { rawLines in
            var parser = Parser(raw: rawLines)
            return try parser.document()
        }
    }

    struct Parser {
        let raw: [String]
        var lines: [Line] = []
        var position = 0

        init(raw: [String]) {
            self.raw = raw
            for (number, line) in raw.enumerated() {
                let text = Self.stripComment(line)
                if text.trimmingCharacters(in: .whitespaces).isEmpty { continue }
                let indent = text.prefix { $0 == " " }.count
                lines.append(Line(number: number, indent: indent, text: String(text.dropFirst(indent)), raw: line))
            }
        }

        static func stripComment(_ line: String) -> String {
            var quote: Character?
            var previous: Character = " "  // a quote opens a string only where a value can start
            for (offset, char) in line.enumerated() {
                if let q = quote {
                    if char == q { quote = nil }
                } else if (char == "\"" || char == "'") && " [,{:".contains(previous) {
                    quote = char
                } else if char == "#" && (previous == " " || offset == 0) {
                    return String(line.prefix(offset)).replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
                }
                previous = char
            }
            return line.replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }

        mutating func document() throws -> YAMLNode? {
            guard position < lines.count else { return nil }
            let node = try block(indent: lines[position].indent)
            if position < lines.count {
                throw ManifestError("line \(lines[position].number + 1): unexpected indentation: \(lines[position].raw)")
            }
            return node
        }

        mutating func block(indent: Int) throws -> YAMLNode {
            let line = lines[position]
            if line.text == "-" || line.text.hasPrefix("- ") { return try sequence(indent: indent) }
            return try mapping(indent: indent)
        }

        mutating func sequence(indent: Int) throws -> YAMLNode {
            var items: [YAMLNode] = []
            while position < lines.count, lines[position].indent == indent,
                lines[position].text == "-" || lines[position].text.hasPrefix("- ")
            {
                let line = lines[position]
                let rest = line.text.dropFirst(1).drop { $0 == " " }
                if rest.isEmpty {
                    position += 1
                    guard position < lines.count, lines[position].indent > indent else {
                        items.append(.null)
                        continue
                    }
                    items.append(try block(indent: lines[position].indent))
                } else if rest == "-" || rest.hasPrefix("- ") || Self.startsMapping(rest) {
                    // The item's content starts a block at its own column: rewrite this line as such.
                    let column = indent + (line.text.count - rest.count)
                    lines[position] = Line(number: line.number, indent: column, text: String(rest), raw: line.raw)
                    items.append(try block(indent: column))
                } else {
                    position += 1
                    items.append(try Self.scalar(String(rest), line: line))
                }
            }
            return .sequence(items)
        }

        mutating func mapping(indent: Int) throws -> YAMLNode {
            var pairs: [(String, YAMLNode)] = []
            while position < lines.count, lines[position].indent == indent {
                let line = lines[position]
                if line.text.hasPrefix("- ") { break }
                let (key, rest) = try Self.splitKey(line)
                position += 1
                if pairs.contains(where: { $0.0 == key }) {
                    throw ManifestError("line \(line.number + 1): duplicate key \(key)")
                }
                if rest.isEmpty {
                    if position < lines.count, lines[position].indent > indent {
                        pairs.append((key, try block(indent: lines[position].indent)))
                    } else if position < lines.count, lines[position].indent == indent,
                        lines[position].text.hasPrefix("- ")
                    {
                        pairs.append((key, try sequence(indent: indent)))  // `key:` then `- item` at the same column
                    } else {
                        pairs.append((key, .null))
                    }
                } else if rest == "|" || rest == ">" || rest == "|-" || rest == ">-" {
                    pairs.append((key, .scalar(blockScalar(after: line, indent: indent, style: rest))))
                } else {
                    pairs.append((key, try Self.scalar(rest, line: line)))
                }
            }
            if position < lines.count, lines[position].indent > indent {
                throw ManifestError("line \(lines[position].number + 1): unexpected indentation: \(lines[position].raw)")
            }
            return .mapping(pairs)
        }

        /// Consumes the raw lines of a block scalar (comments inside it are content).
        mutating func blockScalar(after header: Line, indent: Int, style: String) -> String {
            var body: [String] = []
            var number = header.number + 1
            while number < raw.count {
                let text = raw[number]
                let lineIndent = text.prefix { $0 == " " }.count
                if !text.trimmingCharacters(in: .whitespaces).isEmpty && lineIndent <= indent { break }
                body.append(text)
                number += 1
            }
            while position < lines.count, lines[position].number < number { position += 1 }
            while body.last?.trimmingCharacters(in: .whitespaces).isEmpty == true { body.removeLast() }
            let strip = body.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
                .map { $0.prefix { $0 == " " }.count }.min() ?? 0
            let content = body.map { String($0.dropFirst(min(strip, $0.count))) }
            let joined = style.hasPrefix(">") ? content.joined(separator: " ") : content.joined(separator: "\n")
            return style.hasSuffix("-") ? joined : joined + "\n"
        }

        /// Whether a sequence item's text is `key: value` or `key:` rather than a scalar.
        static func startsMapping(_ text: Substring) -> Bool {
            if let quote = text.first, quote == "\"" || quote == "'" {
                guard let end = text.dropFirst().firstIndex(of: quote) else { return false }
                return text[text.index(after: end)...].hasPrefix(":")
            }
            if text.first == "[" || text.first == "{" { return false }
            return text.contains(": ") || text.hasSuffix(":")
        }

        static func splitKey(_ line: Line) throws -> (String, String) {
            var text = Substring(line.text)
            var key: String
            if let quote = text.first, quote == "\"" || quote == "'" {
                guard let end = text.dropFirst().firstIndex(of: quote) else {
                    throw ManifestError("line \(line.number + 1): unterminated key")
                }
                key = String(text[text.index(after: text.startIndex)..<end])
                text = text[text.index(after: end)...]
                guard text.hasPrefix(":") else { throw ManifestError("line \(line.number + 1): expected ':'") }
                return (key, String(text.dropFirst().trimmingCharacters(in: .whitespaces)))
            }
            if text.hasSuffix(":") {
                key = String(text.dropLast())
                if !key.contains(": ") { return (key, "") }
            }
            guard let range = text.range(of: ": ") else {
                throw ManifestError("line \(line.number + 1): expected `key: value`: \(line.raw)")
            }
            key = String(text[..<range.lowerBound])
            return (key, String(text[range.upperBound...]).trimmingCharacters(in: .whitespaces))
        }

        static func scalar(_ text: String, line: Line) throws -> YAMLNode {
            guard let first = text.first else { return .null }
            switch first {
            case "\"":
                guard text.count >= 2, text.hasSuffix("\"") else { throw ManifestError("line \(line.number + 1): bad string") }
                return .scalar(
                    String(text.dropFirst().dropLast()).replacingOccurrences(of: "\\\"", with: "\"")
                        .replacingOccurrences(of: "\\\\", with: "\\"))
            case "'":
                guard text.count >= 2, text.hasSuffix("'") else { throw ManifestError("line \(line.number + 1): bad string") }
                return .scalar(String(text.dropFirst().dropLast()).replacingOccurrences(of: "''", with: "'"))
            case "[":
                guard text.hasSuffix("]") else { throw ManifestError("line \(line.number + 1): multi-line flow sequence") }
                let inner = text.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                if inner.isEmpty { return .sequence([]) }
                return .sequence(
                    try inner.split(separator: ",").map {
                        try scalar($0.trimmingCharacters(in: .whitespaces), line: line)
                    })
            case "{":
                if text == "{}" { return .mapping([]) }
                throw ManifestError("line \(line.number + 1): flow mappings are not supported")
            case "&", "*", "!", "%", "@", "`":
                throw ManifestError("line \(line.number + 1): anchors, aliases and tags are not supported")
            default:
                if text == "~" || text == "null" { return .null }
                return .scalar(text)
            }
        }
    }
}
