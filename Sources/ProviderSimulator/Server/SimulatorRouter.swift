import Foundation
import HeraldCore

/// What the server core does with one request once it has been processed.
enum SimulatorAction: Sendable {
    case respond(SimulatorResponse)
    /// Close the connection without answering.
    case dropConnection
    /// HTTP/2 GOAWAY with JSON debug data, then close (a drop on HTTP/1.1).
    case goaway
}

/// Routes a complete request: the control API under `/_sim/`, else the first service that
/// matches, with the fault plan consulted in between.
struct SimulatorRouter: Sendable {
    let services: [any SimulatedService]
    let context: SimulatorContext
    let faults: FaultPlan
    let control: ControlAPI

    init(services: [any SimulatedService], context: SimulatorContext, faults: FaultPlan) {
        self.services = services
        self.context = context
        self.faults = faults
        self.control = ControlAPI(services: services, context: context, faults: faults)
    }

    func process(_ request: SimulatorRequest) async -> SimulatorAction {
        if request.path == "/_sim" || request.path.hasPrefix("/_sim/") {
            // A service may own a control route of its own (Web Push subscriptions); no faults apply.
            if let service = services.first(where: { $0.matches(request) }) {
                return .respond(await service.handle(request, fault: nil, context: context))
            }
            return .respond(control.handle(request))
        }
        guard let service = services.first(where: { $0.matches(request) }) else {
            return .respond(.json(status: 404, ["error": "no simulated service serves this path"]))
        }
        let decision = faults.decide(provider: service.provider, token: service.targetToken(request))
        if let latency = decision?.latency {
            try? await Task.sleep(for: latency)
        }
        var injected: InjectedFault?
        switch decision?.effect {
        case .dropConnection?:
            context.recorder.countRejected(provider: service.provider)
            return .dropConnection
        case .goaway?:
            context.recorder.countRejected(provider: service.provider)
            return .goaway
        case .inject(let fault)?:
            injected = fault
        case .none?, nil:
            break
        }
        let response = await service.handle(request, fault: injected, context: context)
        // The core counts every error answer, injected or real, so services only record accepts.
        if response.status >= 400 { context.recorder.countRejected(provider: service.provider) }
        return .respond(response)
    }
}
