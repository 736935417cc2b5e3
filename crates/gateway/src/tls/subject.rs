//! A certificate's subject as an RFC 4514 string: what `[[clients]] cert_subject` is compared
//! with, exactly.
//!
//! A small DER walk rather than an X.509 crate: the certificate has already been verified by
//! rustls (webpki), and all that is needed is one field rendered one way. The form, as Java's
//! `X500Principal.getName("RFC2253")` and Go's `pkix.Name.String()` give it:
//!
//! - RDNs from the last in the certificate to the first, joined by `,` with no spaces;
//!   attributes of a multi-valued RDN joined by `+`, also last first (as OpenSSL prints them);
//! - attribute types by name for those of RFC 4514's table (`CN`, `L`, `ST`, `O`, `OU`, `C`,
//!   `STREET`, `DC`, `UID`), any other as its dotted OID (`2.5.4.5`, `1.2.840.113549.1.9.1`);
//! - values of named types that are strings (UTF8String, PrintableString, IA5String,
//!   NumericString, VisibleString, BMPString, UniversalString) as text, with `" + , ; < > \`
//!   escaped by a backslash, a leading `#` or space and a trailing space escaped, and NUL as
//!   `\00`; every other value (a dotted type's, a non-string one's) as `#` and the lower-case hex
//!   of its whole DER encoding.
//!
//! So a certificate made with `openssl req -subj "/C=DE/O=Acme/CN=orchestrator-a"` has the
//! subject `CN=orchestrator-a,O=Acme,C=DE`. For subjects whose types are all in the table this
//! is what `openssl x509 -noout -subject -nameopt RFC2253,-esc_msb` prints (without `-esc_msb`
//! OpenSSL escapes UTF-8 bytes as `\C3\BC`, which RFC 4514 does not ask for); OpenSSL names
//! some other types (`emailAddress=`, `serialNumber=`) where RFC 4514 has the dotted OID.

/// The subject of the DER certificate `cert` in RFC 4514 form; `None` if it is not a
/// certificate this walk can read.
pub fn rfc4514(cert: &[u8]) -> Option<String> {
    let (SEQUENCE, cert, _) = element(cert)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(cert)? else {
        return None;
    };
    // TBSCertificate: [0] version (optional), serialNumber, signature, issuer, validity, subject.
    let (tag, _, mut rest) = element(tbs)?;
    if tag == VERSION {
        rest = element(rest)?.2; // the serial number
    }
    for _ in 0..3 {
        rest = element(rest)?.2; // signature, issuer, validity
    }
    let (SEQUENCE, subject, _) = element(rest)? else {
        return None;
    };
    name(subject)
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const VERSION: u8 = 0xa0;

/// One DER element at the start of `input`: its tag, its contents, and what follows it.
/// Definite lengths of at most four bytes only (DER has no other).
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1f == 0x1f {
        return None; // high tag numbers never occur in a Name
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, rest) = rest.split_at(n);
        let len = bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, rest)
    };
    if len > rest.len() {
        return None;
    }
    let (content, rest) = rest.split_at(len);
    Some((tag, content, rest))
}

/// A Name (SEQUENCE OF RelativeDistinguishedName), last RDN first.
fn name(mut rdns: &[u8]) -> Option<String> {
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (SET, mut atvs, rest) = element(rdns)? else {
            return None;
        };
        let mut rdn = Vec::new();
        while !atvs.is_empty() {
            let (SEQUENCE, atv, more) = element(atvs)? else {
                return None;
            };
            let mut s = String::new();
            attribute(atv, &mut s)?;
            rdn.push(s);
            atvs = more;
        }
        if rdn.is_empty() {
            return None; // an RDN has at least one attribute
        }
        // Last first within a multi-valued RDN too, as OpenSSL prints it.
        rdn.reverse();
        parts.push(rdn.join("+"));
        rdns = rest;
    }
    parts.reverse();
    Some(parts.join(","))
}

/// One AttributeTypeAndValue, as `type=value`.
fn attribute(atv: &[u8], out: &mut String) -> Option<()> {
    let (OID, oid, value) = element(atv)? else {
        return None;
    };
    let (tag, content, end) = element(value)?;
    if !end.is_empty() {
        return None;
    }
    let dotted = dotted(oid)?;
    let short = match dotted.as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "2.5.4.6" => Some("C"),
        "2.5.4.9" => Some("STREET"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        _ => None,
    };
    out.push_str(short.unwrap_or(&dotted));
    out.push('=');
    match short.and_then(|_| text(tag, content)) {
        Some(s) => escape(&s, out),
        None => {
            out.push('#');
            for b in value {
                out.push_str(&format!("{b:02x}"));
            }
        }
    }
    Some(())
}

/// An OID's contents in dotted decimal; `None` if malformed (empty, non-minimal, unterminated
/// or beyond 64 bits per arc).
fn dotted(oid: &[u8]) -> Option<String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut v: u64 = 0;
    let mut fresh = true;
    for &b in oid {
        if fresh && b == 0x80 {
            return None;
        }
        if v > u64::MAX >> 7 {
            return None;
        }
        v = (v << 7) | u64::from(b & 0x7f);
        fresh = b & 0x80 == 0;
        if fresh {
            arcs.push(v);
            v = 0;
        }
    }
    let (&first, rest) = arcs.split_first()?;
    if !fresh {
        return None;
    }
    let (a, b) = match first {
        0..=39 => (0, first),
        40..=79 => (1, first - 40),
        _ => (2, first - 80),
    };
    let mut s = format!("{a}.{b}");
    for arc in rest {
        s.push_str(&format!(".{arc}"));
    }
    Some(s)
}

/// A string value's text; `None` for other types (and for bytes that are not that string type).
fn text(tag: u8, content: &[u8]) -> Option<String> {
    match tag {
        // UTF8String
        0x0c => std::str::from_utf8(content).ok().map(str::to_owned),
        // NumericString, PrintableString, IA5String, VisibleString
        0x12 | 0x13 | 0x16 | 0x1a => std::str::from_utf8(content)
            .ok()
            .filter(|s| s.is_ascii())
            .map(str::to_owned),
        // BMPString: UTF-16BE
        0x1e if content.len() % 2 == 0 => {
            let units = content
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]));
            char::decode_utf16(units)
                .collect::<Result<String, _>>()
                .ok()
        }
        // UniversalString: UTF-32BE
        0x1c if content.len() % 4 == 0 => content
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        _ => None,
    }
}

/// RFC 4514 §2.4: escape what would end or change the value.
fn escape(v: &str, out: &mut String) {
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        match c {
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\0' => out.push_str("\\00"),
            '#' if i == 0 => out.push_str("\\#"),
            ' ' if i == 0 || i == last => out.push_str("\\ "),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, DnValue, KeyPair};

    fn cert(dn: &[(DnType, DnValue)]) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        let mut name = DistinguishedName::new();
        for (t, v) in dn {
            name.push(t.clone(), v.clone());
        }
        params.distinguished_name = name;
        let key = KeyPair::generate().expect("key");
        params
            .self_signed(&key)
            .expect("certificate")
            .der()
            .to_vec()
    }

    fn utf8(s: &str) -> DnValue {
        DnValue::Utf8String(s.into())
    }

    #[test]
    fn rdns_come_last_first_without_spaces() {
        let der = cert(&[
            (
                DnType::CountryName,
                DnValue::PrintableString("DE".try_into().expect("p")),
            ),
            (DnType::OrganizationName, utf8("Acme")),
            (DnType::OrganizationalUnitName, utf8("Agents")),
            (DnType::CommonName, utf8("orchestrator-a")),
        ]);
        assert_eq!(
            rfc4514(&der).as_deref(),
            Some("CN=orchestrator-a,OU=Agents,O=Acme,C=DE")
        );
        let der = cert(&[(DnType::CommonName, utf8("orchestrator-a"))]);
        assert_eq!(rfc4514(&der).as_deref(), Some("CN=orchestrator-a"));
    }

    #[test]
    fn special_characters_are_escaped() {
        let der = cert(&[
            (DnType::OrganizationName, utf8("Acme, Inc.")),
            (DnType::CommonName, utf8(" #a+b=c;\"<x>\\ ")),
        ]);
        assert_eq!(
            rfc4514(&der).as_deref(),
            Some(r#"CN=\ #a\+b=c\;\"\<x\>\\\ ,O=Acme\, Inc."#)
        );
        let der = cert(&[(DnType::CommonName, utf8("#lead"))]);
        assert_eq!(rfc4514(&der).as_deref(), Some(r"CN=\#lead"));
        let der = cert(&[(DnType::CommonName, utf8("Grüße"))]);
        assert_eq!(rfc4514(&der).as_deref(), Some("CN=Grüße"));
    }

    #[test]
    fn other_types_are_dotted_with_hex_values() {
        // emailAddress (1.2.840.113549.1.9.1) is not in RFC 4514's table.
        let der = cert(&[
            (
                DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]),
                DnValue::Ia5String("a@b".try_into().expect("ia5")),
            ),
            (DnType::CommonName, utf8("x")),
        ]);
        assert_eq!(
            rfc4514(&der).as_deref(),
            Some("CN=x,1.2.840.113549.1.9.1=#1603614062")
        );
    }

    #[test]
    fn oids_and_elements_are_read_strictly() {
        assert_eq!(dotted(&[0x55, 0x04, 0x03]).as_deref(), Some("2.5.4.3"));
        assert_eq!(
            dotted(&[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19]).as_deref(),
            Some("0.9.2342.19200300.100.1.25")
        );
        assert_eq!(dotted(&[0x88, 0x37]).as_deref(), Some("2.999"));
        assert_eq!(dotted(&[]), None);
        assert_eq!(dotted(&[0x55, 0x84]), None, "unterminated arc");
        assert_eq!(dotted(&[0x80, 0x01]), None, "non-minimal arc");
        assert_eq!(
            element(&[0x30, 0x80, 0x00, 0x00]),
            None,
            "indefinite length"
        );
        assert_eq!(element(&[0x30, 0x05, 0x00]), None, "longer than the input");
        assert_eq!(rfc4514(b"not a certificate"), None);
        assert_eq!(rfc4514(&[]), None);
    }

    /// Made with `openssl req -x509 -utf8 -multivalue-rdn -subj "/DC=com/DC=example/C=DE/
    /// ST=Bayern/L=München/O=Acme, Inc./OU=A+UID=u1/OU=x;y<z>/CN= #spaced \"q\" "`.
    const OPENSSL_CERT: &str = "-----BEGIN CERTIFICATE-----
MIICzTCCAnOgAwIBAgIUQAhaPD45fJ/RNfSxfOsk3p8cYDUwCgYIKoZIzj0EAwIw
gbsxEzARBgoJkiaJk/IsZAEZFgNjb20xFzAVBgoJkiaJk/IsZAEZFgdleGFtcGxl
MQswCQYDVQQGEwJERTEPMA0GA1UECAwGQmF5ZXJuMREwDwYDVQQHDAhNw7xuY2hl
bjETMBEGA1UECgwKQWNtZSwgSW5jLjEcMAgGA1UECwwBQTAQBgoJkiaJk/IsZAEB
DAJ1MTEPMA0GA1UECwwGeDt5PHo+MRYwFAYDVQQDDA0gI3NwYWNlZCAicSIgMB4X
DTI2MTEzMDEzMTUzMloXDTI2MTIwMTEzMTUzMlowgbsxEzARBgoJkiaJk/IsZAEZ
FgNjb20xFzAVBgoJkiaJk/IsZAEZFgdleGFtcGxlMQswCQYDVQQGEwJERTEPMA0G
A1UECAwGQmF5ZXJuMREwDwYDVQQHDAhNw7xuY2hlbjETMBEGA1UECgwKQWNtZSwg
SW5jLjEcMAgGA1UECwwBQTAQBgoJkiaJk/IsZAEBDAJ1MTEPMA0GA1UECwwGeDt5
PHo+MRYwFAYDVQQDDA0gI3NwYWNlZCAicSIgMFkwEwYHKoZIzj0CAQYIKoZIzj0D
AQcDQgAEiUlWuMBYYlKuA4kCofQHAojeHjuhOF/S+fprEZ/hm0TVCLUrzF7cJFrM
6LEy+dJuvZKxBYuWNz7bHA+cHzDe/6NTMFEwHQYDVR0OBBYEFN+idZsioexzhurq
JHIGmWO99lQBMB8GA1UdIwQYMBaAFN+idZsioexzhurqJHIGmWO99lQBMA8GA1Ud
EwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIgVrtZ1eNMiulYIYzKdMMCOjHx
B4weY3MpUQr7smzsdVQCIQDWDSpU4Sf+sINym36YulxIr9hAzdeOi2wQ/sok7hW9
Fg==
-----END CERTIFICATE-----
";

    #[test]
    fn the_subject_is_what_openssl_prints_in_rfc2253_form() {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(OPENSSL_CERT.as_bytes())
            .expect("pem");
        // What `openssl x509 -noout -subject -nameopt RFC2253,-esc_msb` printed for it.
        assert_eq!(
            rfc4514(&der).as_deref(),
            Some(
                r#"CN=\ #spaced \"q\"\ ,OU=x\;y\<z\>,UID=u1+OU=A,O=Acme\, Inc.,L=München,ST=Bayern,C=DE,DC=example,DC=com"#
            )
        );
    }

    #[test]
    fn an_empty_subject_is_the_empty_string() {
        assert_eq!(rfc4514(&cert(&[])).as_deref(), Some(""));
    }
}
