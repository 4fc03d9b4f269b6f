import HeraldCore
import Logging

/// Decides, request by request, whether a provider may be called now, and may overrule what the
/// provider answered (an outage hands messages back instead of spending their attempt).
///
/// ``ResilientProvider`` passes one to its adapter; an adapter called directly gets none.
package protocol RequestGate: Sendable {
    /// Called just before a request leaves, with the app whose credential it uses and how many
    /// messages it carries. `.handBack` keeps it from leaving.
    func admit(appID: String, weight: Int) async -> RequestAdmission
    /// The same answer when it can be given without waiting; nil when ``admit(appID:weight:)``
    /// would wait (for requests in flight to finish). A sender holding admitted requests that are
    /// not sent yet must send them before it waits, or it would wait for itself.
    func admitNow(appID: String, weight: Int) -> RequestAdmission?
    /// Called with the request's outcomes as soon as they are known; returns the outcomes to record.
    func complete(_ ticket: RequestTicket, _ outcomes: [DeliveryOutcome]) -> [DeliveryOutcome]
}

/// A gate's answer for one request.
package enum RequestAdmission: Sendable {
    /// Send it, then report to ``RequestGate/complete(_:_:)`` with this ticket.
    case go(RequestTicket)
    /// Do not send; every message of the request gets this outcome.
    case handBack(DeliveryOutcome)
}

/// What a gate remembers about an admitted request.
package struct RequestTicket: Sendable {
    /// The circuit's half-open probe.
    package var probe: Bool
    /// The app whose credential the request used (a request carries messages of one app).
    package var appID: String
    /// How many messages the request carries.
    package var weight: Int
    package init(probe: Bool, appID: String, weight: Int = 1) {
        self.probe = probe
        self.appID = appID
        self.weight = weight
    }
}

/// The one bounded send loop every adapter uses: requests run concurrently, at most
/// `concurrency` at once, each admitted by the gate just before it leaves and reported to it as
/// soon as it returns.
package enum RequestDriver {
    /// Sends `requests` — each a list of indexes into `messages` that travel in one provider
    /// request — and returns one outcome per message (nil for messages in no request).
    ///
    /// - Parameter send: sends request `r` (its position in `requests`); returns one outcome per
    ///   index of `requests[r]`, in order. Never throws.
    package static func send(
        _ messages: [PushMessage],
        requests: [[Int]],
        concurrency: Int,
        gate: (any RequestGate)?,
        _ send: @escaping @Sendable (_ r: Int) async -> [DeliveryOutcome]
    ) async -> [DeliveryOutcome?] {
        var outcomes = [DeliveryOutcome?](repeating: nil, count: messages.count)
        guard !requests.isEmpty else { return outcomes }
        @Sendable func run(_ r: Int) async -> [DeliveryOutcome] {
            let indexes = requests[r]
            guard let gate else { return await send(r) }
            switch await gate.admit(appID: messages[indexes[0]].device.appID, weight: indexes.count) {
            case .handBack(let outcome):
                return indexes.map { _ in outcome }
            case .go(let ticket):
                var answered = await send(r)
                if answered.count < indexes.count {
                    answered += Array(
                        repeating: DeliveryOutcome(.retry, reason: .noOutcome),
                        count: indexes.count - answered.count
                    )
                }
                return gate.complete(ticket, answered)
            }
        }
        if requests.count == 1 {
            for (i, outcome) in zip(requests[0], await run(0)) { outcomes[i] = outcome }
            return outcomes
        }
        // Children never throw, so one failed request cannot cancel its siblings.
        await withTaskGroup(of: (Int, [DeliveryOutcome]).self) { group in
            var next = 0
            func addNext() {
                let r = next
                next += 1
                group.addTask { (r, await run(r)) }
            }
            while next < min(max(1, concurrency), requests.count) { addNext() }
            while let (r, answered) = await group.next() {
                for (i, outcome) in zip(requests[r], answered) { outcomes[i] = outcome }
                if next < requests.count { addNext() }
            }
        }
        return outcomes
    }

    /// One request per message, sent in chunks of at most `chunkSize` that each leave together
    /// (``HTTP2Client`` writes a chunk's requests as frames on one connection and flushes once).
    /// Each message is admitted by the gate just before its chunk leaves and reported to it with
    /// its outcome; chunks go one after another.
    ///
    /// - Parameter send: sends the messages at these indexes; returns one outcome per index, in order.
    package static func sendChunked(
        _ messages: [PushMessage],
        indexes: [Int],
        chunkSize: Int,
        gate: (any RequestGate)?,
        _ send: ([Int]) async -> [DeliveryOutcome]
    ) async -> [DeliveryOutcome?] {
        var outcomes = [DeliveryOutcome?](repeating: nil, count: messages.count)
        var start = 0
        let size = max(1, chunkSize)
        while start < indexes.count {
            let chunk = indexes[start..<min(start + size, indexes.count)]
            start = chunk.endIndex
            var admitted: [Int] = []
            var tickets: [RequestTicket] = []
            admitted.reserveCapacity(chunk.count)
            if let gate {
                for position in chunk.indices {
                    let i = indexes[position]
                    let app = messages[i].device.appID
                    // Wait for a permit only while holding none: the permits of a chunk come back
                    // when it is answered, so waiting with some in hand could wait forever.
                    let admission: RequestAdmission
                    if admitted.isEmpty {
                        admission = await gate.admit(appID: app, weight: 1)
                    } else if let now = gate.admitNow(appID: app, weight: 1) {
                        admission = now
                    } else {
                        start = position  // the rest go in the next chunk
                        break
                    }
                    switch admission {
                    case .handBack(let outcome): outcomes[i] = outcome
                    case .go(let ticket):
                        admitted.append(i)
                        tickets.append(ticket)
                    }
                }
            } else {
                admitted = Array(chunk)
            }
            guard !admitted.isEmpty else { continue }
            let answered = await send(admitted)
            for (k, i) in admitted.enumerated() {
                let outcome = k < answered.count ? answered[k] : DeliveryOutcome(.retry, reason: .noOutcome)
                outcomes[i] = gate.map { $0.complete(tickets[k], [outcome])[0] } ?? outcome
            }
        }
        return outcomes
    }

    /// One request per message.
    package static func sendEach(
        _ messages: [PushMessage],
        concurrency: Int,
        gate: (any RequestGate)?,
        _ send: @escaping @Sendable (PushMessage) async -> DeliveryOutcome
    ) async -> [DeliveryOutcome] {
        let outcomes = await Self.send(
            messages,
            requests: messages.indices.map { [$0] },
            concurrency: concurrency,
            gate: gate
        ) { r in [await send(messages[r])] }
        return outcomes.map { $0 ?? DeliveryOutcome(.retry, reason: .noOutcome) }
    }
}
