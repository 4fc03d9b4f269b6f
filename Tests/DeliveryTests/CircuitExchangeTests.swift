import Clocks
import DatabaseTestSupport
import Delivery
import Foundation
import Logging
import Providers
import Queue
import Testing

/// Two workers' circuit breakers recording through `herald.provider_circuits` (migration 0024),
/// each exchange run by hand; the breakers run on test clocks, the table on the real database.
@Suite("Open circuits recorded for starting workers through the database")
struct CircuitExchangeTests {
    @Test(
        "an opening is recorded once, adopted by a worker that starts, never by one that runs; a good probe's close ends the adoption"
    )
    func openingAdoptedAndEnded() async throws {
        try await TestDatabase.withFresh { db in
            var configuration = CircuitBreaker.Configuration()
            configuration.failureThreshold = 1
            let clockA = TestClock()
            let a = CircuitBreaker(configuration: configuration, clock: AnyClock(clockA))
            let b = CircuitBreaker(configuration: configuration, clock: AnyClock(TestClock()))
            let logger = Logger(label: "test")
            let exchangeA = CircuitExchange(circuits: ["apns": a], outbox: db.outbox("worker-a"), logger: logger)
            let exchangeB = CircuitExchange(circuits: ["apns": b], outbox: db.outbox("worker-b"), logger: logger)
            var recordedA = CircuitExchange.Recorded()
            var recordedB = CircuitExchange.Recorded()
            let openRows =
                "SELECT count(*) FROM herald.provider_circuits WHERE provider = 'apns' AND open_until > now()"

            // Nothing open: an exchange records nothing and adopts nothing.
            await exchangeA.exchange(&recordedA)
            #expect(try await db.int("SELECT count(*) FROM herald.provider_circuits") == 0)

            // A's own failure opens its circuit (5 s): recorded. A worker already running (C)
            // keeps counting its own failures; B, starting now, adopts it.
            let c = CircuitBreaker(configuration: configuration, clock: AnyClock(TestClock()))
            let exchangeC = CircuitExchange(circuits: ["apns": c], outbox: db.outbox("worker-c"), logger: logger)
            var recordedC = CircuitExchange.Recorded()
            #expect(await a.permit() == .pass)
            a.record(.failure, probe: false)
            #expect(a.state == .open)
            await exchangeA.exchange(&recordedA)
            #expect(try await db.int(openRows) == 1)
            #expect(try await db.scalar("SELECT worker FROM herald.provider_circuits") == "worker-a")
            await exchangeC.exchange(&recordedC)
            #expect(c.state == .closed, "a running worker does not adopt")
            await exchangeB.adoptOnce()
            #expect(b.isAdoptedOpen)
            #expect(b.openRemaining().map { $0 > .seconds(3) && $0 <= .seconds(5) } == true)
            // Neither records it again: B's is adopted, A's is the same opening.
            let stamp = try await db.scalar("SELECT updated_at::text FROM herald.provider_circuits")
            await exchangeA.exchange(&recordedA)
            await exchangeB.exchange(&recordedB)
            #expect(try await db.scalar("SELECT updated_at::text FROM herald.provider_circuits") == stamp)

            // A's period over, its probe finds the provider back: A records the close, and B's
            // adopted period ends with it (its next request is its own probe).
            await clockA.advance(by: .seconds(5))
            #expect(await a.permit() == .probe)
            a.record(.success, probe: true)
            #expect(a.state == .closed)
            await exchangeA.exchange(&recordedA)
            #expect(try await db.int(openRows) == 0)
            await exchangeB.exchange(&recordedB)
            #expect(!b.isAdoptedOpen)
            #expect(b.openRemaining() == nil)
            #expect(await b.permit() == .probe)
            b.record(.success, probe: true)
            #expect(b.state == .closed)
            // And nothing reopens either: A has no new opening to record.
            await exchangeA.exchange(&recordedA)
            await exchangeB.exchange(&recordedB)
            #expect(try await db.int(openRows) == 0)
            #expect(a.state == .closed && b.state == .closed)
        }
    }

    @Test("a worker starting while another's circuit is open adopts it before its first send")
    func adoptOnceAtStart() async throws {
        try await TestDatabase.withFresh { db in
            try await db.exec(
                "INSERT INTO herald.provider_circuits (provider, open_until, worker) VALUES ('fcm', now() + interval '30 seconds', 'w'), ('apns', now() - interval '1 second', 'w')"
            )
            let fcm = CircuitBreaker(clock: AnyClock(TestClock()))
            let apns = CircuitBreaker(clock: AnyClock(TestClock()))
            let exchange = CircuitExchange(
                circuits: ["fcm": fcm, "apns": apns],
                outbox: db.outbox(),
                logger: Logger(label: "test")
            )
            await exchange.adoptOnce()
            #expect(fcm.isAdoptedOpen)
            #expect(fcm.openRemaining().map { $0 > .seconds(25) && $0 <= .seconds(30) } == true)
            #expect(apns.state == .closed)  // that row's period is over
        }
    }
}
