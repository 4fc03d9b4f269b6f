// The provider simulator lives in this target (see issue 4). Placeholder until the server lands.
package enum ProviderSimulatorInfo {
    package static let name = "herald-provider-simulator"
}
