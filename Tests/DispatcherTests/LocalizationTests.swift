import Dispatcher
import Foundation
import HeraldCore
import Testing

@Suite("Localization and summary items: locale matching, distances, {titles}")
struct LocalizationTests {
    static let variants: [String: LocalizedText] = [
        "sv": LocalizedText(title: "Hej", body: "Kropp"), "sv-FI": LocalizedText(title: "Hej Finland"),
        "pt-BR": LocalizedText(title: "Olá"),
    ]

    @Test(
        "a device's locale picks its exact tag, then its language, else none (the payload's own text)",
        arguments: [
            ("sv-SE", ["Hej"]), ("sv_fi", ["Hej Finland", "Hej"]), ("SV", ["Hej"]), ("pt-BR", ["Olá"]),
            ("pt-PT", []), ("en-GB", []), ("", []),
        ] as [(String, [String])]
    )
    func candidates(locale: String, titles: [String]) {
        #expect(LocaleText.candidates(for: locale, in: Self.variants).compactMap(\.title) == titles)
        #expect(LocaleText.best(for: locale, in: Self.variants)?.title == titles.first)
    }

    @Test("no locale: no variant")
    func noLocale() {
        #expect(LocaleText.candidates(for: nil, in: Self.variants).isEmpty)
    }

    @Test(
        "distances as the locale writes them, with their unit",
        arguments: [
            (3.0, "en", "3 km"), (3.04, "sv-SE", "3 km"), (3.2, "sv-SE", "3,2 km"), (3.2, "en-US", "3.2 km"),
            (3.25, "de", "3,3 km"), (0.4, "fr", "0,4 km"), (12.0, nil, "12 km"), (7.16, nil, "7.2 km"),
        ] as [(Double, String?, String)]
    )
    func kilometres(km: Double, locale: String?, expected: String) {
        #expect(LocaleText.kilometres(km, locale: locale) == expected)
    }

    @Test("{titles}: newest first, whole titles while they fit the preview, at least the newest (shortened)")
    func titles() {
        #expect(Dispatcher.titles(["Bus 4", "Tram 7", "Train 12"], limit: 100) == "Bus 4, Tram 7, Train 12")
        #expect(Dispatcher.titles(["Bus 4", "Tram 7", "Train 12"], limit: 13) == "Bus 4, Tram 7")
        #expect(Dispatcher.titles(["Bus 4", "Tram 7", "Train 12"], limit: 12) == "Bus 4")
        #expect(Dispatcher.titles(["A very long journey title"], limit: 6) == "A very…")
        #expect(Dispatcher.titles([], limit: 100) == "")
    }

    @Test("summary templates: the category's own per-locale words, else Herald's in the languages it knows")
    func summaryTemplates() {
        func policy(_ coalesce: String) -> CategoryPolicy {
            CategoryPolicy(
                name: "c",
                mandatory: false,
                optIn: false,
                quietHours: "defer",
                coalesceJSON: coalesce,
                rateLimitJSON: "{}"
            )
        }
        let own = policy(
            #"{"summarizeAbove": 1, "summaryTitle": "New", "summaryBody": "{count} near you", "localized": {"sv": {"title": "Nya"}}}"#
        ).summary
        #expect(own.text(for: "sv-SE") == ("Nya", "{count} near you"))
        #expect(own.text(for: "de") == ("New", "{count} near you"), "a category's own words are not replaced")
        let herald = policy(#"{"summarizeAbove": 1}"#).summary
        #expect(herald.text(for: "sv") == ("{title}", "{count} nya aviseringar"))
        #expect(herald.text(for: "ja") == ("{title}", "{count} new notifications"))
        let trailing = policy(#"{"mode": "trailing"}"#).summary
        #expect(trailing.text(for: "nb-NO").body == "Flere oppdateringer: {body}")
    }
}
