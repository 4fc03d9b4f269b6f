import Foundation

/// A position on Earth in decimal degrees (WGS 84).
package struct GeoPoint: Sendable, Hashable {
    /// Latitude, −90 ... 90.
    package var lat: Double
    /// Longitude, −180 ... 180.
    package var lon: Double

    package init(lat: Double, lon: Double) {
        self.lat = lat
        self.lon = lon
    }

    /// Reads `{"lat": …, "lon": …}`; nil when either is missing or out of range.
    package init?(_ json: JSONValue?) {
        let members = json?.members ?? [:]
        guard let lat = members["lat"]?.number, let lon = members["lon"]?.number,
            (-90...90).contains(lat), (-180...180).contains(lon)
        else { return nil }
        self.init(lat: lat, lon: lon)
    }

    /// Great-circle distance in kilometres (haversine, mean Earth radius 6,371 km).
    package func distanceKm(to other: GeoPoint) -> Double {
        let radians = Double.pi / 180
        let dLat = (other.lat - lat) * radians
        let dLon = (other.lon - lon) * radians
        let h =
            sin(dLat / 2) * sin(dLat / 2)
            + cos(lat * radians) * cos(other.lat * radians) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * 6371 * asin(min(1, sqrt(h)))
    }
}
