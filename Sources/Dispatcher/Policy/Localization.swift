import Foundation
import HeraldCore

/// Locale matching and formatting for a device's `locale` (a BCP 47 tag such as `sv-SE`).
package enum LocaleText {
    /// The variant for `locale`: the exact tag (case and `_`/`-` ignored), else its language
    /// (`sv-SE` → `sv`); nil when neither is there (the caller uses its default text).
    package static func best<Value>(for locale: String?, in variants: [String: Value]) -> Value? {
        candidates(for: locale, in: variants).first
    }

    /// The variants that apply to `locale`, most specific first: the exact tag, then its language.
    /// A field the first lacks comes from the next, then from the default text.
    package static func candidates<Value>(for locale: String?, in variants: [String: Value]) -> [Value] {
        guard !variants.isEmpty, let locale, !locale.isEmpty else { return [] }
        let wanted = normalized(locale)
        let language = Self.language(of: wanted)
        var exact: Value?
        var languageMatch: Value?
        for (tag, value) in variants {
            let key = normalized(tag)
            if key == wanted { exact = value } else if key == language { languageMatch = value }
        }
        return [exact, languageMatch].compactMap { $0 }
    }

    /// `sv_se` → `sv-se`: lower case, hyphens.
    static func normalized(_ tag: String) -> String {
        String(tag.lowercased().map { $0 == "_" ? "-" : $0 })
    }

    /// The language subtag: `sv-se` → `sv`.
    static func language(of tag: String) -> String {
        String(tag.prefix { $0 != "-" && $0 != "_" }).lowercased()
    }

    /// Languages that write a decimal comma (CLDR): "3,2 km".
    private static let decimalComma: Set<String> = [
        "sv", "da", "nb", "nn", "no", "fi", "is", "de", "nl", "fr", "es", "it", "pt", "ca", "gl", "eu", "ro",
        "pl", "cs", "sk", "sl", "hr", "bs", "sr", "hu", "et", "lv", "lt", "ru", "uk", "be", "bg", "el", "tr",
        "az", "kk", "id", "vi", "af", "sq", "mk", "ka", "hy",
    ]

    /// A distance as the user reads it: one decimal when it is not whole, the locale's decimal
    /// separator, the unit: `3 km`, `3.2 km` (en), `3,2 km` (sv).
    package static func kilometres(_ km: Double, locale: String?) -> String {
        let tenths = Int((km * 10).rounded())
        let whole = tenths / 10
        let fraction = tenths % 10
        var text = String(whole)
        if fraction != 0 {
            let comma = locale.map { decimalComma.contains(language(of: $0)) } ?? false
            text += (comma ? "," : ".") + String(fraction)
        }
        return text + " km"
    }

    /// Herald's own summary words per language, for categories that do not write their own.
    /// `{count} new notifications` and the trailing `Multiple updates received: {body}`.
    package static let defaultSummaryBodies: [String: (count: String, trailing: String)] = [
        "sv": ("{count} nya aviseringar", "Flera uppdateringar: {body}"),
        "nb": ("{count} nye varsler", "Flere oppdateringer: {body}"),
        "da": ("{count} nye notifikationer", "Flere opdateringer: {body}"),
        "fi": ("{count} uutta ilmoitusta", "Useita päivityksiä: {body}"),
        "de": ("{count} neue Benachrichtigungen", "Mehrere Updates erhalten: {body}"),
        "nl": ("{count} nieuwe meldingen", "Meerdere updates ontvangen: {body}"),
        "fr": ("{count} nouvelles notifications", "Plusieurs mises à jour reçues : {body}"),
        "es": ("{count} notificaciones nuevas", "Varias actualizaciones recibidas: {body}"),
        "it": ("{count} nuove notifiche", "Più aggiornamenti ricevuti: {body}"),
        "pt": ("{count} novas notificações", "Várias atualizações recebidas: {body}"),
    ]
}
