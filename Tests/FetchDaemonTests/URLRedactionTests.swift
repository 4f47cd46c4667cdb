import XCTest

@testable import FetchDaemon

/// The one rule for secrets in URLs (HAR files, the diagnostic log, error messages).
final class URLRedactionTests: XCTestCase {
    private let m = URLRedaction.encodedMask

    func testTableOfURLs() {
        let cases: [(String, String)] = [
            // Userinfo: the password always, the user stays.
            ("http://user:PASS@host/", "http://user:\(m)@host/"),
            ("https://user:p%40ss@host:8443/x?y=1", "https://user:\(m)@host:8443/x?y=1"),
            ("http://u:p@ss@host/", "http://u:\(m)@host/"),
            ("http://user@host/", "http://user@host/"),
            ("http://user:@host/", "http://user:@host/"),
            ("http://host/a@b", "http://host/a@b"),
            // Query names, whatever their case; innocent ones stay, empty values stay.
            ("http://h/p?access_token=T1&page=2", "http://h/p?access_token=\(m)&page=2"),
            ("http://h/?sig=S&signature=S2&X-Amz-Signature=S3&x-amz-credential=C&X-Amz-Security-Token=T",
             "http://h/?sig=\(m)&signature=\(m)&X-Amz-Signature=\(m)&x-amz-credential=\(m)&X-Amz-Security-Token=\(m)"),
            ("http://h/?X-Goog-Signature=S&X-Goog-Credential=C&X-Goog-Date=20250101",
             "http://h/?X-Goog-Signature=\(m)&X-Goog-Credential=\(m)&X-Goog-Date=20250101"),
            ("http://h/?KEY=k&Code=c&state=s&auth=a&session=x&api_key=z&apikey=y&id_token=i&refresh_token=r",
             "http://h/?KEY=\(m)&Code=\(m)&state=s&auth=\(m)&session=\(m)&api_key=\(m)&apikey=\(m)&id_token=\(m)&refresh_token=\(m)"),
            ("http://h/?password=a&passwd=b&client_secret=c&my_token=d&secret=e",
             "http://h/?password=\(m)&passwd=\(m)&client_secret=\(m)&my_token=\(m)&secret=\(m)"),
            ("http://h/?key=&page=1&flag", "http://h/?key=&page=1&flag"),
            ("http://h/?monkey=1&zipcode=2&author=3&keyword=4", "http://h/?monkey=1&zipcode=2&author=3&keyword=4"),
            ("http://h/?acc%65ss_token=T", "http://h/?acc%65ss_token=\(m)"),
            // The fragment is a parameter list too (OAuth's implicit flow).
            ("http://h/cb#access_token=T&state=s&expires_in=3600", "http://h/cb#access_token=\(m)&state=s&expires_in=3600"),
            ("http://h/p?code=C#state=s&id_token=I", "http://h/p?code=\(m)#state=s&id_token=\(m)"),
            ("http://h/p#section-2", "http://h/p#section-2"),
            // Relative URLs (a Location header).
            ("/cb?code=C&state=s", "/cb?code=\(m)&state=s"),
            ("?sig=S", "?sig=\(m)"),
            // A URL inside a parameter: redacted too, written percent-encoded.
            ("http://h/go?url=%2Fecho%3Fsig%3DS%26a%3D1&x=2", "http://h/go?url=%2Fecho%3Fsig%3D%253Credacted%253E%26a%3D1&x=2"),
            ("http://h/go?next=https%3A%2F%2Fu%3Apw%40o%2F", "http://h/go?next=https%3A%2F%2Fu%3A%253Credacted%253E%40o%2F"),
            ("http://h/go?next=%2Fplain%3Fpage%3D2", "http://h/go?next=%2Fplain%3Fpage%3D2"),
            // Nothing to do.
            ("http://h/", "http://h/"),
            ("", ""),
            ("not a url", "not a url"),
        ]
        for (url, expected) in cases {
            XCTAssertEqual(URLRedaction.redact(url), expected, url)
        }
    }

    func testSecretNames() {
        for name in ["access_token", "ID_TOKEN", "token", "api_key", "ApiKey", "key", "password", "passwd", "secret",
                     "client_secret", "sig", "Signature", "X-Amz-Signature", "x-amz-credential", "X-Amz-Security-Token",
                     "x-goog-signature", "X-Goog-Credential", "code", "auth", "session", "newPassword", "csrf_token"] {
            XCTAssertTrue(URLRedaction.isSecretName(name), name)
        }
        for name in ["user", "page", "grant_type", "q", "state", "monkey", "zipcode", "author", "keyword", "url", ""] {
            XCTAssertFalse(URLRedaction.isSecretName(name), name)
        }
    }

    func testSecretsAreTheDecodedValues() {
        XCTAssertEqual(URLRedaction.secrets(in: "http://bob:p%40ss@h/?sig=a%2Fb&page=2#access_token=T+1"),
                       ["p@ss", "a/b", "T 1"])
        XCTAssertEqual(URLRedaction.secrets(in: "/go?url=%2Fcb%3Fcode%3DC1"), ["C1"], "nested")
        XCTAssertEqual(URLRedaction.secrets(in: "http://h/?page=2"), [])
    }

    func testURLsInFreeText() {
        let cases: [(String, String)] = [
            ("job 1: GET http://u:pw@h/?sig=S&a=1", "job 1: GET http://u:\(m)@h/?sig=\(m)&a=1"),
            ("\"http://h/?key=K\" and 'https://h/?code=C' <ftp://a:b@h/>",
             "\"http://h/?key=\(m)\" and 'https://h/?code=\(m)' <ftp://a:\(m)@h/>"),
            ("two http://h/?token=A then http://h/?token=B.", "two http://h/?token=\(m) then http://h/?token=\(m)"),
            ("ends at a newline http://h/?sig=S\nnext=line", "ends at a newline http://h/?sig=\(m)\nnext=line"),
            ("no scheme ://h/?sig=S, a relative /p?sig=S", "no scheme ://h/?sig=S, a relative /p?sig=S"),
            ("time 10:30 key=value", "time 10:30 key=value"),
            ("", ""),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(URLRedaction.redactURLs(in: text), expected, text)
        }
    }

    func testNonASCIITextStaysWhole() {
        let text = "Grüße http://h/ü?sig=日本&q=😀 — fin"
        XCTAssertEqual(URLRedaction.redactURLs(in: text), "Grüße http://h/ü?sig=\(m)&q=😀 — fin")
    }
}
