import Crypto
import Foundation
import HeraldCore
import SwiftASN1
import X509

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A throwaway certificate authority and the server certificate it signs, generated at start.
///
/// The CA (P-256, valid 30 days) is written as PEM so clients can trust it; the leaf names
/// `127.0.0.1`, `::1`, `localhost` and the configured host, with IP and DNS SANs.
struct SimulatorCertificates {
    /// The CA certificate as PEM, for ``ProviderSimulator/caCertificatePath``.
    var caPEM: String
    /// The leaf certificate, DER.
    var leafDER: [UInt8]
    /// The leaf's private key, PKCS#8 DER.
    var leafKeyDER: [UInt8]

    static func generate(host: String, now: Date = Date()) throws -> SimulatorCertificates {
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            OrganizationName("Herald")
            CommonName("Herald Provider Simulator CA")
        }
        let notBefore = now.addingTimeInterval(-3600)
        let notAfter = now.addingTimeInterval(30 * 24 * 3600)
        let caPublicKey = Certificate.PublicKey(caKey.publicKey)
        let ca = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: caPublicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caName,
            subject: caName,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: caPublicKey)
            },
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )

        let leafKey = P256.Signing.PrivateKey()
        let leafPublicKey = Certificate.PublicKey(leafKey.publicKey)
        var names: [GeneralName] = [
            .dnsName("localhost"),
            .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
            .ipAddress(ASN1OctetString(contentBytes: ArraySlice([UInt8](repeating: 0, count: 15) + [1]))),
        ]
        if let address = ipAddressBytes(host) {
            if !names.contains(.ipAddress(ASN1OctetString(contentBytes: ArraySlice(address)))) {
                names.append(.ipAddress(ASN1OctetString(contentBytes: ArraySlice(address))))
            }
        } else if host != "localhost", !host.isEmpty {
            names.append(.dnsName(host))
        }
        let leafName = try DistinguishedName {
            OrganizationName("Herald")
            CommonName("localhost")
        }
        let leaf = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: leafPublicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caName,
            subject: leafName,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
                SubjectKeyIdentifier(hash: leafPublicKey)
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: caPublicKey).keyIdentifier)
            },
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )

        var serializer = DER.Serializer()
        try serializer.serialize(leaf)
        return SimulatorCertificates(
            caPEM: try ca.serializeAsPEM().pemString,
            leafDER: serializer.serializedBytes,
            leafKeyDER: Array(leafKey.derRepresentation)
        )
    }

    /// The bytes of an IPv4 or IPv6 literal, nil for a host name.
    private static func ipAddressBytes(_ host: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }
}
