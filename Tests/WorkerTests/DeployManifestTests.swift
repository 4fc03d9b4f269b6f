import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import HeraldMetrics
import Settings
import Testing
import Yams

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
            guard manager.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue else {
                continue
            }
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
                #expect(
                    metric != nil,
                    "\(file.path) names \(token), which Sources/Metrics/MetricNames.swift does not export"
                )
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
        #expect(
            Self.metricTokens(in: #"rate(herald_jobs_claimed_total{job="x"}[5m])"#) == ["herald_jobs_claimed_total"]
        )
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
        let names = try FileManager.default.contentsOfDirectory(atPath: base.path).filter { $0.hasSuffix(".yaml") }
            .sorted()
        return try names.flatMap { name in
            try YAMLDocuments.parse(try String(contentsOf: base.appendingPathComponent(name), encoding: .utf8))
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
        let workloads = docs.filter {
            ["Deployment", "Job", "StatefulSet", "DaemonSet"].contains($0["kind"]?.string ?? "")
        }
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
                #expect(
                    context?["capabilities"]?["drop"]?.array?.contains { $0.string == "ALL" } == true,
                    "\(name): drop ALL"
                )
                #expect(context?["allowPrivilegeEscalation"]?.string == "false", "\(name): allowPrivilegeEscalation")
                #expect(context?["readOnlyRootFilesystem"]?.string == "true", "\(name): readOnlyRootFilesystem")
                let seccomp =
                    context?["seccompProfile"]?["type"]?.string ?? podContext?["seccompProfile"]?["type"]?.string
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
            try YAMLDocuments.parse(try Self.read("kubernetes/base/kustomization.yaml")).first
        )
        let resources = try #require(kustomization["resources"]?.array).compactMap(\.string)
        #expect(resources.contains("deployment.yaml"))
        #expect(!resources.contains("secret.example.yaml"), "an apply must never overwrite the real Secret")
        let secrets = try YAMLDocuments.parse(try Self.read("kubernetes/base/secret.example.yaml"))
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
            try Self.resource("Deployment", in: docs)["spec"]?["template"]?["spec"]?["containers"]?.array?.first
        )
        let maps = worker["envFrom"]?.array?.compactMap { $0["configMapRef"]?["name"]?.string } ?? []
        #expect(maps == ["herald-config", "herald-providers"])
        let mount = worker["volumeMounts"]?.array?.first { $0["mountPath"]?.string == "/etc/herald/credentials" }
        #expect(mount?["readOnly"]?.string == "true")
        let volumes = try Self.resource("Deployment", in: docs)["spec"]?["template"]?["spec"]?["volumes"]?.array ?? []
        let volume = volumes.first { $0["name"]?.string == mount?["name"]?.string }
        #expect(volume?["secret"]?["secretName"]?.string == "herald-provider-credentials")
        let job = try #require(
            try Self.resource("Job", in: docs)["spec"]?["template"]?["spec"]?["containers"]?.array?.first
        )
        #expect(job["envFrom"]?.array?.compactMap { $0["configMapRef"]?["name"]?.string } == ["herald-config"])

        let secrets = try YAMLDocuments.parse(try Self.read("kubernetes/base/secret.example.yaml"))
        let credentials = try #require(
            secrets.first { $0["metadata"]?["name"]?.string == "herald-provider-credentials" }
        )
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

    // MARK: - Reading YAML (Yams)

    @Test("manifests are read with Yams into plain values: scalars as written, malformed YAML refused")
    func readsYAML() throws {
        let docs = try YAMLDocuments.parse(
            """
            # comment
            a: 1
            b:
              c: "x # not a comment"
              d: [ALL, 'it''s']
              e: {f: g}
            list:
            - name: one
            -   name: two
            block: |
              line one
                line two
            ---
            k: v  # trailing
            """
        )
        #expect(docs.count == 2)
        #expect(docs[0]["a"]?.string == "1")
        #expect(docs[0]["b"]?["c"]?.string == "x # not a comment")
        #expect(docs[0]["b"]?["d"]?.array?.map(\.string) == ["ALL", "it's"])
        #expect(docs[0]["b"]?["e"]?["f"]?.string == "g")
        #expect(docs[0]["list"]?.array?.last?["name"]?.string == "two")
        #expect(docs[0]["block"]?.string == "line one\n  line two\n")
        #expect(docs[1]["k"]?.string == "v")
        #expect(try YAMLDocuments.parse("a: &x 1\nb: *x\n")[0]["b"]?.string == "1")  // a real YAML reader
        #expect(throws: (any Error).self) { try YAMLDocuments.parse("a:\n  b: 1\n c: 2\n") }
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

/// YAML documents through Yams, as ``YAMLNode`` values (scalars kept as written). Malformed YAML
/// throws, so a test never passes on a document it did not read.
enum YAMLDocuments {
    static func parse(_ source: String) throws -> [YAMLNode] {
        let parser = try Parser(yaml: source)
        var documents: [YAMLNode] = []
        while let root = try parser.nextRoot() { documents.append(try convert(root)) }
        return documents
    }

    private static func convert(_ node: Yams.Node) throws -> YAMLNode {
        switch node {
        case .scalar(let scalar):
            // A plain empty, `~` or `null` is YAML's null; everything else stays the text as written.
            return scalar.style == .plain && ["", "~", "null"].contains(scalar.string) ? .null : .scalar(scalar.string)
        case .sequence(let sequence):
            return .sequence(try sequence.map(convert))
        case .mapping(let mapping):
            return .mapping(
                try mapping.map { pair in
                    guard case .scalar(let key) = pair.key else {
                        throw ManifestError("a mapping key that is not a scalar")
                    }
                    return (key.string, try convert(pair.value))
                }
            )
        case .alias(let alias):
            throw ManifestError("unresolved YAML alias \(alias.anchor)")
        }
    }
}
